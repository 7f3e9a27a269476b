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
constexpr size_t kMaxSharedQueryBytes = 48 * 1024;

__global__ void clusterScanKernel(const float* queries, int64_t dim, int k,
                                  const ScanSegment* segments, const int32_t* querySegments,
                                  float* outSims, int64_t* outIds) {
  extern __shared__ float query[];  // F32 [dim]
  __shared__ float headSim[kThreads];
  __shared__ int64_t headId[kThreads];
  __shared__ int headThread[kThreads];
  const int t = threadIdx.x;
  const int64_t q = blockIdx.x;
  for (int64_t j = t; j < dim; j += blockDim.x) query[j] = queries[q * dim + j];
  __syncthreads();

  // This thread's best hits, best first (the -inf start is implicit: n counts filled slots).
  float sims[kClusterScanMaxK];
  int64_t ids[kClusterScanMaxK];
  int n = 0;
  for (int32_t s = querySegments[q]; s < querySegments[q + 1]; ++s) {
    const ScanSegment seg = segments[s];
    for (int64_t r = t; r < seg.rows; r += blockDim.x) {
      const int64_t id = seg.ids[r];
      if (id < 0) continue;
      const float* v = seg.vectors + r * dim;
      float sim = 0.0f;
      for (int64_t j = 0; j < dim; ++j) sim += query[j] * v[j];
      if (n == k && !scanHitBefore(sim, id, sims[k - 1], ids[k - 1])) continue;
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
  }

  // k rounds: the best list head of all threads goes out, its thread moves to its next hit.
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
      outSims[q * k + round] = headSim[0];
      outIds[q * k + round] = headId[0];
    }
    if (headId[0] >= 0 && headThread[0] == t) ++head;
    __syncthreads();  // everyone has read slot 0 before the next round writes
  }
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
                    const ScanSegment* segments, const int32_t* querySegments, float* outSims,
                    int64_t* outIds, cudaStream_t stream) {
  if (k <= 0 || k > kClusterScanMaxK)
    return Status::invalidArgument("GPU cluster scan: k must be 1.." +
                                   std::to_string(kClusterScanMaxK) + " (got " +
                                   std::to_string(k) + "); scan larger k on the CPU");
  if (dim <= 0 || static_cast<size_t>(dim) * sizeof(float) > kMaxSharedQueryBytes)
    return Status::invalidArgument("GPU cluster scan: dimension " + std::to_string(dim) +
                                   " does not fit a query in shared memory (at most " +
                                   std::to_string(kMaxSharedQueryBytes / sizeof(float)) + ")");
  if (nq <= 0) return Status::ok();
  if (nq > 0x7fffffff) return Status::invalidArgument("GPU cluster scan: too many queries");
  clusterScanKernel<<<static_cast<unsigned>(nq), kThreads, static_cast<size_t>(dim) * sizeof(float),
                      stream>>>(queries, dim, k, segments, querySegments, outSims, outIds);
  return fromCuda(cudaGetLastError(), "launching clusterScanKernel");
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
  DeviceBuffer dQueries, dVectors, dIds, dSegments, dQuerySegments, dSims, dOutIds;
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
                                   static_cast<const int32_t*>(dQuerySegments.ptr),
                                   static_cast<float*>(dSims.ptr),
                                   static_cast<int64_t*>(dOutIds.ptr), nullptr));
  RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpy(outSims.data(), dSims.ptr, outSims.size_bytes(),
                                          cudaMemcpyDeviceToHost), "copying similarities back"));
  return fromCuda(cudaMemcpy(outIds.data(), dOutIds.ptr, outIds.size_bytes(),
                             cudaMemcpyDeviceToHost), "copying ids back");
}

}  // namespace rag::cuda
