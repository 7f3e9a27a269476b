// The one sub-stage planner of step-wise IVF search: which next clusters of which searches one
// step takes within a time budget (a HedraRAG sub-stage, Eq. 1), priced by the index's measured
// cost models. IvfIndex::execute runs the plan; the GPU cluster cache (cluster_cache.h) splits
// one between the CPU and the device.
//
//   SubStagePlan plan = *planSubStage(index, tasks, budgetSeconds,
//                                     {.order = PlanOrder::OldestFirst, .scan = ScanMode::Shared, .threads = 2});
//   RAG_ASSIGN_OR_RETURN(StepStats s, index.execute(tasks, plan));
//
// Orders (strategies):
//   RoundRobin   one cluster of every unfinished search per round, in each search's own order,
//                while the estimate stays within the budget; every unfinished search gets at
//                least one (processor sharing: under load every search finishes late together).
//   OldestFirst  searches in the order given (the caller's priority: oldest first, speculative
//                ones last), each by its next clusters, while the estimate stays within the
//                budget; the first unfinished search gets at least one, and the first cluster
//                that does not fit ends the plan (first come, first served) but for clusters on
//                the device (PlannerParams::onDevice), which every search still takes while
//                they lead its list.
// Scan modes and their estimates of the step's wall time on `threads` search threads:
//   Alone   each search scans its clusters on its own, the searches spread over the threads:
//           the larger of the costliest search and the total over the threads (ClusterCostModel).
//   Shared  each cluster the step visits is read once for every search visiting it (HedraRAG
//           §5), clusters spread over the threads: the total over the threads, a cluster an
//           earlier search of the step visits costing only its further-visit price
//           (SharedScanCostModel).
// Whatever the plan, a search's final top-k is FAISS's for the same clusters: plans only decide
// when each cluster is visited, never which.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rag/status.h"
#include "retrieval/ivf_index.h"

namespace rag::retrieval {

enum class PlanOrder : uint8_t { RoundRobin, OldestFirst };
enum class ScanMode : uint8_t { Alone, Shared };

struct PlannerParams {
  PlanOrder order = PlanOrder::RoundRobin;
  ScanMode scan = ScanMode::Alone;
  int threads = 1;  // search threads the step runs on (>= 1)
  // Clusters resident on a device (the GPU cluster cache: ClusterCache::residentMask()):
  // onDevice[c] != 0 is scanned there, beside the CPU part, so it costs the CPU budget nothing
  // and always fits; only CPU clusters are priced against the budget. Empty: all on the CPU.
  // (Priced at the CPU's cost, a sub-stage took as few resident clusters as the CPU could scan
  // in the budget: on an H100 hedra's searches took 3 sub-stages each for a device scan of tens
  // of microseconds.) Alone scans only: Shared plans ignore it.
  std::span<const uint8_t> onDevice = {};
};

struct SubStagePlan {
  std::vector<int32_t> take;  // next clusters of tasks[i] the step searches; 0: none this step
  ScanMode scan = ScanMode::Alone;
  double estimatedSeconds = 0;  // the cost model's wall time of the step
};

// Plans one step over `tasks` (finished ones get 0). InvalidArgument for a negative or NaN
// budget (0 is allowed: the minimum progress; +infinity finishes every task), threads < 1, or a
// null task.
Result<SubStagePlan> planSubStage(const IvfIndex& index, std::span<SearchTask* const> tasks, double budgetSeconds,
                                  const PlannerParams& params);

}  // namespace rag::retrieval
