#include "retrieval/cluster_store.h"

namespace rag::retrieval {

Status CpuClusterStore::beginUpload(int64_t cluster, int64_t dim, std::span<const float> vectors,
                                    std::span<const int64_t> ids) {
  if (dim <= 0 || vectors.size() != ids.size() * static_cast<size_t>(dim))
    return Status::invalidArgument("upload of cluster " + std::to_string(cluster) + ": " +
                                   std::to_string(vectors.size()) + " floats for " +
                                   std::to_string(ids.size()) + " ids of dimension " +
                                   std::to_string(dim));
  if (m_entries.count(cluster))
    return Status::alreadyExists("cluster " + std::to_string(cluster) +
                                 " is already in the store or moving");
  Entry& e = m_entries[cluster];
  e.vectors.assign(vectors.begin(), vectors.end());
  e.ids.assign(ids.begin(), ids.end());
  e.pollsLeft = m_params.transferPolls;
  return Status::ok();
}

Status CpuClusterStore::beginEvict(int64_t cluster) {
  auto it = m_entries.find(cluster);
  if (it == m_entries.end() || it->second.evicting)
    return Status::notFound("cluster " + std::to_string(cluster) + " is not in the store");
  it->second.evicting = true;
  it->second.ready = false;
  it->second.pollsLeft = m_params.transferPolls;
  return Status::ok();
}

Result<bool> CpuClusterStore::transferDone(int64_t cluster) {
  auto it = m_entries.find(cluster);
  if (it == m_entries.end())
    return Status::notFound("cluster " + std::to_string(cluster) + " is not in the store");
  Entry& e = it->second;
  if (e.pollsLeft > 0) {
    --e.pollsLeft;
    return false;
  }
  if (e.evicting) {
    m_entries.erase(it);  // memory released
    return true;
  }
  e.ready = true;
  return true;
}

Status CpuClusterStore::beginScan(std::span<const float> queries, int64_t dim, int32_t k,
                                  const std::vector<std::vector<int64_t>>& clusters) {
  std::vector<ScanSegment> segments;
  std::vector<int32_t> querySegments;
  Status s = buildScanSegments(
      clusters,
      [&](int64_t c) -> std::optional<ScanSegment> {
        auto it = m_entries.find(c);
        if (it == m_entries.end() || !it->second.ready) return std::nullopt;
        return ScanSegment{it->second.vectors.data(), it->second.ids.data(),
                           static_cast<int64_t>(it->second.ids.size())};
      },
      segments, querySegments);
  if (s && dim > 0 && queries.size() != clusters.size() * static_cast<size_t>(dim))
    s = Status::invalidArgument("cluster scan: " + std::to_string(clusters.size()) +
                                " cluster lists for " + std::to_string(queries.size()) +
                                " query floats of dimension " + std::to_string(dim));
  if (!s) {
    m_scan = s;
    return s;
  }
  SearchResults r;
  r.n = static_cast<int64_t>(clusters.size());
  r.k = k;
  r.similarities.resize(clusters.size() * static_cast<size_t>(std::max(k, 0)));
  r.ids.resize(r.similarities.size());
  s = scanClustersCpu(queries, dim, k, segments, querySegments, r.similarities, r.ids);
  m_scan = s ? Result<SearchResults>(std::move(r)) : Result<SearchResults>(s);
  return s;
}

Result<SearchResults> CpuClusterStore::finishScan() {
  Result<SearchResults> out = std::move(m_scan);
  m_scan = Status::unavailable("no scan was started");
  return out;
}

}  // namespace rag::retrieval
