#include "model/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "model/logit_ops.h"

namespace rag::model {

namespace {

constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr float kNegInf = -kPosInf;

std::string formatFloat(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

// Descending by logit, then ascending by id: a strict total order over candidates (which hold
// no NaN), so the top-k set and the nucleus are the same on every run.
struct MoreLikely {
  template <typename C>
  bool operator()(const C& a, const C& b) const {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};

// Weights are summed by blocks of this many tokens, so that a draw walks the block sums and then
// one block instead of the whole vocabulary.
constexpr size_t kDrawBlock = 256;
// Top-k scans the logits in blocks of this many and skips a block whose max does not beat the
// k-th best so far (most blocks, once the heap has filled).
constexpr size_t kScanBlock = 64;
// Top-k with k above n / kHeapRatio selects with nth_element over all tokens instead of a heap.
constexpr size_t kHeapRatio = 16;
// Weight thresholds (relative to the most likely token) tried in turn to bound the top-p
// candidates; 0 (every token) when none holds the nucleus.
constexpr float kNucleusThresholds[] = {0x1p-3f, 0x1p-8f, 0x1p-16f, 0x1p-32f, 0x1p-64f};
// The nucleus search sorts a range this small instead of partitioning it further.
constexpr size_t kSortBelow = 32;

// Draws from weights[0..n) (weightAt(i) >= 0): the index whose interval of the running sum holds
// `target`, with `target` in [0, sum). On return `target` is the offset into that index's
// interval, so a draw can descend from block sums into a block. Zero weights are never chosen;
// when rounding leaves the running sum at or below `target`, the last positive weight is chosen
// and `target` becomes its weight (so a descent again takes the last positive entry).
template <typename WeightAt>
size_t drawByWeight(double& target, size_t n, WeightAt weightAt) {
  size_t lastPositive = 0;
  double lastWeight = 0;
  for (size_t i = 0; i < n; ++i) {
    double w = weightAt(i);
    if (w <= 0) continue;
    if (target < w) return i;
    target -= w;
    lastPositive = i;
    lastWeight = w;
  }
  target = lastWeight;
  return lastPositive;
}

// Reorders c so that its first N entries are its N most likely (by MoreLikely, in no particular
// order), N being the smallest count whose weights reach `target`, and returns N (>= 1 when
// target > 0). A quickselect that carries the mass of what it has already placed in front:
// O(size) expected, where sorting would be O(size log size).
template <typename C>
size_t selectNucleus(std::vector<C>& c, double target) {
  size_t lo = 0;
  size_t hi = c.size();
  double before = 0;  // the weight of c[0, lo), all more likely than c[lo, hi)
  auto weightOf = [&](size_t from, size_t to) {
    double s = 0;
    for (size_t i = from; i < to; ++i) s += c[i].weight;
    return s;
  };
  while (hi - lo > kSortBelow) {
    // Median of three as the pivot, parked at hi - 1 while the rest is partitioned.
    size_t mid = lo + (hi - lo) / 2;
    MoreLikely more;
    if (more(c[mid], c[lo])) std::swap(c[mid], c[lo]);
    if (more(c[hi - 1], c[lo])) std::swap(c[hi - 1], c[lo]);
    if (more(c[mid], c[hi - 1])) std::swap(c[mid], c[hi - 1]);
    const C pivot = c[hi - 1];
    auto split = std::partition(c.begin() + static_cast<ptrdiff_t>(lo),
                                c.begin() + static_cast<ptrdiff_t>(hi - 1),
                                [&](const C& x) { return more(x, pivot); });
    size_t p = static_cast<size_t>(split - c.begin());
    std::swap(c[p], c[hi - 1]);  // c[lo, p) more likely than the pivot at p, c(p, hi) less
    double upper = weightOf(lo, p);
    if (before + upper >= target) {
      hi = p;  // the nucleus ends inside c[lo, p)
      continue;
    }
    before += upper + c[p].weight;
    if (before >= target) return p + 1;
    lo = p + 1;
  }
  std::sort(c.begin() + static_cast<ptrdiff_t>(lo), c.begin() + static_cast<ptrdiff_t>(hi),
            MoreLikely{});
  for (size_t i = lo; i < hi; ++i) {
    before += c[i].weight;
    if (before >= target) return i + 1;
  }
  return std::max<size_t>(hi, 1);  // rounding: the sums in another order fell just short
}

}  // namespace

Status SamplingParams::validate() const {
  if (!(std::isfinite(temperature) && temperature >= 0))
    return Status::invalidArgument("sampling temperature must be finite and >= 0 (0 = greedy), got " +
                                   formatFloat(temperature));
  if (topK < 0)
    return Status::invalidArgument("sampling topK must be >= 0 (0 = off), got " +
                                   std::to_string(topK));
  if (!(topP > 0 && topP <= 1))
    return Status::invalidArgument("sampling topP must be in (0, 1] (1 = off), got " +
                                   formatFloat(topP));
  if (maxTokens < 0)
    return Status::invalidArgument("sampling maxTokens must be >= 0, got " +
                                   std::to_string(maxTokens));
  for (size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty())
      return Status::invalidArgument("sampling stop[" + std::to_string(i) +
                                     "] is an empty string, which would end every generation "
                                     "at once; remove it");
  for (size_t i = 0; i < stopTokenIds.size(); ++i)
    if (stopTokenIds[i] < 0)
      return Status::invalidArgument("sampling stopTokenIds[" + std::to_string(i) + "] is " +
                                     std::to_string(stopTokenIds[i]) +
                                     "; token ids must be >= 0");
  if (!(copyFloor >= 0 && copyFloor <= 1))
    return Status::invalidArgument("sampling copyFloor must be in [0, 1] (0 = always copy), got " +
                                   formatFloat(copyFloor));
  return Status::ok();
}

int32_t argmaxToken(std::span<const float> logits) {
  return static_cast<int32_t>(argmaxLogit(logits.data(), logits.size()));
}

Sampler::Sampler(const SamplingParams& params)
    : m_temperature(std::isfinite(params.temperature) && params.temperature > 0 &&
                            std::isfinite(1.0f / params.temperature)
                        ? params.temperature
                        : 0.0f),
      m_invTemperature(m_temperature > 0 ? 1.0f / m_temperature : 0.0f),
      m_topK(std::max(params.topK, int32_t{0})),
      m_topP(params.topP > 0 && params.topP < 1 ? params.topP : 1.0f),
      m_rng(params.seed) {}

int32_t Sampler::sample(std::span<const float> logits) {
  const float* x = logits.data();
  const size_t n = logits.size();
  if (greedy()) return argmaxToken(logits);

  const float mx = maxLogit(x, n);
  if (mx == kNegInf) return -1;  // empty, or all NaN / -inf
  std::vector<Candidate>& c = m_candidates;

  if (mx == kPosInf) {
    // exp(+inf - +inf) is undefined; the limit of softmax is uniform over the +inf logits.
    c.clear();
    for (size_t i = 0; i < n; ++i)
      if (x[i] == kPosInf) c.push_back({kPosInf, 1.0f, static_cast<int32_t>(i)});
    if (m_topK > 0 && static_cast<size_t>(m_topK) < c.size()) c.resize(static_cast<size_t>(m_topK));
    return drawFromCandidates(static_cast<double>(c.size()));
  }

  if (m_topK > 0 && static_cast<size_t>(m_topK) < n) {
    gatherTopK(x, n);
    m_scratch.resize(c.size());
    for (size_t i = 0; i < c.size(); ++i) m_scratch[i] = c[i].logit;
    double total = scaledExp(m_scratch.data(), m_scratch.size(), mx, m_invTemperature,
                             m_scratch.data());
    for (size_t i = 0; i < c.size(); ++i) c[i].weight = m_scratch[i];
    return drawFromCandidates(total);
  }

  // Every token: exp weights by blocks.
  m_weights.resize(n);
  m_blockSums.clear();
  double total = 0;
  for (size_t b = 0; b < n; b += kDrawBlock) {
    double s = scaledExp(x + b, std::min(kDrawBlock, n - b), mx, m_invTemperature,
                         m_weights.data() + b);
    m_blockSums.push_back(s);
    total += s;
  }
  if (m_topP < 1) {
    // The tokens of weight >= theta come first in likelihood order, so when they hold the
    // target mass they hold the nucleus: only they become candidates. Each try is one
    // vectorised pass; a peaked distribution stops early with few candidates.
    const double target = static_cast<double>(m_topP) * total;
    float theta = 0;
    for (float t : kNucleusThresholds)
      if (sumAtLeast(m_weights.data(), n, t) >= target) {
        theta = t;
        break;
      }
    c.clear();
    for (size_t b = 0; b < m_blockSums.size(); ++b) {
      if (m_blockSums[b] < theta) continue;  // every weight in the block is below theta
      for (size_t i = b * kDrawBlock, end = std::min(n, i + kDrawBlock); i < end; ++i)
        if (m_weights[i] >= theta && m_weights[i] > 0)
          c.push_back({x[i], m_weights[i], static_cast<int32_t>(i)});
    }
    return drawFromCandidates(total);
  }
  double target = m_rng.uniform01() * total;
  size_t block = drawByWeight(target, m_blockSums.size(),
                              [&](size_t j) { return m_blockSums[j]; });
  const size_t first = block * kDrawBlock;
  size_t i = drawByWeight(target, std::min(kDrawBlock, n - first),
                          [&](size_t j) { return m_weights[first + j]; });
  return static_cast<int32_t>(first + i);
}

// The min(topK, eligible) most likely tokens into m_candidates, in no particular order.
void Sampler::gatherTopK(const float* x, size_t n) {
  std::vector<Candidate>& c = m_candidates;
  c.clear();
  const auto k = static_cast<size_t>(m_topK);
  if (k * kHeapRatio > n) {
    for (size_t i = 0; i < n; ++i)
      if (x[i] > kNegInf) c.push_back({x[i], 0.0f, static_cast<int32_t>(i)});
    if (k < c.size()) {
      std::nth_element(c.begin(), c.begin() + static_cast<ptrdiff_t>(k), c.end(), MoreLikely{});
      c.resize(k);
    }
    return;
  }
  // A heap whose front is the least likely of the k kept. Ids arrive in increasing order, so a
  // token displaces the front only with a strictly larger logit (a tie favours the lower id).
  for (size_t b = 0; b < n; b += kScanBlock) {
    const size_t end = std::min(n, b + kScanBlock);
    if (c.size() == k && !(maxLogit(x + b, end - b) > c.front().logit)) continue;
    for (size_t i = b; i < end; ++i) {
      if (c.size() < k) {
        if (!(x[i] > kNegInf)) continue;
        c.push_back({x[i], 0.0f, static_cast<int32_t>(i)});
        std::push_heap(c.begin(), c.end(), MoreLikely{});
      } else if (x[i] > c.front().logit) {
        std::pop_heap(c.begin(), c.end(), MoreLikely{});
        c.back() = {x[i], 0.0f, static_cast<int32_t>(i)};
        std::push_heap(c.begin(), c.end(), MoreLikely{});
      }
    }
  }
}

// Applies top-p to m_candidates (whose weights sum to `total`) and draws one.
int32_t Sampler::drawFromCandidates(double total) {
  std::vector<Candidate>& c = m_candidates;
  if (m_topP < 1) {
    c.resize(selectNucleus(c, static_cast<double>(m_topP) * total));
    total = 0;
    for (const Candidate& x : c) total += x.weight;  // exactly what the draw walks over
  }
  double target = m_rng.uniform01() * total;
  size_t i = drawByWeight(target, c.size(), [&](size_t j) { return c[j].weight; });
  return c[i].id;
}

}  // namespace rag::model
