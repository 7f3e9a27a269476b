// Scan of cached IVF clusters on the GPU: per query, the inner products with the vectors of its
// segments and their top-k (HedraRAG §4.4). CPU reference: rag::retrieval::scanClustersCpu
// (engine/retrieval/cluster_scan.h), same batch layout, same total order of hits (similarity
// descending, then id ascending; empty slots (-inf, -1) last); tests/kernels/
// test_cluster_scan.cpp compares the two.
//
// Two passes. One block per (query, segment) pair: the query sits in shared memory, a warp
// computes a row's inner product (lanes over consecutive floats, a shuffle-tree sum), the warp's
// lane 0 keeps a sorted top-k, and k rounds of a block-wide arg-best over the list heads write
// the segment's top-k. Then one block per query merges its segments' lists the same way. (The
// first version ran one block per query over all its segments: a search of a few queries used a
// few of the H100's 132 SMs, and `bench serve` measured hedra with the GPU cluster cache 2-3x
// slower per request than without it.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rag/status.h"
#include "retrieval/cluster_scan.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// Largest k the kernel keeps per thread.
inline constexpr int32_t kClusterScanMaxK = 128;

// All pointers in device memory: queries F32 [nq, dim]; segments [numSegments] whose vectors and
// ids point to device memory; querySegments I32 [nq + 1] (querySegments[nq] == numSegments, the
// host copy's last entry); partSims F32 / partIds I64 [numSegments, k], scratch for the
// per-segment lists; outSims F32 [nq, k]; outIds I64 [nq, k]. Enqueued on `stream`; shapes are
// not readable here, so callers check them (checkScanBatch) on the host copies. InvalidArgument
// for k > kClusterScanMaxK or a query too wide for shared memory.
Status scanClusters(const float* queries, int64_t nq, int64_t dim, int32_t k,
                    const retrieval::ScanSegment* segments, const int32_t* querySegments,
                    int64_t numSegments, float* partSims, int64_t* partIds, float* outSims,
                    int64_t* outIds, cudaStream_t stream);

// For tests and tools: the same arguments as scanClustersCpu, all in host memory; copies the
// queries and every segment to the device, scans, and copies the rows back (synchronous).
Status scanClustersHost(std::span<const float> queries, int64_t dim, int32_t k,
                        std::span<const retrieval::ScanSegment> segments,
                        std::span<const int32_t> querySegments, std::span<float> outSims,
                        std::span<int64_t> outIds);

}  // namespace rag::cuda
