// The runner's internals, shared by runner.cpp (sequences, batch planning, sampling, the API)
// and runner_forward.cpp (the two forward passes: libtorch ops and the CPU kernels). Includes
// torch: only those two files include it.
#pragma once

#include <torch/torch.h>

#include <climits>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fork_join.h"
#include "memory/kv_pool.h"
#include "memory/radix_cache.h"
#include "memory/recompute_cost.h"
#include "model/llama.h"
#include "model/runner.h"
#include "model/sampler.h"
#include "model/span_constraint.h"
#include "model/step_backend.h"
#include "model/stop_matcher.h"
#include "model/tokenizer.h"

namespace rag::model {

namespace detail {

// No token from the device for this row: its logits came to the host (forwardBackend).
inline constexpr int32_t kNoDeviceToken = INT32_MIN;

enum class SeqState : uint8_t { Waiting, Running, Finished };

struct Seq {
  SeqId id = 0;
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  int64_t promptLength = 0;
  int64_t computed = 0;
  std::vector<int32_t> blocks;
  AttentionMask mask;
  SamplingParams sampling;
  std::optional<Sampler> sampler;
  std::optional<StopMatcher> stop;
  std::optional<SpanConstraint> span;  // SamplingParams::copyFrom
  std::string decoded;   // text of the generated tokens as decoded so far
  std::string text;      // text released to the caller (stop strings held back / cut)
  bool keepKv = false;
  bool allLogits = false;
  bool logprobs = false;
  // Prefix cache: a causal prompt from position 0 may reuse and leave cached KV; `cacheNode` is
  // the node it holds locked (its matched prefix, then its inserted prompt).
  bool prefixEligible = false;
  bool promptInserted = false;
  int64_t cachedTokens = 0;  // prompt tokens the last admission took from the cache
  bool firstTokenReported = false;
  memory::PrefixNodeId cacheNode = memory::kNoPrefixNode;
  SeqState state = SeqState::Waiting;
  FinishReason reason = FinishReason::None;

  int64_t pending() const { return static_cast<int64_t>(tokens.size()) - computed; }
  int64_t generated() const { return std::max<int64_t>(0, static_cast<int64_t>(tokens.size()) - promptLength); }
  // Token i sees every earlier token (a generated token, the last block, past the tree).
  bool fullRow(int64_t i) const {
    switch (mask.kind) {
      case MaskKind::Causal: return true;
      case MaskKind::Block: return mask.blockStarts.size() <= 1 || i >= mask.blockStarts.back();
      case MaskKind::Ancestor: return i >= static_cast<int64_t>(mask.parents.size());
    }
    return true;
  }
};

// Rows [start, start + n) of one sequence computed in this step.
struct Item {
  Seq* seq = nullptr;
  int64_t start = 0;
  int64_t n = 0;
};

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// x @ wt (+ bias): a Linear whose weight is stored transposed, [in, out].
inline torch::Tensor matmulT(const torch::Tensor& x, const torch::Tensor& wt, const torch::Tensor& bias) {
  return bias.defined() ? torch::addmm(bias, x, wt) : torch::mm(x, wt);
}

inline const float* f32(const torch::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// The team the kernels' loops fork onto, sized by setComputeThreads (1 until it is called).
std::shared_ptr<ForkJoin> computeTeam();

}  // namespace detail

using detail::ceilDiv;
using detail::computeTeam;
using detail::f32;
using detail::Item;
using detail::kNoDeviceToken;
using detail::matmulT;
using detail::Seq;
using detail::SeqState;

struct ModelRunner::Impl {
  std::shared_ptr<const LlamaModel> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const TokenPieces> pieces;  // the tokenizer's bytes by id, for span constraints
  RunnerParams params;
  LlamaConfig cfg;
  int64_t bs = 16;
  // The device that runs the forward pass and holds the compute tier's K/V (RunnerParams::
  // backend); null: this process's CPU. Declared before the pool, which points to it.
  std::unique_ptr<StepBackend> backend;
  Status deviceError;  // the backend's first failed step; every later step fails its rows
  std::unique_ptr<memory::KvPool> pool;
  std::unique_ptr<memory::RadixCache> cache;  // null without params.prefixCache
  memory::RecomputeCost recomputeCost;        // measured prefill speed: the cache's PGDSF cost
  // Per layer [numBlocks * bs, kv_heads, head_dim]: the pool's compute-tier storage as tensors
  // (views, never reallocated).
  std::vector<torch::Tensor> kPool, vPool;
  // Per layer, the matmul weights as the runner uses them: transposed to [in, out] (input-
  // major, what decode_kernels.h's linear and a plain mm read), with q/k/v stacked into one
  // matrix and gate/up into another, so a step makes two matmuls fewer. Built once at create();
  // the model keeps its own [out, in] tensors for the dense forward and training.
  struct FusedLayer {
    torch::Tensor qkvT, qkvBias;        // [hidden, (nh + 2 nkv) d]; bias undefined without attention_bias
    torch::Tensor oT, gateUpT, gateUpBias, downT;  // [nh d, hidden], [hidden, 2 inter], [inter, hidden]
  };
  std::vector<FusedLayer> fused;
  torch::Tensor lmHeadT;  // [hidden, vocab]
  // F32 weights and pools on the CPU: every step runs decode_kernels.h (forwardKernels)
  // instead of libtorch ops (forwardItems).
  bool useKernels = false;
  std::vector<double> ropeInvFreq;  // theta^(-2i/d), as ropeTables computes it
  struct DecodeScratch {
    std::vector<float> x, h, qkv, att, gateUp, act, cos, sin;
    std::vector<float> attention;  // cpu::attendPrefill's, for the step's largest prefill chunk
  } scratch;
  std::shared_ptr<ForkJoin> team;  // this step's, from computeTeam()
  std::vector<int64_t> eosIds;
  std::vector<float> spanScratch;  // a logit row masked by a span constraint
  std::vector<float> logprobScratch;  // tokenLogprob's exponentials
  std::map<SeqId, Seq> seqs;
  std::deque<SeqId> waiting;
  std::vector<SeqId> running;  // admission order: preemption takes from the back
  std::vector<SeqEvent> pendingEvents;
  SeqId nextId = 1;

  int64_t slot(const Seq& s, int64_t pos) const {
    return static_cast<int64_t>(s.blocks[static_cast<size_t>(pos / bs)]) * bs + pos % bs;
  }
  torch::Tensor slots(const Seq& s, int64_t begin, int64_t end) const {
    return torch::tensor(memory::slotsOf(s.blocks, begin, end - begin, static_cast<int32_t>(bs)), torch::kLong);
  }

  // New blocks (and copy-on-write replacements) needed to write rows [s.computed, upto).
  int64_t blocksNeeded(const Seq& s, int64_t upto) const {
    int64_t need = std::max<int64_t>(0, ceilDiv(upto, bs) - static_cast<int64_t>(s.blocks.size()));
    for (int64_t b = s.computed / bs; b < static_cast<int64_t>(s.blocks.size()) && b * bs < upto; ++b)
      if (pool->refCount(s.blocks[static_cast<size_t>(b)]) > 1) ++need;
    return need;
  }

  // Makes rows [s.computed, upto) writable: allocates missing blocks and copies shared ones.
  // False (nothing changed) when the pool cannot supply them even after evicting cached
  // prefixes (the pool's reclaimer).
  bool reserve(Seq& s, int64_t upto) {
    if (!pool->ensureFree(static_cast<int32_t>(blocksNeeded(s, upto)))) return false;
    for (int64_t b = s.computed / bs; b < static_cast<int64_t>(s.blocks.size()) && b * bs < upto; ++b) {
      int32_t& blk = s.blocks[static_cast<size_t>(b)];
      if (pool->refCount(blk) <= 1) continue;
      const int32_t fresh = *pool->allocateOne();
      pool->copyBlock(blk, fresh);
      pool->release(blk);
      blk = fresh;
    }
    while (static_cast<int64_t>(s.blocks.size()) < ceilDiv(upto, bs)) s.blocks.push_back(*pool->allocateOne());
    return true;
  }

  // ---- the prefix cache ----
  // Admission: the longest cached prefix of the prompt (all but its last token) becomes the
  // start of the sequence's block table.
  void matchPrefix(Seq& s) {
    s.cachedTokens = 0;
    if (!cache || !s.prefixEligible || s.computed > 0 || !s.blocks.empty()) return;
    memory::PrefixMatch m = cache->match(std::span<const int32_t>(s.tokens).first(static_cast<size_t>(s.promptLength)),
                                         {.maxTokens = s.promptLength - 1});
    if (m.tokens == 0) return;
    for (int32_t b : m.blocks) pool->retain(b);
    s.blocks = std::move(m.blocks);
    s.computed = m.tokens;
    s.cachedTokens = m.tokens;
    s.cacheNode = m.node;
  }
  // Caches the sequence's computed whole blocks and moves its lock to the node that ends them.
  void insertPrefix(Seq& s) {
    if (!cache || !s.prefixEligible || s.computed < bs) return;
    const int64_t whole = s.computed / bs * bs;
    const memory::PrefixNodeId node = cache->insert(std::span<const int32_t>(s.tokens).first(static_cast<size_t>(whole)), s.blocks);
    if (node == memory::kNoPrefixNode) return;
    cache->lock(node);
    unlockPrefix(s);
    s.cacheNode = node;
  }
  void unlockPrefix(Seq& s) {
    if (cache && s.cacheNode != memory::kNoPrefixNode) cache->unlock(s.cacheNode);
    s.cacheNode = memory::kNoPrefixNode;
  }

  void freeKv(Seq& s) {
    unlockPrefix(s);
    pool->release(s.blocks);
    s.blocks.clear();
    s.computed = 0;
  }

  void dropFromQueues(SeqId id) {
    running.erase(std::remove(running.begin(), running.end(), id), running.end());
    waiting.erase(std::remove(waiting.begin(), waiting.end(), id), waiting.end());
  }

  void finish(Seq& s, FinishReason reason, std::vector<SeqEvent>* events, SeqEvent* ev) {
    s.state = SeqState::Finished;
    s.reason = reason;
    insertPrefix(s);  // what it computed stays reusable, cancelled or not
    if (!s.keepKv || reason == FinishReason::Cancelled) freeKv(s);
    dropFromQueues(s.id);
    if (ev) {
      ev->finished = true;
      ev->reason = reason;
    } else if (events) {
      SeqEvent e;
      e.id = s.id;
      e.finished = true;
      e.reason = reason;
      events->push_back(std::move(e));
    }
  }

  Seq* find(SeqId id) {
    auto it = seqs.find(id);
    return it == seqs.end() ? nullptr : &it->second;
  }
  const Seq* find(SeqId id) const {
    auto it = seqs.find(id);
    return it == seqs.end() ? nullptr : &it->second;
  }

  // Each token id's bytes (built on first use; needs the tokenizer).
  const std::shared_ptr<const TokenPieces>& tokenPieces() {
    if (!pieces) {
      std::vector<std::string> bytes(static_cast<size_t>(cfg.vocabSize));
      for (int32_t id = 0; id < cfg.vocabSize && id < tokenizer->vocabSize(); ++id) {
        if (tokenizer->isSpecial(id)) continue;
        Result<std::string> b = tokenizer->decode(std::span<const int32_t>(&id, 1));
        if (b.isOk()) bytes[static_cast<size_t>(id)] = std::move(*b);
      }
      std::vector<int32_t> ends;
      for (int64_t e : eosIds) ends.push_back(static_cast<int32_t>(e));
      pieces = TokenPieces::make(std::move(bytes), std::move(ends));
    }
    return pieces;
  }

  Status notFound(SeqId id) const {
    return Status::notFound("no sequence " + std::to_string(id) +
                            " in this runner (finished sequences are forgotten unless keepKv)");
  }

  // The generated text (and the span constraint's place in its source) after the tokens
  // changed other than by sampling (truncate, extend).
  void recomputeText(Seq& s) {
    s.decoded.clear();
    s.text.clear();
    if (s.stop) s.stop.emplace(s.sampling.stop);
    if (s.span) {
      s.span->reset();
      for (int64_t i = s.promptLength; i < static_cast<int64_t>(s.tokens.size()); ++i)
        s.span->advance(s.tokens[static_cast<size_t>(i)]);
    }
    if (!tokenizer || s.generated() == 0) return;
    std::span<const int32_t> gen(s.tokens.data() + s.promptLength, static_cast<size_t>(s.generated()));
    Result<std::string> t = tokenizer->decode(gen, {.skipSpecial = true});
    if (!t.isOk()) return;
    s.decoded = *t;
    if (s.stop) {
      StopMatcher::Action a = s.stop->feed(s.decoded);
      s.text = a.emit;
    } else {
      s.text = s.decoded;
    }
  }

  // Appends the text of the newly generated token to the event; true when a stop string hit.
  bool emitText(Seq& s, SeqEvent& ev) {
    if (!tokenizer) return false;
    std::string delta;
    if (tokenizer->kind() == TokenizerKind::ByteLevelBpe) {
      // Byte-level pieces are plain bytes: the new token's text is exactly what it adds.
      Result<std::string> t = tokenizer->decode(std::span<const int32_t>(&s.tokens.back(), 1), {.skipSpecial = true});
      if (!t.isOk()) return false;
      delta = std::move(*t);
      s.decoded += delta;
    } else {
      // WordPiece joins pieces depending on their neighbours: decode the whole output again.
      std::span<const int32_t> gen(s.tokens.data() + s.promptLength, static_cast<size_t>(s.generated()));
      Result<std::string> t = tokenizer->decode(gen, {.skipSpecial = true});
      if (!t.isOk()) return false;
      delta = t->size() >= s.decoded.size() ? t->substr(s.decoded.size()) : std::string();
      s.decoded = std::move(*t);
    }
    if (!s.stop) {
      s.text += delta;
      ev.text += delta;
      return false;
    }
    StopMatcher::Action a = s.stop->feed(delta);
    s.text += a.emit;
    ev.text += a.emit;
    return a.stopped;
  }

  // One forward over `items` (the first `decodeItems` single decode rows, then prefill
  // chunks): the backend's, else the kernels' path where useKernels allows it, else the
  // libtorch ops.
  // With a backend: an undefined tensor when it fails (deviceError says why).
  torch::Tensor forward(std::span<const Item> items, int64_t decodeItems,
                        const std::vector<std::pair<size_t, int64_t>>& logitRows) {
    if (backend) return forwardBackend(items, decodeItems, logitRows);
    return useKernels ? forwardKernels(items, decodeItems, logitRows) : forwardItems(items, decodeItems, logitRows);
  }
  // greedyTokens (optional): the logit rows of greedy sequences that do not keep all logits are
  // asked for their token only (StepLogitRow::greedyOnly); on return it holds each logit row's
  // token, or kNoDeviceToken where the row's logits are in the tensor (all of them when the
  // backend sent logits for every row: then it is empty).
  torch::Tensor forwardBackend(std::span<const Item> items, int64_t decodeItems,
                               const std::vector<std::pair<size_t, int64_t>>& logitRows,
                               std::vector<int32_t>* greedyTokens = nullptr);
  torch::Tensor forwardItems(std::span<const Item> items, int64_t decodeItems,
                             const std::vector<std::pair<size_t, int64_t>>& logitRows);
  torch::Tensor forwardKernels(std::span<const Item> items, int64_t decodeItems,
                               const std::vector<std::pair<size_t, int64_t>>& logitRows);
  void attendDecodeRows(std::span<const Item> items, size_t layer, const float* q, int64_t qStride, float* out);
  StepResult step();
};

}  // namespace rag::model
