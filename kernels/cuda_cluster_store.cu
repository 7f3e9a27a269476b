#include "cuda_cluster_store.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cluster_scan.cuh"
#include "cuda_check.h"

namespace rag::cuda {
namespace {

using retrieval::ScanSegment;
using retrieval::SearchResults;

// Pinned host memory, reused: cudaFreeHost may synchronise the device, so buffers live as long
// as the store.
struct Pinned {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool busy = false;
};

class CudaClusterStore final : public retrieval::ClusterStore {
public:
  ~CudaClusterStore() override {
    cudaSetDevice(m_device);
    if (m_copy) cudaStreamSynchronize(m_copy);
    if (m_scan) cudaStreamSynchronize(m_scan);
    for (auto& [c, e] : m_entries) {
      if (!e.evicting) {
        cudaFree(e.vectors);
        cudaFree(e.ids);
      }
      if (e.done) cudaEventDestroy(e.done);
    }
    for (void* p : {m_dQueries, m_dSegments, m_dOffsets, m_dSims, m_dIds, m_dPartSims, m_dPartIds}) cudaFree(p);
    for (Pinned& p : m_pinned) cudaFreeHost(p.ptr);
    for (Pinned* p : {&m_in, &m_out}) cudaFreeHost(p->ptr);
    if (m_scanDone) cudaEventDestroy(m_scanDone);
    if (m_copy) cudaStreamDestroy(m_copy);
    if (m_scan) cudaStreamDestroy(m_scan);
  }

  Status init(int device) {
    m_device = device;
    RAG_RETURN_IF_ERROR(useDevice(device));
    m_description = "cuda: " + deviceDescription(device);
    RAG_RETURN_IF_ERROR(fromCuda(cudaStreamCreateWithFlags(&m_copy, cudaStreamNonBlocking),
                                 "creating the copy stream"));
    RAG_RETURN_IF_ERROR(fromCuda(cudaStreamCreateWithFlags(&m_scan, cudaStreamNonBlocking),
                                 "creating the scan stream"));
    RAG_RETURN_IF_ERROR(fromCuda(cudaEventCreateWithFlags(&m_scanDone, cudaEventDisableTiming),
                                 "creating an event"));
    return fromCuda(cudaEventRecord(m_scanDone, m_scan), "recording an event");
  }

  std::string describe() const override { return m_description; }

  Status beginUpload(int64_t cluster, int64_t dim, std::span<const float> vectors,
                     std::span<const int64_t> ids) override {
    if (dim <= 0 || vectors.size() != ids.size() * static_cast<size_t>(dim))
      return Status::invalidArgument("upload of cluster " + std::to_string(cluster) +
                                     ": vectors and ids do not match dimension " +
                                     std::to_string(dim));
    if (m_entries.count(cluster))
      return Status::alreadyExists("cluster " + std::to_string(cluster) +
                                   " is already on the device or moving");
    RAG_RETURN_IF_ERROR(useDevice(m_device));
    Entry e;
    e.rows = static_cast<int64_t>(ids.size());
    RAG_RETURN_IF_ERROR(
        fromCuda(cudaEventCreateWithFlags(&e.done, cudaEventDisableTiming), "creating an event"));
    const std::string what = "uploading cluster " + std::to_string(cluster);
    Status s = Status::ok();
    if (e.rows > 0) {
      const size_t vecBytes = vectors.size_bytes(), idBytes = ids.size_bytes();
      e.staging = acquirePinned(vecBytes + idBytes, s);
      if (s) {
        auto* host = static_cast<char*>(m_pinned[e.staging].ptr);
        std::memcpy(host, vectors.data(), vecBytes);
        std::memcpy(host + vecBytes, ids.data(), idBytes);
        s = fromCuda(cudaMallocAsync(reinterpret_cast<void**>(&e.vectors), vecBytes, m_copy), what);
        if (s) s = fromCuda(cudaMallocAsync(reinterpret_cast<void**>(&e.ids), idBytes, m_copy), what);
        if (s) s = fromCuda(cudaMemcpyAsync(e.vectors, host, vecBytes, cudaMemcpyHostToDevice, m_copy), what);
        if (s) s = fromCuda(cudaMemcpyAsync(e.ids, host + vecBytes, idBytes, cudaMemcpyHostToDevice, m_copy), what);
      }
    }
    if (s) s = fromCuda(cudaEventRecord(e.done, m_copy), what);
    if (!s) {  // nothing was promised: undo what was enqueued
      if (e.vectors) cudaFreeAsync(e.vectors, m_copy);
      if (e.ids) cudaFreeAsync(e.ids, m_copy);
      cudaStreamSynchronize(m_copy);
      if (e.staging >= 0) m_pinned[e.staging].busy = false;
      cudaEventDestroy(e.done);
      return s;
    }
    m_entries.emplace(cluster, e);
    return Status::ok();
  }

  Status beginEvict(int64_t cluster) override {
    auto it = m_entries.find(cluster);
    if (it == m_entries.end() || it->second.evicting)
      return Status::notFound("cluster " + std::to_string(cluster) + " is not on the device");
    Entry& e = it->second;
    const std::string what = "evicting cluster " + std::to_string(cluster);
    RAG_RETURN_IF_ERROR(fromCuda(cudaSetDevice(m_device), what));
    e.evicting = true;
    e.ready = false;
    // Freed after the last scan that may read it and after its own upload (same stream).
    Status s = fromCuda(cudaStreamWaitEvent(m_copy, m_scanDone, 0), what);
    if (s && e.vectors) s = fromCuda(cudaFreeAsync(e.vectors, m_copy), what);
    if (s && e.ids) s = fromCuda(cudaFreeAsync(e.ids, m_copy), what);
    if (s) s = fromCuda(cudaEventRecord(e.done, m_copy), what);
    e.vectors = nullptr;
    e.ids = nullptr;
    return s;
  }

  Result<bool> transferDone(int64_t cluster) override {
    auto it = m_entries.find(cluster);
    if (it == m_entries.end())
      return Status::notFound("cluster " + std::to_string(cluster) + " is not on the device");
    Entry& e = it->second;
    const cudaError_t q = cudaEventQuery(e.done);
    if (q == cudaErrorNotReady) return false;
    RAG_RETURN_IF_ERROR(fromCuda(q, "transfer of cluster " + std::to_string(cluster)));
    if (e.staging >= 0) m_pinned[e.staging].busy = false, e.staging = -1;
    if (e.evicting) {
      cudaEventDestroy(e.done);
      m_entries.erase(it);
    } else {
      e.ready = true;
    }
    return true;
  }

  Status beginScan(std::span<const float> queries, int64_t dim, int32_t k,
                   const std::vector<std::vector<int64_t>>& clusters) override {
    if (m_pending) {  // an unfinished scan still reads the staging buffers: let it end
      m_pending = false;
      RAG_RETURN_IF_ERROR(fromCuda(cudaEventSynchronize(m_scanDone), "waiting for the GPU scan"));
    }
    std::vector<ScanSegment> segments;
    std::vector<int32_t> offsets;
    RAG_RETURN_IF_ERROR(retrieval::buildScanSegments(
        clusters,
        [&](int64_t c) -> std::optional<ScanSegment> {
          auto it = m_entries.find(c);
          if (it == m_entries.end() || !it->second.ready) return std::nullopt;
          return ScanSegment{it->second.vectors, it->second.ids, it->second.rows};
        },
        segments, offsets));
    const size_t nq = clusters.size();
    const size_t slots = nq * static_cast<size_t>(std::max(k, 0));
    RAG_RETURN_IF_ERROR(retrieval::checkScanBatch(queries, dim, k, segments, offsets, slots, slots));
    if (queries.size() != nq * static_cast<size_t>(dim))
      return Status::invalidArgument("GPU cluster scan: one cluster list per query, please");
    RAG_RETURN_IF_ERROR(useDevice(m_device));
    // Inputs staged in one pinned buffer, results come back into another.
    const size_t qBytes = queries.size_bytes(), sBytes = segments.size() * sizeof(ScanSegment),
                 oBytes = offsets.size() * sizeof(int32_t);
    const size_t simBytes = slots * sizeof(float), idBytes = slots * sizeof(int64_t);
    const size_t partSlots = segments.size() * static_cast<size_t>(k);
    RAG_RETURN_IF_ERROR(ensurePinned(m_in, qBytes + sBytes + oBytes));
    RAG_RETURN_IF_ERROR(ensurePinned(m_out, simBytes + idBytes));
    auto* in = static_cast<char*>(m_in.ptr);
    std::memcpy(in, queries.data(), qBytes);
    if (sBytes) std::memcpy(in + qBytes, segments.data(), sBytes);
    std::memcpy(in + qBytes + sBytes, offsets.data(), oBytes);
    RAG_RETURN_IF_ERROR(ensureDevice(m_dQueries, m_capQueries, qBytes));
    RAG_RETURN_IF_ERROR(ensureDevice(m_dSegments, m_capSegments, std::max<size_t>(sBytes, 1)));
    RAG_RETURN_IF_ERROR(ensureDevice(m_dOffsets, m_capOffsets, oBytes));
    RAG_RETURN_IF_ERROR(ensureDevice(m_dSims, m_capSims, simBytes));
    RAG_RETURN_IF_ERROR(ensureDevice(m_dIds, m_capIds, idBytes));
    RAG_RETURN_IF_ERROR(ensureDevice(m_dPartSims, m_capPartSims, std::max<size_t>(partSlots * sizeof(float), 1)));
    RAG_RETURN_IF_ERROR(ensureDevice(m_dPartIds, m_capPartIds, std::max<size_t>(partSlots * sizeof(int64_t), 1)));
    const char* what = "GPU cluster scan";
    RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpyAsync(m_dQueries, in, qBytes, cudaMemcpyHostToDevice, m_scan), what));
    if (sBytes)
      RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpyAsync(m_dSegments, in + qBytes, sBytes, cudaMemcpyHostToDevice, m_scan), what));
    RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpyAsync(m_dOffsets, in + qBytes + sBytes, oBytes, cudaMemcpyHostToDevice, m_scan), what));
    RAG_RETURN_IF_ERROR(scanClusters(static_cast<const float*>(m_dQueries), static_cast<int64_t>(nq), dim, k,
                                     static_cast<const ScanSegment*>(m_dSegments),
                                     static_cast<const int32_t*>(m_dOffsets), static_cast<int64_t>(segments.size()),
                                     static_cast<float*>(m_dPartSims), static_cast<int64_t*>(m_dPartIds),
                                     static_cast<float*>(m_dSims), static_cast<int64_t*>(m_dIds), m_scan));
    auto* out = static_cast<char*>(m_out.ptr);
    RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpyAsync(out, m_dSims, simBytes, cudaMemcpyDeviceToHost, m_scan), what));
    RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpyAsync(out + simBytes, m_dIds, idBytes, cudaMemcpyDeviceToHost, m_scan), what));
    RAG_RETURN_IF_ERROR(fromCuda(cudaEventRecord(m_scanDone, m_scan), what));
    m_pending = true;
    m_nq = static_cast<int64_t>(nq);
    m_k = k;
    return Status::ok();
  }

  Result<SearchResults> finishScan() override {
    if (!m_pending) return Status::unavailable("no GPU scan was started (or it failed to start)");
    m_pending = false;
    RAG_RETURN_IF_ERROR(fromCuda(cudaEventSynchronize(m_scanDone), "waiting for the GPU scan"));
    SearchResults r;
    r.n = m_nq;
    r.k = m_k;
    const size_t slots = static_cast<size_t>(m_nq) * static_cast<size_t>(m_k);
    const auto* out = static_cast<const char*>(m_out.ptr);
    r.similarities.resize(slots);
    r.ids.resize(slots);
    std::memcpy(r.similarities.data(), out, slots * sizeof(float));
    std::memcpy(r.ids.data(), out + slots * sizeof(float), slots * sizeof(int64_t));
    return r;
  }

private:
  struct Entry {
    float* vectors = nullptr;  // F32 [rows, dim], device
    int64_t* ids = nullptr;    // I64 [rows], device
    int64_t rows = 0;
    cudaEvent_t done = nullptr;  // the last transfer's completion
    int staging = -1;            // pinned buffer held until the upload completes
    bool evicting = false;
    bool ready = false;
  };

  int acquirePinned(size_t bytes, Status& s) {
    for (size_t i = 0; i < m_pinned.size(); ++i)
      if (!m_pinned[i].busy && m_pinned[i].bytes >= bytes) {
        m_pinned[i].busy = true;
        return static_cast<int>(i);
      }
    Pinned p;
    s = fromCuda(cudaMallocHost(&p.ptr, bytes), "allocating pinned staging memory");
    if (!s) return -1;
    p.bytes = bytes;
    p.busy = true;
    m_pinned.push_back(p);
    return static_cast<int>(m_pinned.size() - 1);
  }
  Status ensurePinned(Pinned& p, size_t bytes) {
    if (p.bytes >= bytes) return Status::ok();
    RAG_RETURN_IF_ERROR(fromCuda(cudaEventSynchronize(m_scanDone), "waiting for the GPU scan"));
    if (p.ptr) cudaFreeHost(p.ptr);
    p = {};
    RAG_RETURN_IF_ERROR(fromCuda(cudaMallocHost(&p.ptr, bytes * 2), "allocating pinned memory"));
    p.bytes = bytes * 2;
    return Status::ok();
  }
  Status ensureDevice(void*& ptr, size_t& cap, size_t bytes) {
    if (cap >= bytes) return Status::ok();
    if (ptr) RAG_RETURN_IF_ERROR(fromCuda(cudaFreeAsync(ptr, m_scan), "freeing scan buffers"));
    ptr = nullptr;
    cap = 0;
    RAG_RETURN_IF_ERROR(fromCuda(cudaMallocAsync(&ptr, bytes * 2, m_scan), "allocating scan buffers"));
    cap = bytes * 2;
    return Status::ok();
  }

  int m_device = 0;
  std::string m_description;
  cudaStream_t m_copy = nullptr;
  cudaStream_t m_scan = nullptr;
  cudaEvent_t m_scanDone = nullptr;
  std::map<int64_t, Entry> m_entries;
  std::vector<Pinned> m_pinned;  // upload staging
  Pinned m_in, m_out;            // scan staging: inputs, results
  void *m_dQueries = nullptr, *m_dSegments = nullptr, *m_dOffsets = nullptr, *m_dSims = nullptr,
       *m_dIds = nullptr, *m_dPartSims = nullptr, *m_dPartIds = nullptr;
  size_t m_capQueries = 0, m_capSegments = 0, m_capOffsets = 0, m_capSims = 0, m_capIds = 0, m_capPartSims = 0,
         m_capPartIds = 0;
  bool m_pending = false;
  int64_t m_nq = 0;
  int32_t m_k = 0;
};

}  // namespace

Result<std::unique_ptr<retrieval::ClusterStore>> makeCudaClusterStore(CudaClusterStoreParams params) {
  std::string why;
  const int n = deviceCount(&why);
  if (n == 0) return Status::unavailable("no CUDA device for the GPU cluster cache (" + why + ")");
  if (params.device < 0 || params.device >= n)
    return Status::invalidArgument("CUDA device " + std::to_string(params.device) +
                                   " does not exist (" + std::to_string(n) + " found)");
  auto store = std::make_unique<CudaClusterStore>();
  RAG_RETURN_IF_ERROR(store->init(params.device));
  return std::unique_ptr<retrieval::ClusterStore>(std::move(store));
}

}  // namespace rag::cuda
