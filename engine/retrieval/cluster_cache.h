// Partial GPU cluster cache (HedraRAG §3.3, §4.4): the hottest IVF clusters by access frequency
// live on a device (a ClusterStore); every `updateInterval` retrieval sub-stages (50 in the
// paper) the cached set is recomputed and clusters are swapped in and out asynchronously, while
// searching goes on. A hybrid step splits each task's clusters of the step: resident ones are
// scanned on the device, the rest (absent, or being swapped in or out) by IvfIndex on the CPU,
// and the device's rows are merged into each task's top-k.
//
//   CpuClusterStore store;                       // or a CUDA store (kernels/cuda_cluster_store.h)
//   RAG_ASSIGN_OR_RETURN(ClusterCache cache,
//       ClusterCache::create(index, store, {.capacityBytes = 64 << 20}));
//   while (tasks not done) {
//     RAG_ASSIGN_OR_RETURN(HybridStepStats s, cache.step(live, budgetSeconds));  // one sub-stage
//   }
//
// Frequencies are the cache's own counts of every cluster visit in its steps, device hits
// included (IvfIndex's counters see only CPU scans, so a cached cluster would look cold and be
// evicted). With decay < 1 the counts are multiplied by `decay` at each update, so shifting
// hotspots take over sooner; the default 1 keeps plain frequencies as in the paper (short
// intervals with strong decay make the cached set follow each query's probe order and churn).
//
// Threading: one thread (the retrieval worker) calls everything; snapshot() copies state for
// other readers (the GUI heatmap).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rag/status.h"
#include "retrieval/cluster_store.h"
#include "retrieval/ivf_index.h"
#include "retrieval/substage_planner.h"

namespace rag::retrieval {

enum class ClusterResidency : uint8_t {
  Absent = 0,       // on the CPU only
  SwappingIn = 1,   // upload in flight: searched on the CPU
  Resident = 2,     // searched on the device
  SwappingOut = 3,  // eviction in flight: searched on the CPU, memory still held
};
const char* toString(ClusterResidency r);

struct ClusterCacheParams {
  int64_t capacityBytes = 0;     // device bytes for cluster vectors and ids; 0: no byte limit
  int32_t capacityClusters = 0;  // gc, clusters; 0: no count limit. At least one limit is set.
  int32_t updateInterval = 50;   // sub-stages between updates of the cached set (paper: 50)
  double decay = 1.0;            // counts are multiplied by this at each update, in (0, 1]
  // A step uses the device only when at least this many of its cluster visits are resident:
  // below that, launch and synchronisation cost more than they save (§4.4, last paragraph).
  int32_t minDeviceVisits = 1;
  // Fill the cache when it is created instead of after the first updateInterval sub-stages:
  // every cluster starts with a prior heat of kPriorHeat × its share of the largest list (queries
  // fall where the passages are), below one counted visit, so the first fill takes the largest
  // clusters that fit and counted visits decide from then on. An unvisited cluster is only
  // evicted for a hotter one that needs its room. (The paper starts from access counts; with a
  // cache as large as the index that leaves it empty for the first 50 sub-stages, which under
  // load is the whole of a short run: the H200 run of 2026-11-26 measured hit rates of 0-4 %.)
  bool warmStart = false;
  // Also recompute the cached set when this many seconds passed since the last update, however
  // few sub-stages ran (0: every updateInterval sub-stages only). Sub-stages last 0.1-40 ms under
  // Eq. (1), so a count alone makes the cache's reaction time vary 400-fold with the load.
  double maxUpdateSeconds = 0.0;
};

// A cluster's prior heat with ClusterCacheParams::warmStart, at most (one visit counts 1).
inline constexpr double kPriorHeat = 1e-3;

struct ClusterCacheStats {
  uint64_t deviceVisits = 0;          // (task, cluster) visits scanned on the device
  uint64_t cpuVisits = 0;             // visits scanned on the CPU
  uint64_t cpuVisitsWhileSwapping = 0;  // of those, clusters in flight
  uint64_t uploads = 0, evictions = 0, updates = 0, subStages = 0;
  uint64_t deviceFailures = 0;        // scans that failed on the device and were redone on the CPU
  int64_t residentClusters = 0;
  int64_t bytesHeld = 0;              // resident + in flight
  double hitRate() const {
    const uint64_t all = deviceVisits + cpuVisits;
    return all ? static_cast<double>(deviceVisits) / static_cast<double>(all) : 0.0;
  }
};

struct HybridStepStats {
  StepStats cpu;                  // the IvfIndex part
  int64_t deviceVisits = 0;       // (task, cluster) pairs scanned on the device
  int64_t deviceVectors = 0;
  double deviceSeconds = 0.0;     // from starting the device scan to its rows being merged
  double seconds = 0.0;           // the whole step
};

// Device bytes of one cached cluster: its vectors and ids.
inline int64_t clusterBytes(int64_t listSize, int64_t dim) {
  return listSize * (dim * static_cast<int64_t>(sizeof(float)) +
                     static_cast<int64_t>(sizeof(int64_t)));
}

// The clusters to cache: by `heat` descending (ties: lower id), skipping clusters with no heat
// and clusters that no longer fit, until `capacityClusters` (0: unlimited) or `capacityBytes`
// (0: unlimited) is reached. bytes[c] is cluster c's size in bytes. Hottest first.
std::vector<int64_t> selectHotClusters(std::span<const double> heat, std::span<const int64_t> bytes,
                                       int64_t capacityBytes, int32_t capacityClusters);

class ClusterCache {
public:
  // `index` and `store` must outlive the cache. InvalidArgument for bad parameters.
  static Result<ClusterCache> create(const IvfIndex& index, ClusterStore& store,
                                     ClusterCacheParams params);

  ClusterCache(ClusterCache&&) noexcept = default;
  ClusterCache& operator=(ClusterCache&&) noexcept = default;

  // One hybrid retrieval sub-stage of `plan` (planSubStage over `tasks`, ScanMode::Alone):
  // counts the visits, scans resident clusters on the store and the rest on the CPU
  // (overlapped: the device scan is started first), merges, then calls onSubStage(). The tasks
  // end exactly where IvfIndex::execute(plan) would leave them (up to ties in similarity).
  Result<HybridStepStats> step(std::span<SearchTask* const> tasks, const SubStagePlan& plan);
  // The same with the plan IvfIndex::step makes under `budgetSeconds` (round-robin).
  Result<HybridStepStats> step(std::span<SearchTask* const> tasks, double budgetSeconds);

  // Counts a visit of `cluster` (step() does this for its own visits).
  void recordAccess(int64_t cluster);
  // Where a visit of `cluster` is scanned now: true for the device.
  bool onDevice(int64_t cluster) const;
  ClusterResidency residency(int64_t cluster) const;

  // Advances the sub-stage clock: polls transfers in flight and starts queued uploads that fit;
  // every updateInterval-th call (or the first after maxUpdateSeconds) also recomputes the
  // cached set first (update()).
  Status onSubStage();
  // Recomputes the cached set from the decayed counts now: evicts what left it, queues uploads
  // of what joined it (hottest first), then decays the counts.
  Status update();

  const ClusterCacheParams& params() const { return m_params; }
  const ClusterCacheStats& stats() const { return m_stats; }
  std::span<const double> heat() const { return m_heat; }
  // Per-cluster residency, for the heatmap.
  std::vector<ClusterResidency> snapshot() const { return m_state; }
  // 1 for each cluster a step would scan on the device now (resident), else 0: the planner's
  // PlannerParams::onDevice.
  std::vector<uint8_t> residentMask() const;

private:
  ClusterCache(const IvfIndex& index, ClusterStore& store, ClusterCacheParams params);
  Status pump();  // polls in-flight transfers, starts queued uploads that fit
  Status redoOnCpu(SearchTask& task, const std::vector<int64_t>& clusters) const;

  const IvfIndex* m_index;
  ClusterStore* m_store;
  ClusterCacheParams m_params;
  std::vector<int64_t> m_bytes;             // I64 [nlist]
  std::vector<double> m_heat;               // F64 [nlist], decayed visit counts
  std::vector<ClusterResidency> m_state;    // [nlist]
  std::vector<int64_t> m_inFlight;          // clusters swapping in or out
  std::vector<int64_t> m_uploadQueue;       // wanted, not yet started (hottest first)
  ClusterCacheStats m_stats;
  uint64_t m_lastUpdateNs = 0;              // when update() last ran (or the cache was made)
};

}  // namespace rag::retrieval
