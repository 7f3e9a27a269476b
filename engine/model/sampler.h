// Choosing the next token from a row of logits: greedy, or temperature / top-k / top-p
// sampling with a per-sequence seeded RNG.
//
//   SamplingParams sp{.temperature = 0.7f, .topK = 40, .topP = 0.9f, .seed = request.seed};
//   RAG_RETURN_IF_ERROR(sp.validate());
//   Sampler sampler(sp);                               // one per sequence
//   int32_t next = sampler.sample(logits);             // logits: F32 [vocab]
//
// Greedy (temperature 0) is the argmax, the lowest id on ties. Otherwise the distribution is
// softmax(logits / temperature) restricted to the topK most likely tokens (ties broken towards
// the lower id), renormalised, then restricted to the smallest set of most likely tokens whose
// probability reaches topP (always at least one token), renormalised again — the order of
// Hugging Face's temperature, top-k and top-p warpers.
//
// Tokens whose logit is NaN or -inf are never chosen (-inf is how a caller masks a token out).
// When the max logit is +inf, the draw is uniform over the +inf tokens.
//
// Reproducibility: each Sampler owns its RNG (std::mt19937_64 seeded with `seed`, with our own
// transform to [0, 1), see workload/trace_random.h), so a sequence's tokens depend only on its
// seed and its logits, not on what other sequences or threads do, and not on the standard
// library. Sequences that should differ need different seeds. A Sampler is not thread-safe;
// use one per sequence.
//
// Cost, for a vocabulary of n (vectorised passes in logit_ops.h): greedy is one pass; plain
// temperature sampling two (max, then exp weights) and a draw that walks block sums; top-k is a
// max pass plus a heap scan that skips blocks below the k-th best, with exp for only k tokens;
// top-p finds the nucleus by a weighted quickselect, O(n) expected, without sorting.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "rag/status.h"
#include "core/random.h"

namespace rag::model {

struct SamplingParams {
  float temperature = 0;   // 0: greedy; > 0: sample from softmax(logits / temperature)
  int32_t topK = 0;        // 0: off; k > 0: only the k most likely tokens
  float topP = 1;          // in (0, 1]; 1: off
  uint64_t seed = 0;       // the sequence's RNG seed
  int32_t maxTokens = 64;  // generation stops after this many new tokens
  // Generation stops when the text contains one of `stop` (see stop_matcher.h; the stop string
  // is not returned) or after sampling one of `stopTokenIds`. ("= {}" lets designated
  // initializers leave them out without -Wmissing-field-initializers.)
  std::vector<std::string> stop = {};
  std::vector<int32_t> stopTokenIds = {};
  // The model's end-of-sequence tokens do not stop it (benchmarks that must decode exactly
  // maxTokens whatever the model says; vLLM's ignore_eos).
  bool ignoreEos = false;
  // Non-empty: copy-constrained decoding, the generated text must stay a span of this text (the
  // passages the answer should come from; model/span_constraint.h). Needs a tokenizer.
  std::string copyFrom = {};
  // The constraint lifts (free generation) when, within the answer's first word, the likeliest
  // token that keeps a span is less than this many times as probable as the likeliest token: the
  // model is not copying (span_constraint.h). In [0, 1]; 0: always copy.
  float copyFloor = kDefaultCopyFloor;
  static constexpr float kDefaultCopyFloor = 0.1f;  // chosen on the dev split (README, "Extractive answers")

  // InvalidArgument naming the field, its value and the allowed range: temperature must be
  // finite and >= 0, topK >= 0, topP in (0, 1], maxTokens >= 0, stop strings non-empty,
  // stopTokenIds >= 0, copyFloor in [0, 1].
  Status validate() const;
};

class Sampler {
public:
  // `params` should have passed validate(); out-of-range values are clamped (a negative or NaN
  // temperature, or one so small that 1/temperature overflows, is greedy; topK < 0 is off;
  // topP outside (0, 1] is off).
  explicit Sampler(const SamplingParams& params);

  // The chosen token id in [0, logits.size()), or -1 when no token can be chosen (logits is
  // empty, or every logit is NaN or -inf).
  int32_t sample(std::span<const float> logits);

  bool greedy() const { return m_temperature <= 0; }

private:
  struct Candidate {
    float logit;
    float weight;  // exp((logit - max) / T)
    int32_t id;
  };
  void gatherTopK(const float* logits, size_t n);
  int32_t drawFromCandidates(double total);

  float m_temperature;
  float m_invTemperature;
  int32_t m_topK;
  float m_topP;
  Rng m_rng;
  // Scratch, reused across calls so that sampling does not allocate once warmed up.
  std::vector<Candidate> m_candidates;
  std::vector<float> m_weights;      // per token, when no top-k applies
  std::vector<double> m_blockSums;   // sums of m_weights by blocks, for a two-level draw
  std::vector<float> m_scratch;
};

// The greedy choice: the index of the largest logit, the lowest on ties, skipping NaN and -inf;
// -1 when there is none (see logit_ops.h).
int32_t argmaxToken(std::span<const float> logits);

}  // namespace rag::model
