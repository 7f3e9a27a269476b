// Calibration of the step cost models (retrieval/ivf_index.h: ClusterCostModel for a task's own
// scan, SharedScanCostModel for a shared step): timed scans of the index's own clusters, fitted
// by least squares. The sub-stage planner prices clusters with them.
#include <faiss/utils/distances.h>

#include <cmath>

#include "core/clock.h"
#include "retrieval/ivf_index_impl.h"
#include "retrieval/shared_scan.h"

namespace rag::retrieval {

using namespace ivf_detail;

namespace {

// One timed batch of scans: `visits` (query, cluster) pairs covering `vectors` vectors.
struct CostSample {
  double visits = 0;
  double vectors = 0;
  double seconds = 0;
};

// Least squares seconds = a·visits + b·vectors with a, b >= 0 (the two-variable NNLS: solve
// the normal equations; if a coefficient comes out negative, drop it and refit the other).
ClusterCostModel fitCostModel(const std::vector<CostSample>& samples) {
  ClusterCostModel m;
  m.samples = static_cast<int32_t>(samples.size());
  double uu = 0, uv = 0, vv = 0, ut = 0, vt = 0;
  for (const CostSample& s : samples) {
    uu += s.visits * s.visits, uv += s.visits * s.vectors, vv += s.vectors * s.vectors;
    ut += s.visits * s.seconds, vt += s.vectors * s.seconds;
  }
  const double det = uu * vv - uv * uv;
  if (det > 1e-12 * uu * vv) {
    m.a = (ut * vv - vt * uv) / det;
    m.b = (vt * uu - ut * uv) / det;
  } else {
    m.a = m.b = -1;  // collinear samples: fall through to a one-variable fit
  }
  if (m.a < 0 || m.b < 0) {
    const double bOnly = vv > 0 ? vt / vv : 0;  // a = 0
    const double aOnly = uu > 0 ? ut / uu : 0;  // b = 0
    double errB = 0, errA = 0;
    for (const CostSample& s : samples) {
      errB += (s.seconds - bOnly * s.vectors) * (s.seconds - bOnly * s.vectors);
      errA += (s.seconds - aOnly * s.visits) * (s.seconds - aOnly * s.visits);
    }
    if (errB <= errA) m.a = 0, m.b = std::max(0.0, bOnly);
    else m.a = std::max(0.0, aOnly), m.b = 0;
  }
  return m;
}

}  // namespace

// Times the step's scan (scanAlone: carried heaps, several queries per call, each visiting
// clusters no other query in the call visits, so most reads are cold), and fits
// seconds = a·visits + b·vectors over the calls. The clusters are split by size into four bands
// and each call draws from one band, so that the calls differ in vectors per visit and a and b
// can be told apart. Every call runs twice, in two passes over all calls, and keeps its faster
// time (a preempted run only ever adds time).
ClusterCostModel IvfIndex::Impl::calibrate() const {
  const std::vector<int64_t> clusters = clustersBySize();
  if (clusters.empty()) return {};

  constexpr int kBands = 4, kCallsPerBand = 8, kQueries = 8, kProbes = 8, kPasses = 2;
  constexpr int32_t k = 10;
  struct Call {
    std::vector<float> queries;   // F32 [kQueries, dim]
    std::vector<FaissId> keys;    // I64 [kQueries, probes]
    std::vector<float> coarse;    // F32 [kQueries, probes]
    int64_t probes = 0;
    CostSample sample;
  };
  std::vector<Call> calls;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&rng](uint64_t bound) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (rng * 0x2545F4914F6CDD1Dull >> 11) % bound;
  };
  const size_t bandWidth = (clusters.size() + kBands - 1) / kBands;
  for (int band = 0; band < kBands; ++band) {
    const size_t lo = std::min(clusters.size(), band * bandWidth);
    const size_t hi = std::min(clusters.size(), lo + bandWidth);
    if (lo >= hi) continue;
    for (int c = 0; c < kCallsPerBand; ++c) {
      Call call;
      call.probes = std::min<int64_t>(kProbes, static_cast<int64_t>(hi - lo));
      for (int q = 0; q < kQueries; ++q) {
        // Another random cluster's centroid: a plausible query.
        const float* query = centroid(clusters[next(clusters.size())]);
        call.queries.insert(call.queries.end(), query, query + dim());
        const size_t start = next(hi - lo);  // distinct clusters within one query
        for (int64_t j = 0; j < call.probes; ++j) {
          const int64_t key = clusters[lo + (start + static_cast<size_t>(j)) % (hi - lo)];
          call.keys.push_back(key);
          call.coarse.push_back(faiss::fvec_inner_product(query, centroid(key), dim()));
          call.sample.visits += 1;
          call.sample.vectors += static_cast<double>(listSize(key));
        }
      }
      call.sample.seconds = std::numeric_limits<double>::infinity();
      calls.push_back(std::move(call));
    }
  }

  for (int pass = 0; pass < kPasses; ++pass)
    for (Call& call : calls) {
      Stopwatch w;
      for (int q = 0; q < kQueries; ++q) {
        SearchTask t;
        initTask(t, call.queries.data() + q * dim(), k);
        t.m_clusters.assign(call.keys.begin() + q * call.probes, call.keys.begin() + (q + 1) * call.probes);
        scanAlone(t, static_cast<int32_t>(call.probes), {});
      }
      call.sample.seconds = std::min(call.sample.seconds, w.elapsedSeconds());
    }
  std::vector<CostSample> samples;
  for (const Call& call : calls) samples.push_back(call.sample);
  return fitCostModel(samples);
}

// Times the shared scan kernel the way a shared step uses it and fits SharedScanCostModel: per
// band of cluster sizes (as calibrate()), eight queries each on eight clusters of their own
// gives the first visits (a, b); then all eight on the same eight clusters gives the further
// visits (extra: what those calls took beyond one first visit per cluster). Best of two passes.
SharedScanCostModel IvfIndex::Impl::calibrateShared() const {
  const std::vector<int64_t> clusters = clustersBySize();
  if (clusters.empty()) return {};
  constexpr int kBands = 4, kQueries = 8, kProbes = 8, kPasses = 2;
  const size_t longest = static_cast<size_t>(listSize(clusters.back()));
  std::vector<float> scores(kQueries * longest);
  std::vector<const float*> queries(kQueries);
  std::vector<float*> outs(kQueries);
  for (size_t q = 0; q < kQueries; ++q) {
    queries[q] = centroid(clusters[(q * 7919) % clusters.size()]);  // plausible queries
    outs[q] = scores.data() + q * longest;
  }
  auto rows = [&](int64_t c) {
    faiss::InvertedLists::ScopedCodes codes(index->invlists, static_cast<size_t>(c));
    return reinterpret_cast<const float*>(codes.get());  // array lists: the codes stay put
  };
  std::vector<CostSample> firstVisits;
  struct Shared {
    double visits = 0, vectors = 0, seconds = 0;
  };
  std::vector<Shared> shared;
  const size_t bandWidth = (clusters.size() + kBands - 1) / kBands;
  for (size_t band = 0; band < kBands; ++band) {
    const size_t lo = std::min(clusters.size(), band * bandWidth);
    const size_t hi = std::min(clusters.size(), lo + bandWidth);
    if (lo >= hi) continue;
    const size_t probes = std::min<size_t>(kProbes, hi - lo);
    CostSample alone{.seconds = std::numeric_limits<double>::infinity()};
    Shared together{.seconds = std::numeric_limits<double>::infinity()};
    for (int pass = 0; pass < kPasses; ++pass) {
      Stopwatch w;
      for (size_t q = 0; q < kQueries; ++q)
        for (size_t j = 0; j < probes; ++j) {  // distinct clusters per query: cold reads
          const int64_t c = clusters[lo + (q * probes + j) % (hi - lo)];
          innerProductsShared(&queries[q], &outs[q], 1, rows(c), listSize(c), dim());
          if (pass == 0) alone.visits += 1, alone.vectors += static_cast<double>(listSize(c));
        }
      alone.seconds = std::min(alone.seconds, w.elapsedSeconds());
      Stopwatch w2;
      for (size_t j = hi - probes; j < hi; ++j) {
        innerProductsShared(queries.data(), outs.data(), kQueries, rows(clusters[j]),
                            listSize(clusters[j]), dim());
        if (pass == 0) together.visits += 1, together.vectors += static_cast<double>(listSize(clusters[j]));
      }
      together.seconds = std::min(together.seconds, w2.elapsedSeconds());
    }
    firstVisits.push_back(alone);
    shared.push_back(together);
  }
  const ClusterCostModel fit = fitCostModel(firstVisits);
  SharedScanCostModel m{.a = fit.a, .b = fit.b, .samples = fit.samples};
  double beyond = 0, vectors = 0;
  for (const Shared& s : shared) {
    beyond += s.seconds - (m.a * s.visits + m.b * s.vectors);
    vectors += s.vectors * (kQueries - 1);
  }
  if (vectors > 0) m.extra = std::max(0.0, beyond / vectors);
  return m;
}

ClusterCostModel IvfIndex::calibrateCostModel() {
  m_impl->sharedCost = m_impl->calibrateShared();
  return m_impl->cost = m_impl->calibrate();
}

}  // namespace rag::retrieval
