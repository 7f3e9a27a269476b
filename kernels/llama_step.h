// One forward step of a Llama-family decoder on the GPU, mirroring the CPU kernel forward of the
// runner (ModelRunner::Impl::forwardKernels, engine/model/runner_forward.cpp) op for op:
// embedding gather; per layer rmsNorm -> fused q|k|v linear -> rope on the q and k heads -> K/V
// written into the paged pool at each row's slot -> decode attention for the single decode rows,
// prefill attention per chunk -> o linear accumulated into x -> rmsNorm -> fused gate|up linear
// -> siluMul -> down linear accumulated; the final norm and LM head for the rows that want
// logits, and their greedy tokens (argmax_rows.cuh). tests/kernels/test_llama_step.cpp compares
// its logits and greedy tokens with the runner's CPU step on a tiny random model.
//
//   LlamaHostWeights w = ...;  // host F32 pointers in the runner's fused, transposed layout
//   const cuda::CudaLlamaStepParams params{.blockSize = 16, .numBlocks = 256};
//   RAG_ASSIGN_OR_RETURN(auto step, cuda::CudaLlamaStep::create(cfg, w, params));
//   std::vector<StepItem> items{{.tokens = prompt, .positions = pos, .start = 0, .blocks = table, .allowed = {}}};
//   std::vector<StepLogitRow> want{{.item = 0, .row = int64_t(prompt.size()) - 1}};
//   RAG_ASSIGN_OR_RETURN(model::StepOutput out, step->forward(items, 0, want));  // out.logits: F32 [1, vocab]
//
// The step owns device copies of the weights and a device KV pool of numBlocks blocks
// ([numBlocks * blockSize, kvHeads, headDim] per layer for K and for V); which blocks a sequence
// uses is the caller's business (its block tables), as with the runner's memory::KvPool. F32
// only. Not thread-safe: one thread drives a step. Work runs on the step's own stream and every
// call returns with its work done (forward() when the logits are on the host).
//
// Launch overhead: a decode step of a small model is ~10 kernels per layer of a few microseconds
// each, so launching them one by one costs more than running them. A decode-only step is
// therefore captured once into a CUDA graph per shape (rows, logit rows, padded block-table
// width) and replayed: only the step's tables and RoPE rows are copied before the launch.
// Prefill and mixed steps run eagerly. Graph and eager steps enqueue the same kernels in the
// same order, so their results are identical (tests/kernels/test_llama_step.cpp checks it).
// Torch-free and Qt-free.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/step_backend.h"
#include "rag/status.h"

namespace rag::cuda {

// The runner's types (model/step_backend.h): host weights in its fused layout, a step's items.
using LlamaLayerHostWeights = model::StepLayerWeights;
using LlamaHostWeights = model::StepWeights;
using model::StepItem;
using model::StepLogitRow;

struct CudaLlamaStepParams {
  int64_t blockSize = 16;
  int64_t numBlocks = 0;  // KV blocks in the device pool (required)
  int device = 0;         // the CUDA device it runs on (the caller selects it: cudaSetDevice)
  bool graphs = true;          // replay decode steps from CUDA graphs (false: launch every kernel)
  bool smallRowLinear = true;  // products of 2 to 8 rows on our kernel (false: all on cuBLAS)
  bool greedyTokens = true;    // greedyOnly rows answered with tokens (false: logits for every row)
};

// What the step did, for tests and benchmarks.
struct CudaLlamaStepStats {
  int64_t eagerSteps = 0;     // steps whose kernels were launched one by one
  int64_t graphCaptures = 0;  // decode shapes captured into a graph
  int64_t graphReplays = 0;   // decode steps replayed from a graph
  int64_t tokenSteps = 0;     // steps that sent the host greedy tokens instead of logits
  std::string graphError;     // why graphs were turned off after a failed capture; empty if not
};

// ModelRunner's GPU backend (RunnerParams::backend): the step, and the compute tier's K/V as the
// runner's KvPool store.
class CudaLlamaStep final : public model::StepBackend {
public:
  // Copies the weights to the device and allocates the pool. InvalidArgument for a config the
  // GPU path cannot run (rope scaling, a head wider than kMaxAttentionHeadDim, query heads not
  // a multiple of the KV heads) or a missing weight; Internal for a CUDA failure.
  static Result<std::unique_ptr<CudaLlamaStep>> create(const model::LlamaConfig& config, const LlamaHostWeights& weights,
                                                       const CudaLlamaStepParams& params);
  ~CudaLlamaStep() override;
  CudaLlamaStep(const CudaLlamaStep&) = delete;
  CudaLlamaStep& operator=(const CudaLlamaStep&) = delete;

  // One forward over `items`, the first `decodeItems` of them single rows that see their whole
  // context (start + 1 positions), the rest prefill chunks. Writes every row's K/V into the pool
  // and returns, when every one of `logitRows` is greedyOnly, their greedy tokens, else the
  // logits of all of them, F32 [logitRows.size(), vocab] row-major (StepOutput; empty when none
  // is asked for). InvalidArgument for an inconsistent batch (a token outside the vocabulary, a
  // block table too short or naming a block outside the pool, a decode item of more than one
  // row, a mask of the wrong size).
  Result<model::StepOutput> forward(std::span<const StepItem> items, int64_t decodeItems,
                                    std::span<const StepLogitRow> logitRows) override;
  // "cuda:0 NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90", then ", CUDA graphs" or ", eager" or
  // ", eager (CUDA graphs off: <why>)" after a capture failed, and ", cuBLAS for every product"
  // without the small-row kernel.
  std::string description() const override;
  const CudaLlamaStepStats& stats() const;

  // The pool as memory::KvComputeStore: a block of every layer copied on the device; rows of
  // one layer gathered to or scattered from host memory (F32 [slots, kvHeads * headDim] each).
  Status copyBlock(int32_t from, int32_t to) override;
  Status readRows(int32_t layer, std::span<const int64_t> slots, void* keys, void* values) const override;
  Status writeRows(int32_t layer, std::span<const int64_t> slots, const void* keys, const void* values) override;

private:
  struct Impl;
  explicit CudaLlamaStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// A RunnerParams::backend that runs the runner's steps on CUDA device `device`: Unavailable,
// naming the fix, when there is no such device or cuBLAS cannot be opened.
model::StepBackendFactory cudaStepBackendFactory(int device = 0, const model::GpuStepOptions& options = {});

}  // namespace rag::cuda
