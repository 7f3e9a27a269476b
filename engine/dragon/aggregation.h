// Output aggregation (DRAGON Eq. 2 and 4) and the speculative aggregation step (Algorithm 1).
//
//   // each side, every step: its documents' logits -> one local distribution and weight
//   LocalDist mine = localAggregate(rows, scores, vocab, {.topP = 0.8});
//   // the aggregator, with both sides' drafts:
//   AggregateResult r = aggregate(deviceDraft, cloudDraft, /*greedy=*/true, rng);
//   // r.token is the target token; r.accepted[s] says whether side s's draft survives
//
// Local aggregate of side s over its documents i with retrieval scores r_i:
//   log p_s(v) = logsumexp_i( r_i − logsumexp_j r_j + log softmax(logits_i)(v) )
//   W_s        = logsumexp_i r_i                         (the corrected weight, Appendix A.1)
// Global aggregate: p = ω_D·p_D + ω_C·p_C with (ω_D, ω_C) = softmax(W_D, W_C), which equals
// Eq. 2 over the union of both sides' documents.
//
// Transmitted distributions are truncated to their top-p set (the authors use 0.8) and
// renormalised; the draft token is drawn from that truncated distribution, so the aggregator
// sees exactly the distribution the draft came from (otherwise p_s(x_s) could be 0).
//
// Greedy mode: the target is argmax p (lowest id on ties), so it is token-identical to
// synchronous aggregation whatever the drafts were; a draft is accepted iff it equals the target.
// Sampling mode: Algorithm 1 (each side's speculative sampling, then a fair coin between y_D
// and y_C), which draws y ~ p (Appendix A.2).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/random.h"
#include "dragon/protocol.h"

namespace rag::dragon {

struct TruncateParams {
  double topP = 0.8;         // in (0, 1]; 1 keeps every token with non-zero probability
  double temperature = 1.0;  // each document's softmax(logits / temperature); > 0
};

struct LocalDist {
  SparseDist dist;   // truncated, renormalised, ids ascending
  double weight = 0; // W_s
};

// `rows`: one logits row per document (F32 [vocab] each); `scores`: the documents' retrieval
// scores (same count, at least one).
LocalDist localAggregate(std::span<const std::span<const float>> rows, std::span<const double> scores,
                         const TruncateParams& params);

// The token a decoder drafts from its local distribution: the argmax (greedy) or a draw.
uint32_t drawDraft(const SparseDist& d, bool greedy, Rng& rng);

// (ω_D, ω_C) = softmax(W_D, W_C).
std::pair<double, double> sideWeights(double wDevice, double wCloud);

// p = ω_D p_D + ω_C p_C over the union of the two supports (ids ascending).
SparseDist mixture(const SparseDist& device, double omegaDevice, const SparseDist& cloud, double omegaCloud);

struct AggregateResult {
  uint32_t token = 0;
  bool accepted[2] = {false, false};  // by Side
  double acceptance[2] = {0, 0};      // Eq. 5's expected acceptance of each side's draft
};

// Algorithm 1 on the two drafts at the same position. Randomness only in sampling mode.
AggregateResult aggregate(const Draft& device, const Draft& cloud, bool greedy, Rng& rng);

// Eq. 5: the expected acceptance of side s's draft, α_s = ½·Σ min(p_s, p) + ½·Σ p_s·p.
double expectedAcceptance(const SparseDist& ps, const SparseDist& p);

}  // namespace rag::dragon
