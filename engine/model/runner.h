// ModelRunner: the generation engine. One continuous-batching iteration per step() over many
// sequences, each with its own attention mask, KV blocks, sampler and stop rules, on a paged
// KV pool whose blocks can be shared (prefix caches, Block-Attention passage KV) and rolled
// back (speculation).
//
//   RAG_ASSIGN_OR_RETURN(auto runner, ModelRunner::create(model, {}, tokenizer));
//   RAG_ASSIGN_OR_RETURN(SeqId id, runner->add({.prompt = tok.encode(q), .sampling = {.maxTokens = 32}}));
//   while (runner->hasWork())
//     for (const SeqEvent& e : runner->step().events) if (e.finished) show(e.id, e.text);
//
// A step schedules decode rows first (one token per generating sequence), then prefill chunks
// of waiting prompts until `maxBatchTokens`; all rows share the projections and MLP matmuls.
// Attention reads K/V through each sequence's block table, in place from the pool: decode rows
// of all sequences together, prefill chunks one masked attention each. F32 models on the CPU
// run every step on the kernels of decode_kernels.h from end to end, split over the
// setComputeThreads team (other dtypes and devices on libtorch ops, with a padded gather for
// decode rows). When blocks run out, the prefix cache gives way first (eviction inside the pool's
// allocation), then the most recently admitted sequence is preempted (its KV freed, recomputed
// later).
//
// Memory (engine/memory/): the KV pool is a memory::KvPool (compute tier + optional host tier);
// with `prefixCache` on, a radix-tree memory::PrefixCache keeps the KV of finished and running
// prompts: a causal prompt admitted at position 0 is matched against it and only the unmatched
// suffix is prefilled; a sequence inserts its KV once its prompt is computed and again when it
// ends (cancelled or not).
//
// Deterministic mode computes every token row alone with the same shapes whatever the batch or
// chunking, so a sequence's logits are bit-identical however it is scheduled: the property
// later components use to prove that speculation and reordering change nothing.
//
// Memory: besides the KV pool, a runner holds its own copy of the model's matmul weights,
// transposed to [in, out] for the kernels (about the model's size once more; the model keeps
// its [out, in] tensors for the dense forward and training).
//
// Devices: with RunnerParams::backend (model/step_backend.h; the GPU's is kernels/llama_step.h)
// the forward pass runs on the backend, which holds the weights and the compute tier's K/V; the
// runner keeps the rest (block tables, the prefix cache, the host tier, sampling) and moves K/V
// only through the pool's row access, which the backend carries out. Its transposed weights are
// then freed once the backend has its copy.
//
// This header is torch-free (pimpl): callers (scheduler, CLI) compile without libtorch.
// Not thread-safe: one thread drives a runner.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memory/kv_pool.h"
#include "memory/prefix_cache.h"
#include "memory/recompute_cost.h"
#include "model/attention_mask.h"
#include "model/model_config.h"
#include "model/sampler.h"
#include "model/step_backend.h"
#include "rag/status.h"

namespace rag {
class ForkJoin;
class TraceRing;
}

namespace rag::model {

class LlamaModel;
class Tokenizer;

using SeqId = int64_t;

struct RunnerParams {
  int32_t blockSize = 16;                 // tokens per KV block
  int64_t kvBudgetBytes = 256ll << 20;    // sizes the pool when numBlocks is 0
  int32_t numBlocks = 0;                  // explicit pool size in blocks
  int32_t maxBatchTokens = 512;           // rows per step (decode rows + prefill chunks)
  int32_t maxRunning = 64;                // sequences admitted at once
  int32_t maxQueued = 4096;               // add() answers Busy beyond this many live sequences
  bool deterministic = false;             // batch-invariant, bit-reproducible numerics
  // F32 models on the CPU: every step (decode rows and prefill chunks) runs the kernels of
  // decode_kernels.h instead of ~30 libtorch ops per layer and a BLAS call per matmul.
  // false keeps every step on libtorch: the reference the kernels are compared with.
  bool kernels = true;
  // Automatic prefix caching (vLLM's, SGLang's RadixAttention) over the pool; see the file comment.
  bool prefixCache = false;
  std::string evictionPolicy = "lru";  // memory/eviction_policy.h: lru | lfu | pgdsf | lacr
  double lacrAlpha = 0.2;              // lacr: the weight of look-ahead accesses, in [0, 1]
  int64_t hostKvBytes = 0;             // the host tier evicted prefixes move to; 0: none
  TraceRing* ring = nullptr;           // KvTransfer spans of tier moves; null: untraced
  // Runs the forward pass and holds the compute tier's K/V on a device (a GPU:
  // kernels/llama_step.h's cudaStepBackendFactory); empty: this CPU. F32 models only.
  StepBackendFactory backend{};
};

// KV of the first `numTokens` tokens of a sequence, kept alive by references on its blocks
// (retainKv) until releaseKv. Plain data: copy it freely, release it once.
struct KvHandle {
  std::vector<int32_t> blocks;
  int64_t numTokens = 0;
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;  // the RoPE position each token's key was encoded at
};

enum class ReencodeMode : uint8_t {
  Shift,       // rotate by Δ = new - old in one step
  ViaZero,     // rotate back to position 0, then forward to the new position
};

// A cached KV span placed into a new sequence. `position` re-encodes its keys to start at that
// RoPE position (-1: keep the positions they were computed at).
struct KvSegment {
  KvHandle kv;
  int64_t position = -1;
};

struct SequenceRequest {
  std::vector<int32_t> prompt;        // tokens after the cached segments
  std::vector<KvSegment> cached;      // KV already computed, placed before `prompt`
  AttentionMask mask;                 // over the whole prompt (cached tokens + prompt)
  SamplingParams sampling;            // maxTokens 0: compute the prompt's KV only
  int64_t firstPosition = -1;         // RoPE position of `prompt`[0]; -1: right after the cache
  ReencodeMode reencode = ReencodeMode::Shift;
  bool keepKv = false;                // keep the KV after finishing, until release()
  bool allLogits = false;             // report the logits of every computed row
  bool logprobs = false;              // report each sampled token's log-probability (SeqEvent::logprob)
};

// ContextFull: the context window or the whole KV pool is used up. Error: no token could be
// sampled (all logits NaN or -inf).
enum class FinishReason : uint8_t { None, MaxTokens, StopToken, StopString, ContextFull, Cancelled, Error };
std::string_view finishReasonName(FinishReason r);

struct SeqEvent {
  SeqId id = 0;
  std::vector<int32_t> tokens;   // sampled this step (0 or 1)
  std::string text;              // new text safe to show (stop strings held back); needs a tokenizer
  bool finished = false;
  FinishReason reason = FinishReason::None;
  std::vector<float> logits;     // F32 [logitRows, vocab]: the rows computed this step, only
  int64_t logitRows = 0;         // for sequences added with allLogits
  // For sequences added with logprobs: the sampled token's log-probability under the model's
  // logits, before a copy constraint masks them (so a constrained answer is scored by what the
  // model believes); 0 when there is no token.
  float logprob = 0;
  // The event that carries a prompt's first token (its prefill done): how many of its tokens
  // came from the prefix cache. -1 on every other event.
  int64_t promptCachedTokens = -1;
};

struct StepStats {
  int32_t sequences = 0;         // sequences that computed rows
  int32_t decodeRows = 0;
  int32_t prefillRows = 0;
  int32_t preempted = 0;
  double forwardSeconds = 0;     // embedding + layers + logits
  double totalSeconds = 0;       // the whole step, scheduling and KV bookkeeping included
};

struct StepResult {
  std::vector<SeqEvent> events;
  StepStats stats;
};

struct SequenceInfo {
  std::vector<int32_t> tokens;       // prompt (cached + given) then generated
  std::vector<int64_t> positions;
  int64_t promptLength = 0;
  int64_t computed = 0;              // tokens whose KV is in the pool
  std::vector<int32_t> blocks;
  std::string text;                  // generated text so far (with a tokenizer)
  bool finished = false;
  FinishReason reason = FinishReason::None;
};

using KvPoolStats = memory::KvPoolStats;

// Torch-free ways to get a model for a runner (the CLI and the scheduler use these).
// dtype "f32" or "bf16".
Result<std::shared_ptr<const LlamaModel>> loadModel(const std::filesystem::path& dir, std::string_view dtype = "f32");
Result<std::shared_ptr<const LlamaModel>> randomModel(const LlamaConfig& config, uint64_t seed,
                                                      std::string_view dtype = "f32");
// Writes `model` as a Hugging Face directory (config.json + model.safetensors).
Status saveModel(const LlamaModel& model, const std::filesystem::path& dir);
// Threads for matrix products (the BLAS pool); element-wise work stays on the calling thread
// so that two thread pools never spin against each other. Call once at start-up.
void setComputeThreads(int threads);
// The setComputeThreads team, for other F32 CPU kernels to split over (TextEmbedder::embed's
// team in `index build` and `eval retrieval`).
std::shared_ptr<ForkJoin> sharedComputeTeam();

struct ModelFacts {
  LlamaConfig config;
  int64_t parameters = 0;    // distinct weights (a tied head counted once)
  int64_t weightBytes = 0;
  int64_t bytesPerElement = 4;
};
ModelFacts modelFacts(const LlamaModel& model);

class ModelRunner {
public:
  // `tokenizer` is needed for stop strings and event text; without it both are unavailable.
  static Result<std::unique_ptr<ModelRunner>> create(std::shared_ptr<const LlamaModel> model,
                                                     const RunnerParams& params = {},
                                                     std::shared_ptr<const Tokenizer> tokenizer = nullptr);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Queues a sequence. InvalidArgument for an empty prompt, an id outside the vocabulary, a
  // prompt longer than the context window, a bad mask or sampling parameters, stop strings
  // without a tokenizer, a prompt the whole pool could not hold; Busy past maxQueued.
  Result<SeqId> add(SequenceRequest request);

  // One continuous-batching iteration. Events for sequences that sampled, finished or were
  // cancelled since the last step.
  StepResult step();
  bool hasWork() const;

  Status cancel(SeqId id);    // finish now, free its KV; reported in the next step's events
  Status preempt(SeqId id);   // free its KV and requeue it; it recomputes when readmitted
  Status release(SeqId id);   // forget a finished sequence (and its kept KV)

  // Rolls a sequence back to its first `n` tokens: later tokens and their KV are dropped and
  // the next step recomputes token n-1, so decoding resumes as if it had never gone further.
  Status truncate(SeqId id, int64_t n);
  // Appends tokens (a draft, a forced continuation) to be computed by the next steps. With
  // asPrompt they extend the prompt instead (allowed while nothing has been generated, e.g.
  // after truncating into the prompt): a speculation rolled back to where its prompt and the
  // final one diverge continues on the final prompt without recomputing the common part.
  Status append(SeqId id, std::span<const int32_t> tokens, bool asPrompt = false);
  // Re-encodes the cached keys of tokens [begin, end) to RoPE positions newPosition.. in place.
  Status reencode(SeqId id, int64_t begin, int64_t end, int64_t newPosition,
                  ReencodeMode mode = ReencodeMode::Shift);

  // Shares the KV of the first `numTokens` computed tokens (block references +1 each).
  Result<KvHandle> retainKv(SeqId id, int64_t numTokens);
  void releaseKv(KvHandle& handle);

  Result<SequenceInfo> info(SeqId id) const;
  KvPoolStats kvStats() const;
  // The prefix cache (null without RunnerParams::prefixCache) and the pool it caches in, for
  // callers that place cached KV themselves (DepCache subgraphs, Block-Attention passages).
  memory::PrefixCache* prefixCache();
  const memory::PrefixCache* prefixCache() const;
  memory::KvPool& kvPool();
  // The measured prefill speed (a forward pass's time fitted to rows and attended pairs).
  const memory::RecomputeCost& recomputeCost() const;
  const RunnerParams& params() const;
  const LlamaModel& model() const;
  // Where the forward pass runs: "cpu", or the backend's description ("cuda:0 NVIDIA H100 ...").
  std::string device() const;
  // ok, or the backend's first failure (a step's or a KV transfer's). Once it failed, every
  // step finishes its sequences with FinishReason::Error.
  Status deviceStatus() const;
  // Keys of a sequence's first `n` computed tokens at `layer`, F32 [n, kv_heads, head_dim]
  // flattened (tests compare them with recomputed keys).
  Result<std::vector<float>> keys(SeqId id, int32_t layer, int64_t n) const;

  struct Impl;

private:
  explicit ModelRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag::model
