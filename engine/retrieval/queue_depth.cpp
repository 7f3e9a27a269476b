#include "retrieval/queue_depth.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>

#include "core/clock.h"
#include "retrieval/embedding_service.h"

namespace rag::retrieval {

namespace {

double sumSquaredError(std::span<const LatencySample> s, double alpha, double beta) {
  double e = 0;
  for (const LatencySample& x : s) {
    const double r = alpha * static_cast<double>(x.concurrency) + beta - x.seconds;
    e += r * r;
  }
  return e;
}

}  // namespace

Result<LatencyFit> fitLatency(std::span<const LatencySample> samples) {
  if (samples.empty()) return Status::invalidArgument("fitting latency = alpha*C + beta needs at least one sample");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const LatencySample& s : samples) {
    if (s.concurrency < 1) return Status::invalidArgument("a latency sample has concurrency " + std::to_string(s.concurrency) + " (must be >= 1)");
    if (!std::isfinite(s.seconds) || s.seconds < 0)
      return Status::invalidArgument("a latency sample at concurrency " + std::to_string(s.concurrency) +
                                     " is negative or not finite");
    const auto x = static_cast<double>(s.concurrency);
    sx += x;
    sy += s.seconds;
    sxx += x * x;
    sxy += x * s.seconds;
  }
  const auto n = static_cast<double>(samples.size());
  // Candidates of the two-variable NNLS: the interior optimum, then the faces α = 0 and β = 0
  // (the corner α = β = 0 is the β = 0 face's answer when Σxy = 0). The best feasible one wins.
  std::vector<std::pair<double, double>> candidates;
  const double det = n * sxx - sx * sx;
  if (det > 1e-12 * n * sxx) {
    const double alpha = (n * sxy - sx * sy) / det;
    const double beta = (sy - alpha * sx) / n;
    if (alpha >= 0 && beta >= 0) candidates.emplace_back(alpha, beta);
  }
  candidates.emplace_back(0.0, std::max(0.0, sy / n));
  candidates.emplace_back(std::max(0.0, sxy / sxx), 0.0);
  LatencyFit best;
  double bestError = std::numeric_limits<double>::infinity();
  for (auto [alpha, beta] : candidates) {
    const double e = sumSquaredError(samples, alpha, beta);
    if (e < bestError) {
      bestError = e;
      best = {alpha, beta, std::sqrt(e / n)};
    }
  }
  return best;
}

int64_t depthWithinSlo(const LatencyFit& fit, double slo, int64_t cap) {
  cap = std::max<int64_t>(0, cap);
  auto within = [&](int64_t c) { return fit.alpha * static_cast<double>(c) + fit.beta <= slo; };
  if (!within(1)) return 0;
  if (fit.alpha <= 0) return cap;
  const double exact = (slo - fit.beta) / fit.alpha;
  if (exact >= static_cast<double>(cap)) return cap;
  auto c = static_cast<int64_t>(std::floor(exact));
  while (c > 0 && !within(c)) --c;  // rounding of the division
  while (c < cap && within(c + 1)) ++c;
  return std::min(c, cap);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

MeasureLatency medianOf(MeasureLatency measure, int repeats) {
  repeats = std::max(1, repeats);
  return [measure = std::move(measure), repeats](int64_t c) -> Result<double> {
    std::vector<double> v;
    for (int i = 0; i < repeats; ++i) {
      RAG_ASSIGN_OR_RETURN(double s, measure(c));
      v.push_back(s);
    }
    return median(std::move(v));
  };
}

Result<std::vector<LatencySample>> profileLevels(const MeasureLatency& measure, const ProfileParams& p) {
  if (!(p.slo > 0)) return Status::invalidArgument("the SLO must be a positive number of seconds");
  if (p.maxConcurrency < 1 || p.maxLevels < 1) return Status::invalidArgument("profiling needs maxConcurrency and maxLevels >= 1");
  std::vector<LatencySample> samples;
  for (int64_t c = 1; c <= p.maxConcurrency && static_cast<int>(samples.size()) < p.maxLevels; c *= 2) {
    RAG_ASSIGN_OR_RETURN(double s, measure(c));
    samples.push_back({c, s});
    if (s > p.stopFraction * p.slo && samples.size() >= 2) break;
  }
  return samples;
}

Result<StressResult> stressDepth(const MeasureLatency& measure, const StressParams& p) {
  if (!(p.slo > 0)) return Status::invalidArgument("the SLO must be a positive number of seconds");
  if (p.step < 1 || p.maxConcurrency < 1) return Status::invalidArgument("the stress test needs step and maxConcurrency >= 1");
  StressResult r;
  for (int64_t c = p.step; c <= p.maxConcurrency; c += p.step) {
    RAG_ASSIGN_OR_RETURN(double s, measure(c));
    r.samples.push_back({c, s});
    if (s > p.slo) return r;
    r.depth = c;
  }
  r.reachedCap = true;
  return r;
}

Result<LatencySample> largestWithinSlo(const MeasureLatency& measure, int64_t start, int64_t step, double slo) {
  RAG_ASSIGN_OR_RETURN(std::vector<LatencySample> one,
                       largestWithinSlo(std::span(&measure, 1), std::span(&start, 1), std::span(&step, 1), slo));
  return one[0];
}

Result<std::vector<LatencySample>> largestWithinSlo(std::span<const MeasureLatency> measures,
                                                    std::span<const int64_t> starts,
                                                    std::span<const int64_t> steps, double slo) {
  if (starts.size() != measures.size() || steps.size() != measures.size())
    return Status::invalidArgument("largestWithinSlo needs one start and one step per measure");
  std::vector<LatencySample> found(measures.size());
  std::vector<int64_t> c(starts.begin(), starts.end());
  std::vector<bool> done(measures.size());
  for (size_t i = 0; i < c.size(); ++i) done[i] = c[i] < 1;
  while (std::find(done.begin(), done.end(), false) != done.end()) {
    for (size_t i = 0; i < measures.size(); ++i) {
      if (done[i]) continue;
      RAG_ASSIGN_OR_RETURN(double s, measures[i](c[i]));
      if (s <= slo) {
        found[i] = {c[i], s};
        done[i] = true;
      } else {
        c[i] -= std::max<int64_t>(1, steps[i]);
        done[i] = c[i] < 1;
      }
    }
  }
  return found;
}

Result<double> timeBurst(EmbeddingService& service, std::span<const std::string> texts, int64_t concurrency) {
  if (texts.empty()) return Status::invalidArgument("a burst needs query texts");
  std::vector<std::future<Result<std::vector<float>>>> answers;
  answers.reserve(static_cast<size_t>(std::max<int64_t>(0, concurrency)));
  Stopwatch watch;
  for (int64_t i = 0; i < concurrency; ++i)
    answers.push_back(service.submit(texts[static_cast<size_t>(i) % texts.size()]).result);
  Status first;
  for (auto& a : answers) {
    Result<std::vector<float>> v = a.get();
    if (!v && first.isOk()) first = v.status();
  }
  const double seconds = watch.elapsedSeconds();
  if (!first) return first.withContext("a burst of " + std::to_string(concurrency) + " concurrent queries");
  return seconds;
}

}  // namespace rag::retrieval
