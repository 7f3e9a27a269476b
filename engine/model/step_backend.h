// The seam between ModelRunner and a device that runs its forward pass elsewhere (a GPU:
// kernels/cuda_step_backend.h). The runner keeps everything else: sequences, batch planning,
// the KV pool's bookkeeping (block tables, references, the prefix cache, the host tier),
// sampling and stop rules. The backend owns the model's weights and the compute tier's K/V in
// its own memory, as the pool's KvComputeStore, and computes one step's rows:
//
//   RunnerParams rp;
//   rp.backend = cuda::cudaStepBackendFactory();  // empty: the CPU kernels
//   RAG_ASSIGN_OR_RETURN(auto runner, ModelRunner::create(model, rp, tokenizer));
//
// A backend runs F32 models; it is driven by the runner's one thread. Torch-free and Qt-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memory/kv_pool.h"
#include "model/model_config.h"
#include "rag/status.h"

namespace rag::model {

// Host F32 weights of one layer in the runner's fused, transposed layout ([in, out], q|k|v and
// gate|up stacked). Biases may be null.
struct StepLayerWeights {
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

struct StepWeights {
  const float* embed = nullptr;  // [vocab, hidden]
  std::vector<StepLayerWeights> layers;
  const float* norm = nullptr;     // [hidden]
  const float* lmHeadT = nullptr;  // [hidden, vocab]
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
  // The runner needs only this row's greedy token (argmaxLogit's choice, logit_ops.h): a backend
  // may answer with the token instead of the vocabulary of logits (StepOutput::tokens).
  bool greedyOnly = false;
};

// What a step returns for its logit rows. Either `logits` holds every logit row, F32 [rows,
// vocab] row-major, and `tokens` is empty; or `tokens` has one entry per logit row — a
// greedyOnly row's token (-1 when no logit is finite, as argmaxLogit), -1 for the others — and
// `logits` holds only the rows that are not greedyOnly, in order.
struct StepOutput {
  std::vector<float> logits;
  std::vector<int32_t> tokens;
};

class StepBackend : public memory::KvComputeStore {
public:
  // "cuda:0 NVIDIA H100 80GB HBM3, 79.1 GiB": what the runner's `device` reports.
  virtual std::string description() const = 0;
  // One forward over `items`, the first `decodeItems` single rows that see their whole context,
  // the rest prefill chunks: writes every row's K/V at its slot and returns what `logitRows` ask
  // for (StepOutput).
  virtual Result<StepOutput> forward(std::span<const StepItem> items, int64_t decodeItems,
                                     std::span<const StepLogitRow> logitRows) = 0;
};

// How a GPU backend runs its steps; the defaults are what serving uses, and `bench llm --device
// cuda` turns each off in turn to measure what it gives.
struct GpuStepOptions {
  bool graphs = true;          // replay decode steps from CUDA graphs (else launch every kernel)
  bool smallRowLinear = true;  // products of 2 to 8 rows on our kernel (else all on cuBLAS)
  bool greedyTokens = true;    // all-greedy steps send tokens, not logits (StepLogitRow::greedyOnly)
};

// Makes a backend for a model: copies `weights` (valid during the call only) and allocates a
// K/V pool of numBlocks blocks of blockSize tokens.
using StepBackendFactory = std::function<Result<std::unique_ptr<StepBackend>>(
    const LlamaConfig& config, const StepWeights& weights, int32_t blockSize, int32_t numBlocks)>;

}  // namespace rag::model
