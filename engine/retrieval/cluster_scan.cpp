#include "retrieval/cluster_scan.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace rag::retrieval {

Status checkScanBatch(std::span<const float> queries, int64_t dim, int32_t k,
                      std::span<const ScanSegment> segments,
                      std::span<const int32_t> querySegments, size_t outSims, size_t outIds) {
  if (dim <= 0) return Status::invalidArgument("cluster scan: dimension must be positive");
  if (k <= 0) return Status::invalidArgument("cluster scan: k must be at least 1");
  if (queries.size() % static_cast<size_t>(dim) != 0)
    return Status::invalidArgument("cluster scan: " + std::to_string(queries.size()) +
                                   " query floats are not whole " + std::to_string(dim) +
                                   "-dimensional rows");
  const size_t nq = queries.size() / static_cast<size_t>(dim);
  if (querySegments.size() != nq + 1)
    return Status::invalidArgument("cluster scan: " + std::to_string(querySegments.size()) +
                                   " segment offsets for " + std::to_string(nq) +
                                   " queries; give one more than there are queries");
  if (querySegments[0] != 0 ||
      static_cast<size_t>(querySegments[nq]) > segments.size() ||
      !std::is_sorted(querySegments.begin(), querySegments.end()))
    return Status::invalidArgument("cluster scan: segment offsets must rise from 0 to at most " +
                                   std::to_string(segments.size()));
  if (outSims != nq * static_cast<size_t>(k) || outIds != nq * static_cast<size_t>(k))
    return Status::invalidArgument("cluster scan: outputs must hold queries x k = " +
                                   std::to_string(nq * static_cast<size_t>(k)) + " slots");
  for (const ScanSegment& s : segments)
    if (s.rows < 0 || (s.rows > 0 && (!s.vectors || !s.ids)))
      return Status::invalidArgument("cluster scan: a segment has negative rows or no data");
  return Status::ok();
}

Status scanClustersCpu(std::span<const float> queries, int64_t dim, int32_t k,
                       std::span<const ScanSegment> segments,
                       std::span<const int32_t> querySegments, std::span<float> outSims,
                       std::span<int64_t> outIds) {
  RAG_RETURN_IF_ERROR(checkScanBatch(queries, dim, k, segments, querySegments, outSims.size(),
                                     outIds.size()));
  struct Hit {
    float sim;
    int64_t id;
  };
  // std heap with "ranked before" as less-than: the front is the worst kept hit.
  auto before = [](const Hit& a, const Hit& b) { return scanHitBefore(a.sim, a.id, b.sim, b.id); };
  const size_t d = static_cast<size_t>(dim);
  const size_t nq = queries.size() / d;
  std::vector<Hit> heap(static_cast<size_t>(k));
  for (size_t q = 0; q < nq; ++q) {
    std::fill(heap.begin(), heap.end(), Hit{-std::numeric_limits<float>::infinity(), -1});
    const float* x = queries.data() + q * d;
    for (int32_t s = querySegments[q]; s < querySegments[q + 1]; ++s) {
      const ScanSegment& seg = segments[static_cast<size_t>(s)];
      for (int64_t r = 0; r < seg.rows; ++r) {
        const float* v = seg.vectors + static_cast<size_t>(r) * d;
        float sim = 0.0f;
        for (size_t j = 0; j < d; ++j) sim += x[j] * v[j];
        const Hit h{sim, seg.ids[r]};
        if (!before(h, heap.front())) continue;
        std::pop_heap(heap.begin(), heap.end(), before);
        heap.back() = h;
        std::push_heap(heap.begin(), heap.end(), before);
      }
    }
    std::sort_heap(heap.begin(), heap.end(), before);  // best first
    for (size_t j = 0; j < heap.size(); ++j) {
      outSims[q * heap.size() + j] = heap[j].sim;
      outIds[q * heap.size() + j] = heap[j].id;
    }
  }
  return Status::ok();
}

}  // namespace rag::retrieval
