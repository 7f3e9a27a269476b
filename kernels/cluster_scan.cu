#include "cluster_scan.cuh"

#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

using retrieval::ScanSegment;
using retrieval::scanHitBefore;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr size_t kMaxSharedQueryBytes = 48 * 1024;

// A thread's best hits, best first (n counts the filled slots).
struct ThreadTopK {
  float sims[kClusterScanMaxK];
  int64_t ids[kClusterScanMaxK];
  int n = 0;

  __device__ void offer(float sim, int64_t id, int k) {
    if (id < 0 || (n == k && !scanHitBefore(sim, id, sims[k - 1], ids[k - 1]))) return;
    int pos = n < k ? n : k - 1;
    while (pos > 0 && scanHitBefore(sim, id, sims[pos - 1], ids[pos - 1])) {
      sims[pos] = sims[pos - 1];
      ids[pos] = ids[pos - 1];
      --pos;
    }
    sims[pos] = sim;
    ids[pos] = id;
    if (n < k) ++n;
  }

  // k rounds of a block-wide arg-best over the threads' list heads: the best head goes out to
  // out*[round] and its thread moves to its next hit. Empty slots come out as (-inf, -1).
  __device__ void writeBlockBest(int k, float* outSims, int64_t* outIds) {
    __shared__ float headSim[kThreads];
    __shared__ int64_t headId[kThreads];
    __shared__ int headThread[kThreads];
    const int t = threadIdx.x;
    int head = 0;
    for (int round = 0; round < k; ++round) {
      headSim[t] = head < n ? sims[head] : -INFINITY;
      headId[t] = head < n ? ids[head] : -1;
      headThread[t] = t;
      __syncthreads();
      for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride && scanHitBefore(headSim[t + stride], headId[t + stride], headSim[t], headId[t])) {
          headSim[t] = headSim[t + stride];
          headId[t] = headId[t + stride];
          headThread[t] = headThread[t + stride];
        }
        __syncthreads();
      }
      if (t == 0) {
        outSims[round] = headSim[0];
        outIds[round] = headId[0];
      }
      if (headId[0] >= 0 && headThread[0] == t) ++head;
      __syncthreads();  // everyone has read slot 0 before the next round writes
    }
  }
};

// Pass 1, one block per segment: the segment's top-k into part*[segment * k]. A warp per row:
// lanes read the row's consecutive floats (coalesced), a shuffle tree sums them, lane 0 keeps
// the warp's top-k.
__global__ void segmentScanKernel(const float* queries, int64_t nq, int64_t dim, int k,
                                  const ScanSegment* segments, const int32_t* querySegments,
                                  float* partSims, int64_t* partIds) {
  extern __shared__ float query[];  // F32 [dim]
  const int64_t s = blockIdx.x;
  // The segment's query: the last q with querySegments[q] <= s (queries may own no segment).
  int64_t lo = 0, hi = nq;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (querySegments[mid] <= s) lo = mid;
    else hi = mid;
  }
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) query[j] = queries[lo * dim + j];
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const ScanSegment seg = segments[s];
  ThreadTopK best;
  for (int64_t r = warp; r < seg.rows; r += kWarps) {
    const float* v = seg.vectors + r * dim;
    float sim = 0.0f;
    for (int64_t j = lane; j < dim; j += 32) sim += query[j] * v[j];
    for (int offset = 16; offset > 0; offset >>= 1) sim += __shfl_xor_sync(0xffffffffu, sim, offset);
    if (lane == 0) best.offer(sim, seg.ids[r], k);
  }
  best.writeBlockBest(k, partSims + s * k, partIds + s * k);
}

// Pass 2, one block per query: the top-k of its segments' top-k lists (the top-k of a union is
// the top-k of the parts' top-k under the same total order).
__global__ void mergeSegmentsKernel(int k, const int32_t* querySegments, const float* partSims,
                                    const int64_t* partIds, float* outSims, int64_t* outIds) {
  const int64_t q = blockIdx.x;
  const int64_t first = static_cast<int64_t>(querySegments[q]) * k;
  const int64_t last = static_cast<int64_t>(querySegments[q + 1]) * k;
  ThreadTopK best;
  for (int64_t c = first + threadIdx.x; c < last; c += blockDim.x) best.offer(partSims[c], partIds[c], k);
  best.writeBlockBest(k, outSims + q * k, outIds + q * k);
}

// Device memory freed on scope exit (synchronous paths only).
struct DeviceBuffer {
  void* ptr = nullptr;
  ~DeviceBuffer() { cudaFree(ptr); }
  Status alloc(size_t bytes, const char* what) {
    return bytes == 0 ? Status::ok() : fromCuda(cudaMalloc(&ptr, bytes), what);
  }
};

}  // namespace

Status scanClusters(const float* queries, int64_t nq, int64_t dim, int32_t k,
                    const ScanSegment* segments, const int32_t* querySegments, int64_t numSegments,
                    float* partSims, int64_t* partIds, float* outSims, int64_t* outIds,
                    cudaStream_t stream) {
  if (k <= 0 || k > kClusterScanMaxK)
    return Status::invalidArgument("GPU cluster scan: k must be 1.." +
                                   std::to_string(kClusterScanMaxK) + " (got " +
                                   std::to_string(k) + "); scan larger k on the CPU");
  if (dim <= 0 || static_cast<size_t>(dim) * sizeof(float) > kMaxSharedQueryBytes)
    return Status::invalidArgument("GPU cluster scan: dimension " + std::to_string(dim) +
                                   " does not fit a query in shared memory (at most " +
                                   std::to_string(kMaxSharedQueryBytes / sizeof(float)) + ")");
  if (nq <= 0) return Status::ok();
  if (nq > 0x7fffffff || numSegments < 0 || numSegments > 0x7fffffff)
    return Status::invalidArgument("GPU cluster scan: too many queries or segments");
  if (numSegments > 0) {
    segmentScanKernel<<<static_cast<unsigned>(numSegments), kThreads, static_cast<size_t>(dim) * sizeof(float),
                        stream>>>(queries, nq, dim, k, segments, querySegments, partSims, partIds);
    RAG_RETURN_IF_ERROR(fromCuda(cudaGetLastError(), "launching segmentScanKernel"));
  }
  mergeSegmentsKernel<<<static_cast<unsigned>(nq), kThreads, 0, stream>>>(k, querySegments, partSims, partIds,
                                                                           outSims, outIds);
  return fromCuda(cudaGetLastError(), "launching mergeSegmentsKernel");
}

Status scanClustersHost(std::span<const float> queries, int64_t dim, int32_t k,
                        std::span<const ScanSegment> segments,
                        std::span<const int32_t> querySegments, std::span<float> outSims,
                        std::span<int64_t> outIds) {
  RAG_RETURN_IF_ERROR(retrieval::checkScanBatch(queries, dim, k, segments, querySegments,
                                                outSims.size(), outIds.size()));
  const int64_t nq = static_cast<int64_t>(queries.size()) / dim;
  // Every segment's rows into one device pool; the segment table points into it.
  size_t rows = 0;
  for (const ScanSegment& s : segments) rows += static_cast<size_t>(s.rows);
  const int64_t numSegments = querySegments.back();
  const size_t partSlots = static_cast<size_t>(numSegments) * static_cast<size_t>(k);
  DeviceBuffer dQueries, dVectors, dIds, dSegments, dQuerySegments, dPartSims, dPartIds, dSims, dOutIds;
  RAG_RETURN_IF_ERROR(dPartSims.alloc(partSlots * sizeof(float), "allocating per-segment results"));
  RAG_RETURN_IF_ERROR(dPartIds.alloc(partSlots * sizeof(int64_t), "allocating per-segment results"));
  RAG_RETURN_IF_ERROR(dQueries.alloc(queries.size_bytes(), "allocating queries"));
  RAG_RETURN_IF_ERROR(dVectors.alloc(rows * static_cast<size_t>(dim) * sizeof(float), "allocating vectors"));
  RAG_RETURN_IF_ERROR(dIds.alloc(rows * sizeof(int64_t), "allocating ids"));
  RAG_RETURN_IF_ERROR(dSegments.alloc(segments.size_bytes(), "allocating segments"));
  RAG_RETURN_IF_ERROR(dQuerySegments.alloc(querySegments.size_bytes(), "allocating offsets"));
  RAG_RETURN_IF_ERROR(dSims.alloc(outSims.size_bytes(), "allocating results"));
  RAG_RETURN_IF_ERROR(dOutIds.alloc(outIds.size_bytes(), "allocating results"));
  std::vector<ScanSegment> deviceSegments(segments.size());
  size_t row = 0;
  auto* vecBase = static_cast<float*>(dVectors.ptr);
  auto* idBase = static_cast<int64_t*>(dIds.ptr);
  for (size_t i = 0; i < segments.size(); ++i) {
    const ScanSegment& s = segments[i];
    const size_t n = static_cast<size_t>(s.rows);
    deviceSegments[i] = {vecBase + row * static_cast<size_t>(dim), idBase + row, s.rows};
    if (n > 0) {
      RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpy(vecBase + row * static_cast<size_t>(dim), s.vectors,
                                              n * static_cast<size_t>(dim) * sizeof(float),
                                              cudaMemcpyHostToDevice), "copying vectors"));
      RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpy(idBase + row, s.ids, n * sizeof(int64_t),
                                              cudaMemcpyHostToDevice), "copying ids"));
    }
    row += n;
  }
  RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpy(dQueries.ptr, queries.data(), queries.size_bytes(),
                                          cudaMemcpyHostToDevice), "copying queries"));
  if (!deviceSegments.empty())
    RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpy(dSegments.ptr, deviceSegments.data(),
                                            segments.size_bytes(), cudaMemcpyHostToDevice),
                                 "copying segments"));
  RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpy(dQuerySegments.ptr, querySegments.data(),
                                          querySegments.size_bytes(), cudaMemcpyHostToDevice),
                               "copying offsets"));
  RAG_RETURN_IF_ERROR(scanClusters(static_cast<const float*>(dQueries.ptr), nq, dim, k,
                                   static_cast<const ScanSegment*>(dSegments.ptr),
                                   static_cast<const int32_t*>(dQuerySegments.ptr), numSegments,
                                   static_cast<float*>(dPartSims.ptr), static_cast<int64_t*>(dPartIds.ptr),
                                   static_cast<float*>(dSims.ptr),
                                   static_cast<int64_t*>(dOutIds.ptr), nullptr));
  RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpy(outSims.data(), dSims.ptr, outSims.size_bytes(),
                                          cudaMemcpyDeviceToHost), "copying similarities back"));
  return fromCuda(cudaMemcpy(outIds.data(), dOutIds.ptr, outIds.size_bytes(),
                             cudaMemcpyDeviceToHost), "copying ids back");
}

}  // namespace rag::cuda
