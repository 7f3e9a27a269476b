// Where the GPU cluster cache keeps its clusters (HedraRAG §4.4, §5 "an interface for
// asynchronous index loading"): a backend that copies IVF clusters in and out asynchronously and
// scans the resident ones for a batch of queries. ClusterCache (cluster_cache.h) decides what
// lives here; the store only moves and scans.
//
// Two implementations: CpuClusterStore below (host memory and the CPU reference scan; for
// machines without a GPU, tests, and the GUI's residency heatmap, with a simulated transfer
// latency), and the CUDA store in kernels/cuda_cluster_store.h (device memory, its own copy
// stream, events for finished transfers, the kernel of kernels/cluster_scan.cuh).
//
// Threading: one thread drives a store (the retrieval worker); calls do not overlap.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rag/status.h"
#include "retrieval/cluster_scan.h"
#include "retrieval/ivf_index.h"

namespace rag::retrieval {

class ClusterStore {
public:
  virtual ~ClusterStore() = default;
  // Human-readable backend ("host memory", "cuda: NVIDIA H100 ...").
  virtual std::string describe() const = 0;

  // Starts copying a cluster in: vectors F32 [rows, dim], ids I64 [rows]. The data is copied
  // (or staged) before the call returns, so the caller may free it. The cluster becomes
  // scannable once transferDone() says so. AlreadyExists if the cluster is present or moving.
  virtual Status beginUpload(int64_t cluster, int64_t dim, std::span<const float> vectors,
                             std::span<const int64_t> ids) = 0;
  // Starts dropping a cluster (it may be swapping in); from now on scans may not name it, and
  // its memory counts as used until transferDone() says the eviction finished. NotFound if
  // the cluster is not present.
  virtual Status beginEvict(int64_t cluster) = 0;
  // Non-blocking: has the last upload or eviction of `cluster` finished? NotFound if the
  // store never heard of the cluster (or already reported its eviction done).
  virtual Result<bool> transferDone(int64_t cluster) = 0;

  // Starts scanning: queries F32 [nq, dim] (host memory), and for query q the resident clusters
  // clusters[q] (possibly none). Top-k per query as in cluster_scan.h. One scan at a time;
  // finishScan() waits for it and returns its rows (n = nq, best first, empty slots id -1).
  virtual Status beginScan(std::span<const float> queries, int64_t dim, int32_t k,
                           const std::vector<std::vector<int64_t>>& clusters) = 0;
  virtual Result<SearchResults> finishScan() = 0;
};

struct CpuClusterStoreParams {
  // Polls of transferDone() that report "not yet" before a transfer finishes: a stand-in for
  // PCIe latency, counted in the cache's sub-stages (it polls once per sub-stage).
  int32_t transferPolls = 0;
};

// Host-memory store scanning with the CPU reference (scanClustersCpu).
class CpuClusterStore final : public ClusterStore {
public:
  explicit CpuClusterStore(CpuClusterStoreParams params = {}) : m_params(params) {}
  std::string describe() const override { return "host memory (CPU reference scan)"; }
  Status beginUpload(int64_t cluster, int64_t dim, std::span<const float> vectors,
                     std::span<const int64_t> ids) override;
  Status beginEvict(int64_t cluster) override;
  Result<bool> transferDone(int64_t cluster) override;
  Status beginScan(std::span<const float> queries, int64_t dim, int32_t k,
                   const std::vector<std::vector<int64_t>>& clusters) override;
  Result<SearchResults> finishScan() override;

private:
  struct Entry {
    std::vector<float> vectors;  // F32 [rows, dim]
    std::vector<int64_t> ids;    // I64 [rows]
    int32_t pollsLeft = 0;
    bool evicting = false;
    bool ready = false;          // upload finished, not evicting: scannable
  };
  CpuClusterStoreParams m_params;
  std::map<int64_t, Entry> m_entries;
  Result<SearchResults> m_scan = Status::unavailable("no scan was started");
};

// The segments a batch of per-query cluster lists names, as cluster_scan.h wants them:
// fills `segments` and `querySegments` (nq + 1 offsets) from `lookup(cluster)`, which returns
// the segment of a resident cluster or nullopt (-> InvalidArgument naming the cluster).
template <typename Lookup>
Status buildScanSegments(const std::vector<std::vector<int64_t>>& clusters, Lookup lookup,
                         std::vector<ScanSegment>& segments, std::vector<int32_t>& querySegments) {
  segments.clear();
  querySegments.assign(1, 0);
  for (const std::vector<int64_t>& list : clusters) {
    for (int64_t c : list) {
      const std::optional<ScanSegment> seg = lookup(c);
      if (!seg)
        return Status::invalidArgument("cluster scan: cluster " + std::to_string(c) +
                                       " is not resident in the store; route it to the CPU");
      segments.push_back(*seg);
    }
    querySegments.push_back(static_cast<int32_t>(segments.size()));
  }
  return Status::ok();
}

}  // namespace rag::retrieval
