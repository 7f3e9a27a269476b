#include "llama_step.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include <cuda_runtime.h>

#include "argmax_rows.cuh"
#include "cublas_linear.cuh"
#include "cuda_check.h"
#include "device_buffer.h"
#include "embed_gather.cuh"
#include "kv_write.cuh"
#include "paged_decode_attention.cuh"
#include "prefill_attention.cuh"
#include "rms_norm.cuh"
#include "rope.cuh"
#include "silu_mul.cuh"

namespace rag::cuda {

namespace {

struct DeviceLayer {
  DeviceBuffer inputNorm, qkvT, qkvBias, oT, oBias, postNorm, gateUpT, gateUpBias, downT, downBias;
};

// Copies `count` floats of a host weight to `dst`; a null `host` is an error when `required`,
// else leaves `dst` empty (an absent bias).
Status uploadWeight(DeviceBuffer& dst, const float* host, int64_t count, bool required, const std::string& name) {
  if (!host) {
    if (required) return Status::invalidArgument("CudaLlamaStep: weight " + name + " is missing");
    return Status::ok();
  }
  return dst.upload(host, static_cast<size_t>(count) * sizeof(float), "copying " + name + " to the device");
}


// cuBLAS's scratch space (Hopper's recommended size); ours, so that a captured step allocates nothing.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

const float* f32(const DeviceBuffer& b) { return b.as<const float>(); }

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }


}  // namespace

struct CudaLlamaStep::Impl {
  model::LlamaConfig cfg;
  CudaLlamaStepParams params;
  DeviceBuffer blasWorkspace;
  CublasContext blas;
  DeviceBuffer embed, norm, lmHeadT;
  std::vector<DeviceLayer> layers;
  std::vector<DeviceBuffer> kPool, vPool;  // per layer F32 [numBlocks * blockSize, kvHeads, headDim]
  std::vector<double> ropeInvFreq;         // theta^(-2i/d), as the runner computes it
  // Per-step buffers: activations, the step's int32 tables, cos|sin, masks, logits.
  DeviceBuffer x, h, qkv, att, gateUp, act, ints, trig, masks, logits, tokens;
  // readRows/writeRows: the slots and the rows on the device.
  DeviceBuffer rowSlots, rowData;
  cudaStream_t stream = nullptr;  // every call's work, non-blocking: other threads' CUDA work is not ordered with it
  // A decode step's graph per shape: rows, logit rows, block-table width (padded to a power of two).
  struct GraphKey {
    int64_t rows, logitRows, tableStride;
    auto operator<=>(const GraphKey&) const = default;
  };
  std::map<GraphKey, cudaGraphExec_t> graphs;
  CudaLlamaStepStats stats;

  explicit Impl(CublasContext b) : blas(std::move(b)) {}
  ~Impl() {
    dropGraphs();
    if (stream) cudaStreamDestroy(stream);
  }
  void dropGraphs() {
    for (auto& [key, exec] : graphs) cudaGraphExecDestroy(exec);
    graphs.clear();
  }
  Status finish(std::string_view what) const { return fromCuda(cudaStreamSynchronize(stream), what); }
};

CudaLlamaStep::CudaLlamaStep(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
CudaLlamaStep::~CudaLlamaStep() = default;

Result<std::unique_ptr<CudaLlamaStep>> CudaLlamaStep::create(const model::LlamaConfig& config,
                                                             const LlamaHostWeights& weights,
                                                             const CudaLlamaStepParams& params) {
  const model::LlamaConfig& c = config;
  if (c.ropeScaling)
    return Status::invalidArgument("CudaLlamaStep: rope_scaling '" + c.ropeScaling->type +
                                   "' is not supported on the GPU path");
  if (c.hiddenSize <= 0 || c.intermediateSize <= 0 || c.vocabSize <= 0 || c.numHiddenLayers <= 0)
    return Status::invalidArgument("CudaLlamaStep: the config's sizes must be positive");
  if (c.headDim % 2 != 0)
    return Status::invalidArgument("CudaLlamaStep: head_dim " + std::to_string(c.headDim) + " is odd; RoPE needs pairs");
  if (params.blockSize <= 0 || params.numBlocks <= 0 || params.numBlocks * params.blockSize > 0x7fffffff)
    return Status::invalidArgument("CudaLlamaStep: blockSize and numBlocks must be positive, their product below 2^31");
  const DevicePagedKv shape{nullptr, nullptr, params.blockSize, c.numKeyValueHeads, c.headDim};
  RAG_RETURN_IF_ERROR(checkAttentionShape(c.numAttentionHeads, shape, "CudaLlamaStep"));
  if (static_cast<int64_t>(weights.layers.size()) != c.numHiddenLayers)
    return Status::invalidArgument("CudaLlamaStep: " + std::to_string(weights.layers.size()) + " layers of weights for a config of " +
                                   std::to_string(c.numHiddenLayers));
  RAG_ASSIGN_OR_RETURN(CublasContext blas, CublasContext::create());
  auto impl = std::make_unique<Impl>(std::move(blas));
  impl->cfg = c;
  impl->params = params;
  RAG_RETURN_IF_ERROR(fromCuda(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking), "creating the step's stream"));
  RAG_RETURN_IF_ERROR(impl->blasWorkspace.allocate(kCublasWorkspaceBytes, "allocating cuBLAS's workspace"));
  RAG_RETURN_IF_ERROR(impl->blas.setWorkspace(impl->blasWorkspace.as<void>(), impl->blasWorkspace.size()));
  impl->blas.setSmallRowKernel(params.smallRowLinear);
  const int64_t hid = c.hiddenSize, inter = c.intermediateSize, d = c.headDim;
  const int64_t qkvW = (c.numAttentionHeads + 2 * c.numKeyValueHeads) * d, attW = c.numAttentionHeads * d;
  RAG_RETURN_IF_ERROR(uploadWeight(impl->embed, weights.embed, c.vocabSize * hid, true, "embed"));
  RAG_RETURN_IF_ERROR(uploadWeight(impl->norm, weights.norm, hid, true, "norm"));
  RAG_RETURN_IF_ERROR(uploadWeight(impl->lmHeadT, weights.lmHeadT, hid * c.vocabSize, true, "lm_head"));
  const int64_t poolFloats = params.numBlocks * params.blockSize * c.numKeyValueHeads * d;
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const LlamaLayerHostWeights& w = weights.layers[l];
    DeviceLayer& dl = impl->layers.emplace_back();
    const std::string at = "layers." + std::to_string(l) + ".";
    RAG_RETURN_IF_ERROR(uploadWeight(dl.inputNorm, w.inputNorm, hid, true, at + "input_layernorm"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.qkvT, w.qkvT, hid * qkvW, true, at + "qkv"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.qkvBias, w.qkvBias, qkvW, false, at + "qkv bias"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.oT, w.oT, attW * hid, true, at + "o_proj"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.oBias, w.oBias, hid, false, at + "o_proj bias"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.postNorm, w.postNorm, hid, true, at + "post_attention_layernorm"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.gateUpT, w.gateUpT, hid * 2 * inter, true, at + "gate|up"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.gateUpBias, w.gateUpBias, 2 * inter, false, at + "gate|up bias"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.downT, w.downT, inter * hid, true, at + "down_proj"));
    RAG_RETURN_IF_ERROR(uploadWeight(dl.downBias, w.downBias, hid, false, at + "down_proj bias"));
    for (std::vector<DeviceBuffer>* pool : {&impl->kPool, &impl->vPool}) {
      DeviceBuffer& b = pool->emplace_back();
      RAG_RETURN_IF_ERROR(b.allocate(static_cast<size_t>(poolFloats) * sizeof(float), "allocating the KV pool"));
      RAG_RETURN_IF_ERROR(b.zero("clearing the KV pool"));
    }
  }
  for (int64_t i = 0; i < d / 2; ++i)
    impl->ropeInvFreq.push_back(std::exp(static_cast<double>(2 * i) / static_cast<double>(d) * -std::log(c.ropeTheta)));
  // The uploads and the pool's clearing ran on the legacy stream, which the step's stream does
  // not wait for.
  RAG_RETURN_IF_ERROR(synchronize("copying the weights to the device"));
  return std::unique_ptr<CudaLlamaStep>(new CudaLlamaStep(std::move(impl)));
}

namespace {

// The host side of a step: its checks, and everything its kernels read besides the weights and
// the pool. `ints` is one upload: tokens [rows] | slots [rows] | decode block tables
// [decodeItems, tableStride] | decode context lengths [decodeItems] | each prefill chunk's block
// table | logit row indices [logitRows]; `trig` is cos | sin, [2, rows, headDim]; `masks` the
// prefill chunks' masks end to end. A graph-replayed step pads the decode block tables to a
// power-of-two width, so that one graph serves contexts of many lengths.
struct StepPlan {
  std::vector<int64_t> rowStart;  // item k's rows begin at row rowStart[k]
  int64_t rows = 0;
  int64_t tableStride = 0;
  std::vector<int32_t> ints;
  size_t decodeTables = 0, decodeLens = 0, logitIndex = 0;
  std::vector<size_t> prefillTable, prefillMask;  // per item: offsets into ints and masks
  std::vector<float> trig;
  std::vector<uint8_t> masks;
};

Result<StepPlan> planStep(const model::LlamaConfig& c, const CudaLlamaStepParams& params,
                          const std::vector<double>& ropeInvFreq, std::span<const StepItem> items, int64_t decodeItems,
                          std::span<const StepLogitRow> logitRows, bool padTables) {
  const int64_t d = c.headDim, bs = params.blockSize;
  const size_t nd = static_cast<size_t>(decodeItems);
  if (decodeItems < 0 || nd > items.size())
    return Status::invalidArgument("CudaLlamaStep: " + std::to_string(decodeItems) + " decode items of " +
                                   std::to_string(items.size()));
  StepPlan plan;
  for (size_t k = 0; k < items.size(); ++k) {
    const StepItem& it = items[k];
    const int64_t rows = static_cast<int64_t>(it.tokens.size()), ctx = it.start + rows;
    const std::string which = "CudaLlamaStep: item " + std::to_string(k);
    if (rows == 0 || it.positions.size() != it.tokens.size() || it.start < 0)
      return Status::invalidArgument(which + " needs as many positions as tokens, at least one, from a start >= 0");
    if (k < nd && (rows != 1 || !it.allowed.empty()))
      return Status::invalidArgument(which + " is a decode item: one row, no mask");
    if (!it.allowed.empty() && it.allowed.size() != static_cast<size_t>(rows * ctx))
      return Status::invalidArgument(which + "'s mask is not [n, start + n]");
    if (static_cast<int64_t>(it.blocks.size()) < ceilDiv(ctx, bs))
      return Status::invalidArgument(which + "'s block table does not cover " + std::to_string(ctx) + " positions");
    for (int64_t b = 0; b < ceilDiv(ctx, bs); ++b)
      if (it.blocks[static_cast<size_t>(b)] < 0 || it.blocks[static_cast<size_t>(b)] >= params.numBlocks)
        return Status::invalidArgument(which + " names block " + std::to_string(it.blocks[static_cast<size_t>(b)]) +
                                       ", outside the pool of " + std::to_string(params.numBlocks));
    for (int32_t t : it.tokens)
      if (t < 0 || t >= c.vocabSize)
        return Status::invalidArgument(which + ": token id " + std::to_string(t) + " is outside the vocabulary");
    if (k < nd) plan.tableStride = std::max(plan.tableStride, ceilDiv(ctx, bs));
    plan.rowStart.push_back(plan.rows);
    plan.rows += rows;
  }
  if (padTables)
    plan.tableStride = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(plan.tableStride, 8))));
  const int64_t n = plan.rows;
  std::vector<int32_t>& ints = plan.ints;
  plan.trig.resize(static_cast<size_t>(2 * n * d));
  for (const StepItem& it : items) ints.insert(ints.end(), it.tokens.begin(), it.tokens.end());
  for (size_t k = 0; k < items.size(); ++k) {
    const StepItem& it = items[k];
    for (size_t j = 0; j < it.tokens.size(); ++j) {
      const int64_t p = it.start + static_cast<int64_t>(j), r = plan.rowStart[k] + static_cast<int64_t>(j);
      ints.push_back(static_cast<int32_t>(static_cast<int64_t>(it.blocks[static_cast<size_t>(p / bs)]) * bs + p % bs));
      const double pos = static_cast<double>(it.positions[j]);
      float* cosR = plan.trig.data() + r * d;
      float* sinR = cosR + n * d;
      for (int64_t f = 0; f < d / 2; ++f) {
        const double a = pos * ropeInvFreq[static_cast<size_t>(f)];
        cosR[f] = cosR[f + d / 2] = static_cast<float>(std::cos(a));
        sinR[f] = sinR[f + d / 2] = static_cast<float>(std::sin(a));
      }
    }
  }
  plan.decodeTables = ints.size();
  for (size_t k = 0; k < nd; ++k) {
    const StepItem& it = items[k];
    for (int64_t b = 0; b < plan.tableStride; ++b)
      ints.push_back(b < ceilDiv(it.start + 1, bs) ? it.blocks[static_cast<size_t>(b)] : 0);
  }
  plan.decodeLens = ints.size();
  for (size_t k = 0; k < nd; ++k) ints.push_back(static_cast<int32_t>(items[k].start + 1));
  plan.prefillTable.resize(items.size());
  plan.prefillMask.resize(items.size());
  for (size_t k = nd; k < items.size(); ++k) {
    const StepItem& it = items[k];
    plan.prefillTable[k] = ints.size();
    ints.insert(ints.end(), it.blocks.begin(), it.blocks.begin() + ceilDiv(it.start + static_cast<int64_t>(it.tokens.size()), bs));
    plan.prefillMask[k] = plan.masks.size();
    plan.masks.insert(plan.masks.end(), it.allowed.begin(), it.allowed.end());
  }
  plan.logitIndex = ints.size();
  for (const StepLogitRow& lr : logitRows) {
    if (lr.item >= items.size() || lr.row < 0 || lr.row >= static_cast<int64_t>(items[lr.item].tokens.size()))
      return Status::invalidArgument("CudaLlamaStep: a logit row names item " + std::to_string(lr.item) + " row " +
                                     std::to_string(lr.row) + ", which the step does not compute");
    ints.push_back(static_cast<int32_t>(plan.rowStart[lr.item] + lr.row));
  }
  return plan;
}

}  // namespace

namespace {

// Captures what `enqueue` puts on `stream` into an executable graph (nothing runs).
Result<cudaGraphExec_t> captureGraph(cudaStream_t stream, const std::function<Status()>& enqueue) {
  RAG_RETURN_IF_ERROR(fromCuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                               "beginning a CUDA graph capture"));
  Status s = enqueue();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);  // always: it ends the capture mode
  if (s.isOk()) s = fromCuda(ended, "capturing the decode step into a CUDA graph");
  cudaGraphExec_t exec = nullptr;
  if (s.isOk()) s = fromCuda(cudaGraphInstantiate(&exec, graph, 0), "instantiating the decode step's CUDA graph");
  if (graph) cudaGraphDestroy(graph);
  if (!s.isOk()) {
    cudaGetLastError();  // capture errors are not sticky: clear it for the eager step that follows
    return s;
  }
  return exec;
}

}  // namespace

Result<model::StepOutput> CudaLlamaStep::forward(std::span<const StepItem> items, int64_t decodeItems,
                                                 std::span<const StepLogitRow> logitRows) {
  Impl& m = *m_impl;
  const model::LlamaConfig& c = m.cfg;
  const int64_t hid = c.hiddenSize, nh = c.numAttentionHeads, nkv = c.numKeyValueHeads, d = c.headDim;
  const int64_t qkvW = (nh + 2 * nkv) * d, inter = c.intermediateSize, vocab = c.vocabSize;
  const int64_t bs = m.params.blockSize;
  const float eps = static_cast<float>(c.rmsNormEps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  RAG_RETURN_IF_ERROR(useDevice(m.params.device));
  // A decode-only step replays its shape's graph; prefill and mixed steps launch eagerly.
  const bool useGraph = m.params.graphs && m.stats.graphError.empty() && !items.empty() &&
                        decodeItems == static_cast<int64_t>(items.size());
  RAG_ASSIGN_OR_RETURN(const StepPlan plan, planStep(c, m.params, m.ropeInvFreq, items, decodeItems, logitRows, useGraph));
  const int64_t n = plan.rows, mRows = static_cast<int64_t>(logitRows.size());
  const size_t nd = static_cast<size_t>(decodeItems);
  if (n == 0) return model::StepOutput{};
  const std::vector<int32_t>& ints = plan.ints;
  const std::vector<int64_t>& rowStart = plan.rowStart;

  auto bytes = [](int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); };
  bool moved = false;
  RAG_RETURN_IF_ERROR(m.x.reserve(bytes(n * hid), "allocating the step's activations", &moved));
  RAG_RETURN_IF_ERROR(m.h.reserve(bytes(n * hid), "allocating the step's activations", &moved));
  RAG_RETURN_IF_ERROR(m.qkv.reserve(bytes(n * qkvW), "allocating the step's activations", &moved));
  RAG_RETURN_IF_ERROR(m.att.reserve(bytes(n * nh * d), "allocating the step's activations", &moved));
  RAG_RETURN_IF_ERROR(m.gateUp.reserve(bytes(n * 2 * inter), "allocating the step's activations", &moved));
  RAG_RETURN_IF_ERROR(m.act.reserve(bytes(n * inter), "allocating the step's activations", &moved));
  RAG_RETURN_IF_ERROR(m.logits.reserve(bytes(mRows * vocab), "allocating the step's logits", &moved));
  RAG_RETURN_IF_ERROR(m.tokens.reserve(static_cast<size_t>(mRows) * sizeof(int32_t), "allocating the step's tokens", &moved));
  RAG_RETURN_IF_ERROR(m.ints.reserve(ints.size() * sizeof(int32_t), "allocating the step's tables", &moved));
  RAG_RETURN_IF_ERROR(m.trig.reserve(bytes(2 * n * d), "allocating the step's RoPE tables", &moved));
  RAG_RETURN_IF_ERROR(m.masks.reserve(plan.masks.size(), "allocating the step's masks", &moved));
  if (moved) m.dropGraphs();
  cudaStream_t stream = m.stream;
  RAG_RETURN_IF_ERROR(m.ints.write(ints.data(), ints.size() * sizeof(int32_t), "copying the step's tables", 0, stream));
  RAG_RETURN_IF_ERROR(m.trig.write(plan.trig.data(), plan.trig.size() * sizeof(float), "copying the step's RoPE tables", 0, stream));
  RAG_RETURN_IF_ERROR(m.masks.write(plan.masks.data(), plan.masks.size(), "copying the step's masks", 0, stream));

  const int32_t* dInts = m.ints.as<const int32_t>();
  float* x = m.x.as<float>();
  float* h = m.h.as<float>();
  float* qkv = m.qkv.as<float>();
  float* att = m.att.as<float>();
  const float* cosT = m.trig.as<const float>();
  const float* sinT = cosT + n * d;
  // The step's kernels, all on `stream`; a graph records exactly this sequence.
  auto enqueue = [&]() -> Status {
    RAG_RETURN_IF_ERROR(embedGather(f32(m.embed), vocab, hid, dInts, n, x, stream));
    for (size_t l = 0; l < m.layers.size(); ++l) {
      const DeviceLayer& w = m.layers[l];
      const DevicePagedKv kv{f32(m.kPool[l]), f32(m.vPool[l]), bs, nkv, d};
      RAG_RETURN_IF_ERROR(rmsNorm(x, f32(w.inputNorm), n, hid, eps, h, stream));
      RAG_RETURN_IF_ERROR(linear(m.blas, h, n, hid, f32(w.qkvT), qkvW, f32(w.qkvBias), 0, qkvW, qkv, qkvW, false, stream));
      // RoPE on the q and k heads, and the row's K/V into the pool at its slot.
      RAG_RETURN_IF_ERROR(ropeKvWrite(qkv, n, qkvW, nh, nkv, d, cosT, sinT, dInts + n, m.kPool[l].as<float>(),
                                      m.vPool[l].as<float>(), stream));
      if (nd > 0)  // rows 0 .. nd-1
        RAG_RETURN_IF_ERROR(pagedDecodeAttention(qkv, qkvW, decodeItems, nh, kv, dInts + plan.decodeTables,
                                                 plan.tableStride, dInts + plan.decodeLens, scale, att, nh * d, stream));
      for (size_t k = nd; k < items.size(); ++k) {
        const StepItem& it = items[k];
        const uint8_t* mask = it.allowed.empty() ? nullptr : m.masks.as<const uint8_t>() + plan.prefillMask[k];
        RAG_RETURN_IF_ERROR(prefillAttention(qkv + rowStart[k] * qkvW, qkvW, static_cast<int64_t>(it.tokens.size()),
                                             it.start, nh, kv, dInts + plan.prefillTable[k], mask, scale,
                                             att + rowStart[k] * nh * d, nh * d, stream));
      }
      RAG_RETURN_IF_ERROR(linear(m.blas, att, n, nh * d, f32(w.oT), hid, f32(w.oBias), 0, hid, x, hid, true, stream));
      RAG_RETURN_IF_ERROR(rmsNorm(x, f32(w.postNorm), n, hid, eps, h, stream));
      RAG_RETURN_IF_ERROR(linear(m.blas, h, n, hid, f32(w.gateUpT), 2 * inter, f32(w.gateUpBias), 0, 2 * inter,
                                 m.gateUp.as<float>(), 2 * inter, false, stream));
      RAG_RETURN_IF_ERROR(siluMul(f32(m.gateUp), n, inter, m.act.as<float>(), stream));
      RAG_RETURN_IF_ERROR(linear(m.blas, f32(m.act), n, inter, f32(w.downT), hid, f32(w.downBias), 0, hid, x, hid, true,
                                 stream));
    }
    if (mRows == 0) return Status::ok();
    // The final norm and the LM head for the rows that want logits only, gathered into h.
    RAG_RETURN_IF_ERROR(embedGather(x, n, hid, dInts + plan.logitIndex, mRows, h, stream));
    RAG_RETURN_IF_ERROR(rmsNorm(h, f32(m.norm), mRows, hid, eps, h, stream));
    RAG_RETURN_IF_ERROR(linear(m.blas, h, mRows, hid, f32(m.lmHeadT), vocab, nullptr, 0, vocab, m.logits.as<float>(),
                               vocab, false, stream));
    // Every logit row's greedy token, whoever asks for it: one graph per shape whatever the rows want.
    return argmaxRows(m.logits.as<const float>(), mRows, vocab, m.tokens.as<int32_t>(), stream);
  };

  cudaGraphExec_t exec = nullptr;
  if (useGraph) {
    const Impl::GraphKey key{n, mRows, plan.tableStride};
    if (auto it = m.graphs.find(key); it != m.graphs.end()) {
      exec = it->second;
    } else if (Result<cudaGraphExec_t> captured = captureGraph(stream, enqueue); captured.isOk()) {
      exec = m.graphs.emplace(key, *captured).first->second;
      ++m.stats.graphCaptures;
    } else {
      m.stats.graphError = captured.status().message();  // graphs stay off; this step runs eagerly
    }
  }
  if (exec) {
    RAG_RETURN_IF_ERROR(fromCuda(cudaGraphLaunch(exec, stream), "launching the decode step's CUDA graph"));
    ++m.stats.graphReplays;
  } else {
    RAG_RETURN_IF_ERROR(enqueue());
    ++m.stats.eagerSteps;
  }
  model::StepOutput out;
  if (mRows == 0) {
    RAG_RETURN_IF_ERROR(m.finish("running the step"));
    return out;
  }
  // When every row is greedy only their tokens cross to the host (4 bytes a row instead of the
  // vocabulary's logits); otherwise every row's logits, as the runner then samples them.
  if (m.params.greedyTokens &&
      std::all_of(logitRows.begin(), logitRows.end(), [](const StepLogitRow& r) { return r.greedyOnly; })) {
    out.tokens.resize(static_cast<size_t>(mRows));
    RAG_RETURN_IF_ERROR(m.tokens.download(out.tokens.data(), out.tokens.size() * sizeof(int32_t),
                                          "copying the greedy tokens to the host", 0, stream));
    ++m.stats.tokenSteps;
    return out;
  }
  out.logits.resize(static_cast<size_t>(mRows * vocab));
  RAG_RETURN_IF_ERROR(m.logits.download(out.logits.data(), out.logits.size() * sizeof(float), "copying the logits to the host", 0, stream));
  return out;
}

std::string CudaLlamaStep::description() const {
  const Impl& m = *m_impl;
  std::string how = ", CUDA graphs";
  if (!m.params.graphs) how = ", eager";
  else if (!m.stats.graphError.empty()) how = ", eager (CUDA graphs off: " + m.stats.graphError + ")";
  if (!m.params.smallRowLinear) how += ", cuBLAS for every product";
  return "cuda:" + std::to_string(m.params.device) + " " + deviceDescription(m.params.device) + how;
}

const CudaLlamaStepStats& CudaLlamaStep::stats() const { return m_impl->stats; }

Status CudaLlamaStep::copyBlock(int32_t from, int32_t to) {
  Impl& m = *m_impl;
  const int64_t nb = m.params.numBlocks;
  if (from < 0 || to < 0 || from >= nb || to >= nb)
    return Status::invalidArgument("CudaLlamaStep: block " + std::to_string(from < 0 || from >= nb ? from : to) +
                                   " is outside the pool of " + std::to_string(nb));
  RAG_RETURN_IF_ERROR(useDevice(m.params.device));
  const size_t blockBytes = static_cast<size_t>(m.params.blockSize * m.cfg.numKeyValueHeads * m.cfg.headDim) * sizeof(float);
  for (std::vector<DeviceBuffer>* pool : {&m.kPool, &m.vPool})
    for (DeviceBuffer& layer : *pool) {
      auto* base = layer.as<std::byte>();
      RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpyAsync(base + blockBytes * static_cast<size_t>(to),
                                                   base + blockBytes * static_cast<size_t>(from), blockBytes,
                                                   cudaMemcpyDeviceToDevice, m.stream),
                                   "copying a KV block on the device"));
    }
  return m.finish("copying a KV block on the device");
}

namespace {

// The slots of a row transfer as int32 on the device, checked against the pool.
Status uploadSlots(DeviceBuffer& dst, int32_t layer, size_t layers, std::span<const int64_t> slots, int64_t slotCount,
                   cudaStream_t stream) {
  if (layer < 0 || static_cast<size_t>(layer) >= layers)
    return Status::invalidArgument("CudaLlamaStep: KV layer " + std::to_string(layer) + " is outside the model");
  std::vector<int32_t> s32(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0 || slots[i] >= slotCount)
      return Status::invalidArgument("CudaLlamaStep: KV slot " + std::to_string(slots[i]) + " is outside the pool");
    s32[i] = static_cast<int32_t>(slots[i]);
  }
  RAG_RETURN_IF_ERROR(dst.reserve(s32.size() * sizeof(int32_t), "allocating a KV row transfer"));
  return dst.write(s32.data(), s32.size() * sizeof(int32_t), "copying KV slots to the device", 0, stream);
}

}  // namespace

Status CudaLlamaStep::readRows(int32_t layer, std::span<const int64_t> slots, void* keys, void* values) const {
  Impl& m = *m_impl;
  if (slots.empty()) return Status::ok();
  const int64_t width = m.cfg.numKeyValueHeads * m.cfg.headDim, n = static_cast<int64_t>(slots.size());
  const int64_t slotCount = m.params.numBlocks * m.params.blockSize;
  RAG_RETURN_IF_ERROR(useDevice(m.params.device));
  RAG_RETURN_IF_ERROR(uploadSlots(m.rowSlots, layer, m.kPool.size(), slots, slotCount, m.stream));
  RAG_RETURN_IF_ERROR(m.rowData.reserve(static_cast<size_t>(2 * n * width) * sizeof(float), "allocating a KV row transfer"));
  const auto l = static_cast<size_t>(layer);
  float* rows = m.rowData.as<float>();
  // A pool layer is a table of slotCount rows: gathering rows by slot is the embedding gather.
  const int32_t* dSlots = m.rowSlots.as<const int32_t>();
  RAG_RETURN_IF_ERROR(embedGather(f32(m.kPool[l]), slotCount, width, dSlots, n, rows, m.stream));
  RAG_RETURN_IF_ERROR(embedGather(f32(m.vPool[l]), slotCount, width, dSlots, n, rows + n * width, m.stream));
  const size_t bytes = static_cast<size_t>(n * width) * sizeof(float);
  RAG_RETURN_IF_ERROR(m.rowData.download(keys, bytes, "copying KV rows to the host", 0, m.stream));
  return m.rowData.download(values, bytes, "copying KV rows to the host", bytes, m.stream);
}

Status CudaLlamaStep::writeRows(int32_t layer, std::span<const int64_t> slots, const void* keys, const void* values) {
  Impl& m = *m_impl;
  if (slots.empty()) return Status::ok();
  const int64_t width = m.cfg.numKeyValueHeads * m.cfg.headDim, n = static_cast<int64_t>(slots.size());
  RAG_RETURN_IF_ERROR(useDevice(m.params.device));
  RAG_RETURN_IF_ERROR(uploadSlots(m.rowSlots, layer, m.kPool.size(), slots, m.params.numBlocks * m.params.blockSize,
                                  m.stream));
  const size_t bytes = static_cast<size_t>(n * width) * sizeof(float);
  RAG_RETURN_IF_ERROR(m.rowData.reserve(2 * bytes, "allocating a KV row transfer"));
  RAG_RETURN_IF_ERROR(m.rowData.write(keys, bytes, "copying KV rows to the device", 0, m.stream));
  RAG_RETURN_IF_ERROR(m.rowData.write(values, bytes, "copying KV rows to the device", bytes, m.stream));
  const float* rows = m.rowData.as<const float>();
  const auto l = static_cast<size_t>(layer);
  RAG_RETURN_IF_ERROR(kvWrite(rows, rows + n * width, width, n, width, m.rowSlots.as<const int32_t>(),
                              m.kPool[l].as<float>(), m.vPool[l].as<float>(), m.stream));
  return m.finish("writing KV rows on the device");
}

model::StepBackendFactory cudaStepBackendFactory(int device, const model::GpuStepOptions& options) {
  return [device, options](const model::LlamaConfig& config, const model::StepWeights& weights, int32_t blockSize,
                  int32_t numBlocks) -> Result<std::unique_ptr<model::StepBackend>> {
    std::string why;
    const int count = deviceCount(&why);
    if (device < 0 || device >= count)
      return Status::unavailable(count == 0 ? "no CUDA device (" + why + "); run with --device cpu"
                                            : "CUDA device " + std::to_string(device) + " does not exist (" +
                                                  std::to_string(count) + " found)");
    RAG_RETURN_IF_ERROR(useDevice(device));
    RAG_ASSIGN_OR_RETURN(std::unique_ptr<CudaLlamaStep> step,
                         CudaLlamaStep::create(config, weights,
                                               {.blockSize = blockSize,
                                                .numBlocks = numBlocks,
                                                .device = device,
                                                .graphs = options.graphs,
                                                .smallRowLinear = options.smallRowLinear,
                                                .greedyTokens = options.greedyTokens}));
    return std::unique_ptr<model::StepBackend>(std::move(step));
  };
}

}  // namespace rag::cuda
