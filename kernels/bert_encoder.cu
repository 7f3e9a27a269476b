#include "bert_encoder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "block_reduce.cuh"
#include "cublas_linear.cuh"
#include "cuda_check.h"
#include "device_buffer.h"
#include "encoder_attention.cuh"
#include "gelu.cuh"
#include "layer_norm.cuh"
#include "paged_kv.h"

namespace rag::cuda {

namespace {

constexpr int kThreads = 256;

// x[r] = word[token[r]] + position[pos[r]] + tokenType (as the CPU kernels add them).
__global__ void embedRowsKernel(const int32_t* tokens, const int32_t* positions, const float* word,
                                const float* position, const float* tokenType, int64_t hidden, float* x) {
  const int64_t r = blockIdx.x;
  const float* w = word + static_cast<int64_t>(tokens[r]) * hidden;
  const float* p = position + static_cast<int64_t>(positions[r]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) x[r * hidden + i] = w[i] + p[i] + tokenType[i];
}

// out[t] = the mean of text t's rows of x, L2-normalised (a zero mean stays zero).
__global__ void meanPoolKernel(const float* x, const int32_t* firstRow, int64_t hidden, float* out) {
  const int64_t t = blockIdx.x;
  const int64_t first = firstRow[t], n = firstRow[t + 1] - first;
  float* o = out + t * hidden;
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += x[(first + j) * hidden + i];
    o[i] = s;
    squares += (s / static_cast<float>(n)) * (s / static_cast<float>(n));
  }
  const float norm = sqrtf(blockSum(squares));
  const float inv = 1.0f / (static_cast<float>(n) * fmaxf(norm, 1e-12f));
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) o[i] *= inv;
}

struct DeviceLayer {
  DeviceBuffer qkvT, qkvBias, attnOutT, attnOutBias, attnNorm, attnNormBias, interT, interBias, outT, outBias, outNorm,
      outNormBias;
};

Status upload(DeviceBuffer& dst, const float* host, int64_t count, const std::string& name) {
  if (!host) return Status::invalidArgument("CudaBertEncoder: weight " + name + " is missing");
  return dst.upload(host, static_cast<size_t>(count) * sizeof(float), "copying " + name + " to the device");
}

const float* f32(const DeviceBuffer& b) { return b.as<const float>(); }

}  // namespace

struct CudaBertEncoder::Impl {
  model::EncoderShape shape;
  int device = 0;
  CublasContext blas;
  DeviceBuffer word, position, tokenType, embedNorm, embedNormBias;
  std::vector<DeviceLayer> layers;
  DeviceBuffer x, qkv, k, v, att, mid, pooled, ints;  // per call, grown to the largest batch
  std::vector<int32_t> hostInts;
  std::vector<float> hostPooled;
  cudaStream_t stream = nullptr;

  explicit Impl(CublasContext b) : blas(std::move(b)) {}
  ~Impl() {
    if (stream) cudaStreamDestroy(stream);
  }
};

CudaBertEncoder::CudaBertEncoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
CudaBertEncoder::~CudaBertEncoder() = default;

Result<std::unique_ptr<CudaBertEncoder>> CudaBertEncoder::create(const model::EncoderShape& shape,
                                                                 const model::EncoderWeights& weights, int device) {
  const model::EncoderShape& s = shape;
  if (s.vocab <= 0 || s.positions <= 0 || s.hidden <= 0 || s.heads <= 0 || s.intermediate <= 0)
    return Status::invalidArgument("CudaBertEncoder: the encoder's sizes must be positive");
  if (s.hidden % s.heads != 0)
    return Status::invalidArgument("CudaBertEncoder: hidden size " + std::to_string(s.hidden) + " is not a multiple of " +
                                   std::to_string(s.heads) + " heads");
  const DevicePagedKv kvShape{nullptr, nullptr, 1, s.heads, s.hidden / s.heads};
  RAG_RETURN_IF_ERROR(checkAttentionShape(s.heads, kvShape, "CudaBertEncoder"));
  RAG_RETURN_IF_ERROR(useDevice(device));
  RAG_ASSIGN_OR_RETURN(CublasContext blas, CublasContext::create());
  auto impl = std::make_unique<Impl>(std::move(blas));
  impl->shape = s;
  impl->device = device;
  RAG_RETURN_IF_ERROR(fromCuda(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking), "creating the encoder's stream"));
  const int64_t h = s.hidden, inter = s.intermediate;
  RAG_RETURN_IF_ERROR(upload(impl->word, weights.word, s.vocab * h, "word embeddings"));
  RAG_RETURN_IF_ERROR(upload(impl->position, weights.position, s.positions * h, "position embeddings"));
  RAG_RETURN_IF_ERROR(upload(impl->tokenType, weights.tokenType, h, "token type embeddings"));
  RAG_RETURN_IF_ERROR(upload(impl->embedNorm, weights.embedNorm, h, "embedding LayerNorm"));
  RAG_RETURN_IF_ERROR(upload(impl->embedNormBias, weights.embedNormBias, h, "embedding LayerNorm bias"));
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const model::EncoderLayerWeights& w = weights.layers[l];
    DeviceLayer& d = impl->layers.emplace_back();
    const std::string n = "layer " + std::to_string(l) + " ";
    RAG_RETURN_IF_ERROR(upload(d.qkvT, w.qkvT, h * 3 * h, n + "q|k|v"));
    RAG_RETURN_IF_ERROR(upload(d.qkvBias, w.qkvBias, 3 * h, n + "q|k|v bias"));
    RAG_RETURN_IF_ERROR(upload(d.attnOutT, w.attnOutT, h * h, n + "attention output"));
    RAG_RETURN_IF_ERROR(upload(d.attnOutBias, w.attnOutBias, h, n + "attention output bias"));
    RAG_RETURN_IF_ERROR(upload(d.attnNorm, w.attnNorm, h, n + "attention LayerNorm"));
    RAG_RETURN_IF_ERROR(upload(d.attnNormBias, w.attnNormBias, h, n + "attention LayerNorm bias"));
    RAG_RETURN_IF_ERROR(upload(d.interT, w.interT, h * inter, n + "intermediate"));
    RAG_RETURN_IF_ERROR(upload(d.interBias, w.interBias, inter, n + "intermediate bias"));
    RAG_RETURN_IF_ERROR(upload(d.outT, w.outT, inter * h, n + "output"));
    RAG_RETURN_IF_ERROR(upload(d.outBias, w.outBias, h, n + "output bias"));
    RAG_RETURN_IF_ERROR(upload(d.outNorm, w.outNorm, h, n + "output LayerNorm"));
    RAG_RETURN_IF_ERROR(upload(d.outNormBias, w.outNormBias, h, n + "output LayerNorm bias"));
  }
  return std::unique_ptr<CudaBertEncoder>(new CudaBertEncoder(std::move(impl)));
}

std::string CudaBertEncoder::description() const {
  return "cuda:" + std::to_string(m_impl->device) + " " + deviceDescription(m_impl->device);
}

Status CudaBertEncoder::encode(std::span<const std::vector<int32_t>* const> texts, float* out, int64_t outStride) {
  Impl& m = *m_impl;
  const model::EncoderShape& s = m.shape;
  const int64_t n = std::ssize(texts), h = s.hidden;
  if (n == 0) return Status::ok();
  // The int tables, one upload: tokens, positions, each row's text, 0 .. rows - 1, first rows.
  int64_t rows = 0;
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<int32_t>& ids = *texts[static_cast<size_t>(t)];
    if (ids.empty() || std::ssize(ids) > s.positions)
      return Status::invalidArgument("CudaBertEncoder: text " + std::to_string(t) + " has " + std::to_string(ids.size()) +
                                     " tokens; the encoder takes 1 to " + std::to_string(s.positions));
    for (int32_t id : ids)
      if (id < 0 || id >= s.vocab)
        return Status::invalidArgument("CudaBertEncoder: token " + std::to_string(id) + " of text " + std::to_string(t) +
                                       " is outside the vocabulary of " + std::to_string(s.vocab));
    rows += std::ssize(ids);
  }
  if (rows > 0x7fffffff) return Status::invalidArgument("CudaBertEncoder: too many tokens in one batch");
  std::vector<int32_t>& ints = m.hostInts;
  ints.assign(static_cast<size_t>(4 * rows + n + 1), 0);
  int32_t *tokens = ints.data(), *positions = tokens + rows, *textOf = positions + rows, *rowIds = textOf + rows,
          *firstRow = rowIds + rows;
  int64_t r = 0;
  for (int64_t t = 0; t < n; ++t) {
    firstRow[t] = static_cast<int32_t>(r);
    const std::vector<int32_t>& ids = *texts[static_cast<size_t>(t)];
    for (size_t j = 0; j < ids.size(); ++j, ++r) {
      tokens[r] = ids[j];
      positions[r] = static_cast<int32_t>(j);
      textOf[r] = static_cast<int32_t>(t);
      rowIds[r] = static_cast<int32_t>(r);
    }
  }
  firstRow[n] = static_cast<int32_t>(rows);

  RAG_RETURN_IF_ERROR(useDevice(m.device));
  const size_t f = sizeof(float), rs = static_cast<size_t>(rows);
  RAG_RETURN_IF_ERROR(m.x.reserve(rs * h * f, "allocating the encoder's activations"));
  RAG_RETURN_IF_ERROR(m.qkv.reserve(rs * 3 * h * f, "allocating the encoder's q|k|v"));
  RAG_RETURN_IF_ERROR(m.k.reserve(rs * h * f, "allocating the encoder's keys"));
  RAG_RETURN_IF_ERROR(m.v.reserve(rs * h * f, "allocating the encoder's values"));
  RAG_RETURN_IF_ERROR(m.att.reserve(rs * h * f, "allocating the encoder's attention output"));
  RAG_RETURN_IF_ERROR(m.mid.reserve(rs * s.intermediate * f, "allocating the encoder's intermediate"));
  RAG_RETURN_IF_ERROR(m.pooled.reserve(static_cast<size_t>(n * h) * f, "allocating the encoder's vectors"));
  RAG_RETURN_IF_ERROR(m.ints.reserve(ints.size() * sizeof(int32_t), "allocating the encoder's tables"));
  RAG_RETURN_IF_ERROR(m.ints.write(ints.data(), ints.size() * sizeof(int32_t), "copying the encoder's tables", 0, m.stream));
  const int32_t* dInts = m.ints.as<const int32_t>();
  const int32_t *dTokens = dInts, *dPositions = dInts + rows, *dTextOf = dPositions + rows, *dRowIds = dTextOf + rows,
                *dFirstRow = dRowIds + rows;
  float *x = m.x.as<float>(), *qkv = m.qkv.as<float>(), *att = m.att.as<float>(), *mid = m.mid.as<float>();
  const float eps = s.layerNormEps, scale = 1.0f / std::sqrt(static_cast<float>(h / s.heads));

  embedRowsKernel<<<static_cast<unsigned>(rows), kThreads, 0, m.stream>>>(dTokens, dPositions, f32(m.word), f32(m.position),
                                                                         f32(m.tokenType), h, x);
  RAG_RETURN_IF_ERROR(fromCuda(cudaGetLastError(), "launching embedRowsKernel"));
  RAG_RETURN_IF_ERROR(layerNorm(x, f32(m.embedNorm), f32(m.embedNormBias), rows, h, eps, x, m.stream));
  for (const DeviceLayer& l : m.layers) {
    RAG_RETURN_IF_ERROR(linear(m.blas, x, rows, h, f32(l.qkvT), 3 * h, f32(l.qkvBias), 0, 3 * h, qkv, 3 * h, false, m.stream));
    RAG_RETURN_IF_ERROR(encoderAttention(qkv, rows, s.heads, h / s.heads, dTextOf, dFirstRow, dRowIds, m.k.as<float>(),
                                         m.v.as<float>(), scale, att, m.stream));
    RAG_RETURN_IF_ERROR(linear(m.blas, att, rows, h, f32(l.attnOutT), h, f32(l.attnOutBias), 0, h, x, h, true, m.stream));
    RAG_RETURN_IF_ERROR(layerNorm(x, f32(l.attnNorm), f32(l.attnNormBias), rows, h, eps, x, m.stream));
    RAG_RETURN_IF_ERROR(linear(m.blas, x, rows, h, f32(l.interT), s.intermediate, f32(l.interBias), 0, s.intermediate, mid,
                               s.intermediate, false, m.stream));
    RAG_RETURN_IF_ERROR(gelu(mid, rows * s.intermediate, mid, m.stream));
    RAG_RETURN_IF_ERROR(linear(m.blas, mid, rows, s.intermediate, f32(l.outT), h, f32(l.outBias), 0, h, x, h, true, m.stream));
    RAG_RETURN_IF_ERROR(layerNorm(x, f32(l.outNorm), f32(l.outNormBias), rows, h, eps, x, m.stream));
  }
  meanPoolKernel<<<static_cast<unsigned>(n), kThreads, 0, m.stream>>>(x, dFirstRow, h, m.pooled.as<float>());
  RAG_RETURN_IF_ERROR(fromCuda(cudaGetLastError(), "launching meanPoolKernel"));
  m.hostPooled.resize(static_cast<size_t>(n * h));
  RAG_RETURN_IF_ERROR(m.pooled.download(m.hostPooled.data(), m.hostPooled.size() * f, "reading the encoder's vectors", 0, m.stream));
  RAG_RETURN_IF_ERROR(fromCuda(cudaStreamSynchronize(m.stream), "encoding on the GPU"));
  for (int64_t t = 0; t < n; ++t)
    std::copy(m.hostPooled.begin() + t * h, m.hostPooled.begin() + (t + 1) * h, out + t * outStride);
  return Status::ok();
}

model::EncoderBackendFactory cudaEncoderBackendFactory(int device) {
  return [device](const model::EncoderShape& shape,
                  const model::EncoderWeights& weights) -> Result<std::unique_ptr<model::EncoderBackend>> {
    std::string why;
    const int count = deviceCount(&why);
    if (device < 0 || device >= count)
      return Status::unavailable(count == 0 ? "no CUDA device for the query encoder (" + why + "); use --encoder-device cpu"
                                            : "CUDA device " + std::to_string(device) + " does not exist (" +
                                                  std::to_string(count) + " found)");
    RAG_ASSIGN_OR_RETURN(std::unique_ptr<CudaBertEncoder> e, CudaBertEncoder::create(shape, weights, device));
    return std::unique_ptr<model::EncoderBackend>(std::move(e));
  };
}

}  // namespace rag::cuda
