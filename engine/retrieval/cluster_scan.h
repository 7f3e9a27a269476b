// Scan of cached IVF clusters for a batch of queries: inner products and a top-k per query.
// This is the CPU reference of the CUDA kernel in kernels/cluster_scan.cuh (HedraRAG §4.4's
// GPU-side search of hot clusters); both take the same plain-data batch, and
// tests/kernels/test_cluster_scan.cpp compares them.
//
// Each query scans its own list of segments (a segment is one cluster's vectors and ids, in the
// scanner's memory: host for the CPU scan, device for the kernel):
//
//   ScanSegment seg[] = {{c7.vectors.data(), c7.ids.data(), c7.rows}, {...}};
//   int32_t begin[] = {0, 2, 3};   // query 0 scans seg[0..1], query 1 scans seg[2]
//   std::vector<float> sims(2 * k);  std::vector<int64_t> ids(2 * k);
//   RAG_RETURN_IF_ERROR(scanClustersCpu(queries, dim, k, seg, begin, sims, ids));
//
// Results are ordered by (similarity descending, id ascending), a total order that the kernel
// uses too, so the two agree on ties. Slots no vector filled hold (-inf, -1) and come last: the
// per-query heap starts at -infinity (an inner-product top-k that started at +infinity would
// never take a hit). Ids are the rows of the indexed vectors (FAISS ids), so the rows merge
// straight into a SearchTask's top-k (SearchTask::mergeHits).
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "rag/status.h"

namespace rag::retrieval {

struct ScanSegment {
  const float* vectors = nullptr;  // F32 [rows, dim]
  const int64_t* ids = nullptr;    // I64 [rows]
  int64_t rows = 0;
};
static_assert(std::is_trivially_copyable_v<ScanSegment> && sizeof(ScanSegment) == 24,
              "ScanSegment is copied to the device as is");

// Is hit (simA, idA) ranked before (simB, idB)? Filled slots (id >= 0) before empty ones, then
// higher similarity, then lower id.
inline constexpr bool scanHitBefore(float simA, int64_t idA, float simB, int64_t idB) {
  if (idA < 0) return false;
  if (idB < 0) return true;
  return simA > simB || (simA == simB && idA < idB);
}

// Checks the shape of a batch (shared by the CPU scan and the kernel's launcher): dim > 0,
// k > 0, queries a whole number of rows, querySegments nq + 1 non-decreasing offsets from 0 to
// at most segments.size(), outputs of nq * k, segments with rows >= 0 and non-null data.
Status checkScanBatch(std::span<const float> queries, int64_t dim, int32_t k,
                      std::span<const ScanSegment> segments,
                      std::span<const int32_t> querySegments, size_t outSims, size_t outIds);

// queries: F32 [nq, dim]; querySegments: I32 [nq + 1], query q scans
// segments[querySegments[q] .. querySegments[q+1]); outSims F32 [nq, k], outIds I64 [nq, k],
// each row best first.
Status scanClustersCpu(std::span<const float> queries, int64_t dim, int32_t k,
                       std::span<const ScanSegment> segments,
                       std::span<const int32_t> querySegments, std::span<float> outSims,
                       std::span<int64_t> outIds);

}  // namespace rag::retrieval
