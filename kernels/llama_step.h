// One forward step of a Llama-family decoder on the GPU, mirroring the CPU kernel forward of the
// runner (ModelRunner::Impl::forwardKernels, engine/model/runner_forward.cpp) op for op:
// embedding gather; per layer rmsNorm -> fused q|k|v linear -> rope on the q and k heads -> K/V
// written into the paged pool at each row's slot -> decode attention for the single decode rows,
// prefill attention per chunk -> o linear accumulated into x -> rmsNorm -> fused gate|up linear
// -> siluMul -> down linear accumulated; the final norm and LM head for the rows that want
// logits. tests/kernels/test_llama_step.cpp compares its logits and greedy tokens with the
// runner's CPU step on a tiny random model.
//
//   LlamaHostWeights w = ...;  // host F32 pointers in the runner's fused, transposed layout
//   const cuda::CudaLlamaStepParams params{.blockSize = 16, .numBlocks = 256};
//   RAG_ASSIGN_OR_RETURN(auto step, cuda::CudaLlamaStep::create(cfg, w, params));
//   std::vector<StepItem> items{{.tokens = prompt, .positions = pos, .start = 0, .blocks = table, .allowed = {}}};
//   std::vector<StepLogitRow> want{{.item = 0, .row = int64_t(prompt.size()) - 1}};
//   RAG_ASSIGN_OR_RETURN(std::vector<float> logits, step->forward(items, 0, want));  // F32 [1, vocab]
//
// The step owns device copies of the weights and a device KV pool of numBlocks blocks
// ([numBlocks * blockSize, kvHeads, headDim] per layer for K and for V); which blocks a sequence
// uses is the caller's business (its block tables), as with the runner's memory::KvPool. F32
// only. Not thread-safe: one thread drives a step. Work runs on the legacy default stream and
// forward() returns when the logits are on the host. Torch-free and Qt-free.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/model_config.h"
#include "rag/status.h"

namespace rag::cuda {

// Host F32 weights of one layer, as the runner's FusedLayer holds them (transposed to
// [in, out], q|k|v and gate|up stacked). Biases may be null.
struct LlamaLayerHostWeights {
  const float* inputNorm = nullptr;   // [hidden]
  const float* qkvT = nullptr;        // [hidden, (nh + 2 nkv) d]
  const float* qkvBias = nullptr;     // [(nh + 2 nkv) d]
  const float* oT = nullptr;          // [nh d, hidden]
  const float* oBias = nullptr;       // [hidden]
  const float* postNorm = nullptr;    // [hidden]
  const float* gateUpT = nullptr;     // [hidden, 2 inter]
  const float* gateUpBias = nullptr;  // [2 inter]
  const float* downT = nullptr;       // [inter, hidden]
  const float* downBias = nullptr;    // [hidden]
};

struct LlamaHostWeights {
  const float* embed = nullptr;  // [vocab, hidden]
  std::vector<LlamaLayerHostWeights> layers;
  const float* norm = nullptr;     // [hidden]
  const float* lmHeadT = nullptr;  // [hidden, vocab]
};

struct CudaLlamaStepParams {
  int64_t blockSize = 16;
  int64_t numBlocks = 0;  // KV blocks in the device pool (required)
};

// Rows [start, start + n) of one sequence computed in a step (n = tokens.size()).
struct StepItem {
  std::span<const int32_t> tokens;     // the rows' token ids, in [0, vocab)
  std::span<const int64_t> positions;  // their RoPE positions
  int64_t start = 0;                   // the first row's index in the sequence (its KV position)
  std::span<const int32_t> blocks;     // the sequence's block table, covering start + n positions
  // Prefill chunks only: which positions each row sees, uint8 [n, start + n] (row r: the first
  // start + r + 1 entries count), or empty when every row sees all positions before it.
  std::span<const uint8_t> allowed;
};

struct StepLogitRow {
  size_t item = 0;  // index into the step's items
  int64_t row = 0;  // row within the item
};

class CudaLlamaStep {
public:
  // Copies the weights to the device and allocates the pool. InvalidArgument for a config the
  // GPU path cannot run (rope scaling, a head wider than kMaxAttentionHeadDim, query heads not
  // a multiple of the KV heads) or a missing weight; Internal for a CUDA failure.
  static Result<std::unique_ptr<CudaLlamaStep>> create(const model::LlamaConfig& config, const LlamaHostWeights& weights,
                                                       const CudaLlamaStepParams& params);
  ~CudaLlamaStep();
  CudaLlamaStep(const CudaLlamaStep&) = delete;
  CudaLlamaStep& operator=(const CudaLlamaStep&) = delete;

  // One forward over `items`, the first `decodeItems` of them single rows that see their whole
  // context (start + 1 positions), the rest prefill chunks. Writes every row's K/V into the pool
  // and returns the logits of `logitRows`, F32 [logitRows.size(), vocab] row-major (empty when
  // none is asked for). InvalidArgument for an inconsistent batch (a token outside the
  // vocabulary, a block table too short or naming a block outside the pool, a decode item of
  // more than one row, a mask of the wrong size).
  Result<std::vector<float>> forward(std::span<const StepItem> items, int64_t decodeItems,
                                     std::span<const StepLogitRow> logitRows);

private:
  struct Impl;
  explicit CudaLlamaStep(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag::cuda
