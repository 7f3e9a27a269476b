// The GPU memory split of HedraRAG Eq. (2): after the model, the device memory goes to the KV
// cache (generation) and the cluster cache (retrieval); the KV size is
//
//   argmax_{KV_size} min{ T_G(KV_size, rps_G), T_R(rps_R, cache = free - KV_size) }
//
// where T_G and T_R are throughputs measured offline (or modelled) at the workflow's expected
// request rates. The paper's T_R is the CPU retrieval throughput; here it also takes the cache
// size, since the point of the split is what the cluster cache buys (cachedVisitFraction turns
// bytes into the share of cluster visits served by the device, hottest clusters first).
//
//   RAG_ASSIGN_OR_RETURN(GpuBudgetSplit s, splitGpuBudget(
//       {.gpuBytes = 80ll << 30, .modelBytes = 16ll << 30, .minKvBytes = 4ll << 30},
//       [&](int64_t kv) { return tg(kv); }, [&](int64_t cache) { return tr(cache); }));
//   ClusterCache::create(index, store, {.capacityBytes = s.clusterCacheBytes});
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "rag/status.h"

namespace rag::retrieval {

// A throughput measured at a few sizes, linear in between and flat beyond the ends.
class SampledCurve {
public:
  // (bytes, throughput) points in any order; at least one. InvalidArgument for none, a repeated
  // size, or a non-finite or negative value.
  static Result<SampledCurve> create(std::vector<std::pair<double, double>> points);
  double operator()(double bytes) const;

private:
  std::vector<std::pair<double, double>> m_points;  // sorted by bytes
};

struct GpuBudgetParams {
  int64_t gpuBytes = 0;          // device memory for model, KV cache and cluster cache
  int64_t modelBytes = 0;        // weights and workspace
  int64_t minKvBytes = 0;        // the least KV cache generation can run with
  int64_t kvStepBytes = 1 << 20; // granularity of the search (e.g. one KV block)
};

struct GpuBudgetSplit {
  int64_t kvBytes = 0;
  int64_t clusterCacheBytes = 0;
  double generationThroughput = 0;  // T_G at kvBytes
  double retrievalThroughput = 0;   // T_R at clusterCacheBytes
  double throughput() const { return std::min(generationThroughput, retrievalThroughput); }
};

// Solves Eq. (2) by trying every KV size from minKvBytes to the free memory in kvStepBytes steps
// (the free memory itself included; the step grows so at most 65,536 sizes are tried; the curves
// need not be monotone). Ties go to the larger KV cache: a cluster cache that buys nothing is
// not worth KV swapping. InvalidArgument when the model and the minimum KV cache do not fit, for
// non-positive sizes, or when a curve returns a negative or non-finite throughput.
Result<GpuBudgetSplit> splitGpuBudget(const GpuBudgetParams& params,
                                      const std::function<double(int64_t kvBytes)>& generation,
                                      const std::function<double(int64_t cacheBytes)>& retrieval);

// Share of cluster visits (by `heat`, e.g. access counts) that a cache of `cacheBytes` serves
// when it holds the hottest clusters that fit (selectHotClusters in cluster_cache.h); bytes[c]
// is cluster c's size on the device. 0 when there is no heat.
double cachedVisitFraction(int64_t cacheBytes, std::span<const double> heat,
                           std::span<const int64_t> bytes);

}  // namespace rag::retrieval
