#include "dragon/aggregation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace rag::dragon {

namespace {

double logSumExp(std::span<const double> v) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : v) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// Draws an index with probability w[i] / Σw (w ≥ 0, Σw > 0).
size_t drawIndex(std::span<const double> w, Rng& rng) {
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  double u = rng.uniform01() * total;
  for (size_t i = 0; i < w.size(); ++i) {
    if (u < w[i]) return i;
    u -= w[i];
  }
  for (size_t i = w.size(); i-- > 0;)  // rounding: the last non-zero weight
    if (w[i] > 0) return i;
  return 0;
}

}  // namespace

LocalDist localAggregate(std::span<const std::span<const float>> rows, std::span<const double> scores,
                         const TruncateParams& params) {
  LocalDist out;
  if (rows.empty()) return out;
  const size_t vocab = rows[0].size();
  out.weight = logSumExp(scores);
  std::vector<double> p(vocab, 0.0);
  const double invT = params.temperature > 0 ? 1.0 / params.temperature : 1.0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::span<const float> row = rows[i];
    double m = -std::numeric_limits<double>::infinity();
    for (float x : row) m = std::max(m, static_cast<double>(x) * invT);
    double z = 0;
    for (float x : row) z += std::exp(static_cast<double>(x) * invT - m);
    // log w_i + log softmax(row / T) = r_i − W + x/T − m − log z
    const double shift = scores[i] - out.weight - m - std::log(z);
    for (size_t v = 0; v < vocab; ++v) p[v] += std::exp(static_cast<double>(row[v]) * invT + shift);
  }
  // Top-p: the smallest set of most likely tokens whose mass reaches topP (at least one), the
  // lower id first on ties.
  std::vector<uint32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0u);
  auto before = [&](uint32_t a, uint32_t b) { return p[a] != p[b] ? p[a] > p[b] : a < b; };
  // Usually a short head holds the mass: sort a head of 64 first, everything only if needed.
  const size_t head = std::min<size_t>(64, vocab);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(head), order.end(), before);
  double headMass = 0;
  for (size_t i = 0; i < head; ++i) headMass += p[order[i]];
  if (headMass < params.topP) std::sort(order.begin(), order.end(), before);
  double mass = 0;
  size_t keep = 0;
  while (keep < vocab && p[order[keep]] > 0) {
    mass += p[order[keep]];
    ++keep;
    if (mass >= params.topP) break;
  }
  if (keep == 0) keep = 1;  // every probability underflowed: keep the first (a degenerate model)
  std::vector<uint32_t> ids(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
  std::sort(ids.begin(), ids.end());
  double kept = 0;
  for (uint32_t id : ids) kept += p[id];
  out.dist.ids = ids;
  out.dist.logp.reserve(ids.size());
  for (uint32_t id : ids)  // rounded as the wire carries them (protocol.h), so both sides agree
    out.dist.logp.push_back(
        roundToHalf(kept > 0 ? static_cast<float>(std::log(p[id] / kept)) : -std::log(static_cast<float>(keep))));
  return out;
}

uint32_t drawDraft(const SparseDist& d, bool greedy, Rng& rng) {
  if (greedy) {
    size_t best = 0;
    for (size_t i = 1; i < d.ids.size(); ++i)
      if (d.logp[i] > d.logp[best]) best = i;  // ids ascending: the lower id wins ties
    return d.ids[best];
  }
  std::vector<double> w(d.ids.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::exp(static_cast<double>(d.logp[i]));
  return d.ids[drawIndex(w, rng)];
}

std::pair<double, double> sideWeights(double wDevice, double wCloud) {
  if (!std::isfinite(wDevice) && !std::isfinite(wCloud)) return {0.5, 0.5};
  const double m = std::max(wDevice, wCloud);
  const double a = std::exp(wDevice - m), b = std::exp(wCloud - m);
  return {a / (a + b), b / (a + b)};
}

SparseDist mixture(const SparseDist& d, double od, const SparseDist& c, double oc) {
  SparseDist out;
  size_t i = 0, j = 0;
  while (i < d.ids.size() || j < c.ids.size()) {
    uint32_t id;
    double p = 0;
    if (j == c.ids.size() || (i < d.ids.size() && d.ids[i] < c.ids[j])) {
      id = d.ids[i];
      p = od * std::exp(static_cast<double>(d.logp[i++]));
    } else if (i == d.ids.size() || c.ids[j] < d.ids[i]) {
      id = c.ids[j];
      p = oc * std::exp(static_cast<double>(c.logp[j++]));
    } else {
      id = d.ids[i];
      p = od * std::exp(static_cast<double>(d.logp[i++])) + oc * std::exp(static_cast<double>(c.logp[j++]));
    }
    if (p <= 0) continue;
    out.ids.push_back(id);
    out.logp.push_back(static_cast<float>(std::log(p)));
  }
  return out;
}

double expectedAcceptance(const SparseDist& ps, const SparseDist& p) {
  double overlap = 0, dot = 0;
  for (size_t i = 0; i < ps.ids.size(); ++i) {
    const double a = std::exp(static_cast<double>(ps.logp[i]));
    const double b = p.prob(ps.ids[i]);
    overlap += std::min(a, b);
    dot += a * b;
  }
  return 0.5 * overlap + 0.5 * dot;
}

AggregateResult aggregate(const Draft& device, const Draft& cloud, bool greedy, Rng& rng) {
  const auto [od, oc] = sideWeights(device.weight, cloud.weight);
  const SparseDist p = mixture(device.dist, od, cloud.dist, oc);
  AggregateResult r;
  r.acceptance[0] = expectedAcceptance(device.dist, p);
  r.acceptance[1] = expectedAcceptance(cloud.dist, p);
  if (greedy) {
    r.token = drawDraft(p, true, rng);
  } else {
    // Each side's speculative sampling: keep x_s when p_s(x_s) ≤ p(x_s), else keep it with
    // probability p(x_s)/p_s(x_s), else draw from norm(max(0, p − p_s)).
    uint32_t y[2];
    const Draft* drafts[2] = {&device, &cloud};
    for (int s = 0; s < 2; ++s) {
      const Draft& d = *drafts[s];
      const double ps = d.dist.prob(d.token), pt = p.prob(d.token);
      if (ps <= pt || rng.uniform01() < pt / ps) {
        y[s] = d.token;
        continue;
      }
      std::vector<double> residual(p.ids.size());
      for (size_t k = 0; k < p.ids.size(); ++k)
        residual[k] = std::max(0.0, std::exp(static_cast<double>(p.logp[k])) - d.dist.prob(p.ids[k]));
      y[s] = std::accumulate(residual.begin(), residual.end(), 0.0) > 0 ? p.ids[drawIndex(residual, rng)] : d.token;
    }
    r.token = rng.uniform01() < 0.5 ? y[0] : y[1];
  }
  r.accepted[0] = device.token == r.token;
  r.accepted[1] = cloud.token == r.token;
  return r;
}

}  // namespace rag::dragon
