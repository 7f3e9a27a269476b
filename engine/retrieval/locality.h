// Similarity-aware search order (HedraRAG §4.3): consecutive retrievals of one request ask
// about similar things, so the clusters that held the previous retrieval's results are likely
// to hold the next one's. A request keeps a local cache of its last retrieval (top-20 and the
// clusters H_v they live in, and the cluster list C it searched); the next query's cluster list
// C' is searched H_v ∩ C' first, then (C − H_v) ∩ C', then the rest, and a search may stop once
// its top-k has not changed for `patience` clusters in a row.
//
//   LocalCache cache = LocalCache::remember(task, index.clusterOfIds(), 20);   // after v
//   std::vector<int64_t> order = reorderClusters(nextTask.clusters(), cache);   // for v'
//   RAG_ASSIGN_OR_RETURN(SearchTask t, index.makeTask(vPrime, k, order));
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rag/status.h"
#include "retrieval/ivf_index.h"

namespace rag::retrieval {

struct LocalCache {
  std::vector<SearchHit> top;         // the previous retrieval's larger top-k, best first
  std::vector<int64_t> hitClusters;   // H_v: the clusters holding `top`, in first-hit order
  std::vector<int64_t> searched;      // C: the clusters the previous retrieval searched

  // What a finished (or partial) task leaves: its top hits (a task made with k >= `keep`
  // gives the larger top-k the paper keeps, 20) and their clusters.
  static LocalCache remember(const SearchTask& task, std::span<const int32_t> clusterOfIds,
                             size_t keep = 20);
};

// C' reordered: H_v ∩ C', then (C − H_v) ∩ C', then the rest of C'; each group keeps C''s own
// order (nearest centroid first). A permutation of C'.
std::vector<int64_t> reorderClusters(std::span<const int64_t> clusters, const LocalCache& previous);

struct EarlyStopResult {
  std::vector<SearchHit> top;   // the task's top-k when it stopped
  int64_t clustersSearched = 0;
  bool stoppedEarly = false;    // before its cluster list ran out
};

// Steps `task` one cluster at a time and stops when its top-k ids have stayed the same for
// `patience` clusters in a row (patience 0: never stops early).
Result<EarlyStopResult> searchWithEarlyStop(const IvfIndex& index, SearchTask& task, int64_t patience);

// The number of clusters of `task`'s order after which its top-k ids equal `final` (the result
// of the whole list), found by stepping one cluster at a time; the list's length if never.
Result<int64_t> clustersUntil(const IvfIndex& index, SearchTask& task, std::span<const SearchHit> final);

}  // namespace rag::retrieval
