// Queue depths for the embedding service (papers/windve.txt §3.2, §4.2.2): the largest number
// of concurrent queries a device answers within the SLO.
//
// Two ways to find it, both driven by a function measuring the latency of C concurrent queries:
//  - the linear estimator: profile a few concurrency levels, fit latency = α·C + β by least
//    squares with α, β ≥ 0 (Eq. 12), and solve α·C + β ≤ SLO for the largest C (Eq. 7–10);
//  - the stress test: step C up by a fixed increment until the measured latency exceeds the
//    SLO; the last C within it is the depth (Table 3 compares the two).
//
//   auto measure = medianOf([&](int64_t c) { return timeBurst(*service, texts, c); }, 3);
//   RAG_ASSIGN_OR_RETURN(auto samples, profileLevels(measure, {.slo = 1.0}));
//   RAG_ASSIGN_OR_RETURN(LatencyFit fit, fitLatency(samples));
//   int64_t depth = depthWithinSlo(fit, 1.0, 4096);
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rag/status.h"

namespace rag::retrieval {

class EmbeddingService;

struct LatencySample {
  int64_t concurrency = 0;
  double seconds = 0;
};

struct LatencyFit {
  double alpha = 0;  // seconds per concurrent query, >= 0
  double beta = 0;   // seconds at no load, >= 0
  double rmse = 0;   // of the fit over its samples
};

// Least squares latency = α·C + β constrained to α, β ≥ 0 (the exact two-variable NNLS: the
// unconstrained optimum when feasible, else the best fit on the boundary α = 0 or β = 0).
// InvalidArgument: no samples, a concurrency < 1, a negative or non-finite latency.
Result<LatencyFit> fitLatency(std::span<const LatencySample> samples);

// The largest C in [0, cap] with α·C + β ≤ slo; 0 when even one query misses it (Eq. 11), cap
// when the latency does not grow (α = 0) and β meets the SLO.
int64_t depthWithinSlo(const LatencyFit& fit, double slo, int64_t cap);

// Seconds until the last of `concurrency` queries, submitted at once, is answered.
using MeasureLatency = std::function<Result<double>(int64_t concurrency)>;

// The middle value (the upper one of an even count); 0 for none.
double median(std::vector<double> values);
// The median of `repeats` measurements (a shared machine is noisy).
MeasureLatency medianOf(MeasureLatency measure, int repeats);

struct ProfileParams {
  double slo = 1.0;
  int64_t maxConcurrency = 1024;
  int maxLevels = 10;
  double stopFraction = 0.5;  // stop doubling once a level's latency passes this share of the SLO
};

// Levels C = 1, 2, 4, ... until one's latency exceeds stopFraction·slo, C would pass
// maxConcurrency, or maxLevels were measured (at least two levels when maxConcurrency >= 2).
Result<std::vector<LatencySample>> profileLevels(const MeasureLatency& measure, const ProfileParams& params);

struct StressParams {
  double slo = 1.0;
  int64_t step = 8;             // the paper's increment
  int64_t maxConcurrency = 1024;
};

struct StressResult {
  int64_t depth = 0;            // the last level within the SLO (0: the first level missed it)
  bool reachedCap = false;      // maxConcurrency was still within the SLO
  std::vector<LatencySample> samples;
};

// C = step, 2·step, ... while the latency stays within the SLO.
Result<StressResult> stressDepth(const MeasureLatency& measure, const StressParams& params);

// From `start` down in steps of `step` (at least 1), the first C whose latency is within the
// SLO, with that latency; {0, 0} when none down to 1.
Result<LatencySample> largestWithinSlo(const MeasureLatency& measure, int64_t start, int64_t step, double slo);

// Several such searches stepped down together (all spans of one size): round by round, each
// unfinished search measures its current C, so that a change in a shared machine's load hits
// every configuration alike instead of the one measured last.
Result<std::vector<LatencySample>> largestWithinSlo(std::span<const MeasureLatency> measures,
                                                    std::span<const int64_t> starts,
                                                    std::span<const int64_t> steps, double slo);

// Submits `concurrency` queries at once (texts[i % texts.size()]) and waits for all: the
// seconds until the last answer. Any answer that is not a vector (Busy included) is an error
// naming it, so the caller learns that the burst exceeded the queue depths.
Result<double> timeBurst(EmbeddingService& service, std::span<const std::string> texts, int64_t concurrency);

}  // namespace rag::retrieval
