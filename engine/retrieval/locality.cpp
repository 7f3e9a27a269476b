#include "retrieval/locality.h"

#include <algorithm>
#include <unordered_set>

namespace rag::retrieval {

namespace {

std::vector<int64_t> idsOf(std::span<const SearchHit> hits) {
  std::vector<int64_t> ids;
  for (const SearchHit& h : hits) ids.push_back(h.id);
  return ids;
}

// One cluster of `task`, however the cost model prices it.
Status stepOne(const IvfIndex& index, SearchTask& task) {
  SearchTask* one[] = {&task};
  return index.step(one, 0.0).status();
}

}  // namespace

LocalCache LocalCache::remember(const SearchTask& task, std::span<const int32_t> clusterOfIds, size_t keep) {
  LocalCache c;
  c.top = task.topK();
  if (c.top.size() > keep) c.top.resize(keep);
  std::unordered_set<int64_t> seen;
  for (const SearchHit& h : c.top) {
    if (h.id < 0 || static_cast<size_t>(h.id) >= clusterOfIds.size()) continue;
    const int64_t cluster = clusterOfIds[static_cast<size_t>(h.id)];
    if (cluster >= 0 && seen.insert(cluster).second) c.hitClusters.push_back(cluster);
  }
  c.searched.assign(task.clusters().begin(), task.clusters().begin() + static_cast<std::ptrdiff_t>(task.cursor()));
  return c;
}

std::vector<int64_t> reorderClusters(std::span<const int64_t> clusters, const LocalCache& previous) {
  const std::unordered_set<int64_t> hit(previous.hitClusters.begin(), previous.hitClusters.end());
  const std::unordered_set<int64_t> searched(previous.searched.begin(), previous.searched.end());
  std::vector<int64_t> out;
  out.reserve(clusters.size());
  for (int64_t c : clusters) if (hit.count(c)) out.push_back(c);
  for (int64_t c : clusters) if (!hit.count(c) && searched.count(c)) out.push_back(c);
  for (int64_t c : clusters) if (!hit.count(c) && !searched.count(c)) out.push_back(c);
  return out;
}

Result<EarlyStopResult> searchWithEarlyStop(const IvfIndex& index, SearchTask& task, int64_t patience) {
  EarlyStopResult r;
  std::vector<int64_t> last = idsOf(task.topK());
  int64_t unchanged = 0;
  while (!task.done()) {
    RAG_RETURN_IF_ERROR(stepOne(index, task));
    ++r.clustersSearched;
    std::vector<int64_t> now = idsOf(task.topK());
    unchanged = now == last ? unchanged + 1 : 0;
    last = std::move(now);
    // An empty top-k (no vector seen yet) never counts as settled.
    if (patience > 0 && unchanged >= patience && !last.empty() && !task.done()) {
      r.stoppedEarly = true;
      break;
    }
  }
  r.top = task.topK();
  return r;
}

Result<int64_t> clustersUntil(const IvfIndex& index, SearchTask& task, std::span<const SearchHit> final) {
  const std::vector<int64_t> want = idsOf(final);
  int64_t n = 0;
  while (idsOf(task.topK()) != want && !task.done()) {
    RAG_RETURN_IF_ERROR(stepOne(index, task));
    ++n;
  }
  return idsOf(task.topK()) == want ? n : static_cast<int64_t>(task.clusters().size());
}

}  // namespace rag::retrieval
