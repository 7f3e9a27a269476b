#include "retrieval/gpu_budget.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "retrieval/cluster_cache.h"

namespace rag::retrieval {

Result<SampledCurve> SampledCurve::create(std::vector<std::pair<double, double>> points) {
  if (points.empty())
    return Status::invalidArgument("a sampled throughput curve needs at least one point");
  for (const auto& [x, y] : points)
    if (!std::isfinite(x) || !std::isfinite(y) || y < 0)
      return Status::invalidArgument("a sampled throughput curve has a non-finite size or a "
                                     "negative or non-finite throughput");
  std::sort(points.begin(), points.end());
  for (size_t i = 1; i < points.size(); ++i)
    if (points[i].first == points[i - 1].first)
      return Status::invalidArgument("a sampled throughput curve lists size " +
                                     std::to_string(points[i].first) + " twice");
  SampledCurve c;
  c.m_points = std::move(points);
  return c;
}

double SampledCurve::operator()(double bytes) const {
  if (bytes <= m_points.front().first) return m_points.front().second;
  if (bytes >= m_points.back().first) return m_points.back().second;
  auto hi = std::upper_bound(m_points.begin(), m_points.end(), bytes,
                             [](double x, const std::pair<double, double>& p) { return x < p.first; });
  auto lo = hi - 1;
  const double t = (bytes - lo->first) / (hi->first - lo->first);
  return lo->second + t * (hi->second - lo->second);
}

Result<GpuBudgetSplit> splitGpuBudget(const GpuBudgetParams& p,
                                      const std::function<double(int64_t)>& generation,
                                      const std::function<double(int64_t)>& retrieval) {
  if (!generation || !retrieval)
    return Status::invalidArgument("GPU budget: give both throughput curves (T_G and T_R)");
  if (p.gpuBytes <= 0 || p.modelBytes < 0 || p.minKvBytes < 0 || p.kvStepBytes <= 0)
    return Status::invalidArgument("GPU budget: gpuBytes and kvStepBytes must be positive, "
                                   "modelBytes and minKvBytes non-negative");
  const int64_t free = p.gpuBytes - p.modelBytes;
  if (free < p.minKvBytes)
    return Status::invalidArgument(
        "GPU budget: the model (" + std::to_string(p.modelBytes) + " bytes) and the minimum KV "
        "cache (" + std::to_string(p.minKvBytes) + " bytes) do not fit in " +
        std::to_string(p.gpuBytes) + " bytes of GPU memory; use a smaller model or a larger GPU");
  constexpr int64_t kMaxSizes = 65536;
  const int64_t span = free - p.minKvBytes;
  const int64_t step = std::max(p.kvStepBytes, (span + kMaxSizes - 2) / (kMaxSizes - 1));
  GpuBudgetSplit best;
  bool found = false;
  // From the largest KV cache down; a later size must be strictly better (ties: larger KV).
  for (int64_t kv = free;; kv = std::max(p.minKvBytes, kv - step)) {
    const double tg = generation(kv), tr = retrieval(free - kv);
    if (!std::isfinite(tg) || !std::isfinite(tr) || tg < 0 || tr < 0)
      return Status::invalidArgument("GPU budget: a throughput curve returned " +
                                     std::to_string(std::isfinite(tg) && tg >= 0 ? tr : tg) +
                                     " at KV size " + std::to_string(kv) +
                                     "; throughputs must be finite and >= 0");
    if (!found || std::min(tg, tr) > best.throughput()) {
      best = {kv, free - kv, tg, tr};
      found = true;
    }
    if (kv == p.minKvBytes) break;
  }
  return best;
}

double cachedVisitFraction(int64_t cacheBytes, std::span<const double> heat,
                           std::span<const int64_t> bytes) {
  double total = 0;
  for (double h : heat) total += std::max(0.0, h);
  if (!(total > 0) || cacheBytes <= 0) return 0.0;
  double served = 0;
  for (int64_t c : selectHotClusters(heat, bytes, cacheBytes, 0))
    served += heat[static_cast<size_t>(c)];
  return served / total;
}

}  // namespace rag::retrieval
