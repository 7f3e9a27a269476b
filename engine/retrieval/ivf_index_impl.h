// IvfIndex's internals, shared by the files that implement it: ivf_index.cpp (tasks and the
// step executor), ivf_index_file.cpp (the file format) and ivf_cost_model.cpp (the cost models'
// calibration). It includes FAISS, so only those files include it.
#pragma once

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/utils/Heap.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "retrieval/ivf_index.h"

namespace rag::retrieval {

namespace ivf_detail {

using FaissId = faiss::Index::idx_t;
static_assert(std::is_same_v<FaissId, int64_t>, "FAISS ids are passed as int64_t");
using IpHeap = faiss::CMin<float, int64_t>;  // FAISS's result heap for inner product

inline constexpr float kEmptySim = -std::numeric_limits<float>::infinity();
inline constexpr const char* kRebuildHint = "rebuild it with `ragraph index build`";

// A FAISS exception as a Status naming `what` failed (out of memory gets its own fix).
Status faissFailure(std::string_view what, const std::exception& e);

}  // namespace ivf_detail

struct IvfIndex::Impl {
  using FaissId = ivf_detail::FaissId;
  std::unique_ptr<faiss::IndexIVFFlat> index;  // owns the quantizer and the inverted lists
  const faiss::IndexFlat* quantizer = nullptr;
  std::unique_ptr<std::atomic<uint64_t>[]> accessCounts;  // [nlist]
  ClusterCostModel cost;
  SharedScanCostModel sharedCost;
  double maxRowNorm = 0;  // the largest |v| of an indexed vector: the shared scan's error bound

  int64_t dim() const { return index->d; }
  int64_t nlist() const { return static_cast<int64_t>(index->nlist); }
  int64_t listSize(int64_t c) const {
    return static_cast<int64_t>(index->invlists->list_size(static_cast<size_t>(c)));
  }
  const float* centroid(int64_t c) const { return quantizer->get_xb() + c * dim(); }

  // Wraps a trained, filled IndexIVFFlat; Corrupt when it is not the kind this class serves.
  static Result<std::unique_ptr<Impl>> wrap(std::unique_ptr<faiss::IndexIVFFlat> index,
                                            const std::string& source);
  // The non-empty clusters, smallest first (the calibrations draw size bands from it).
  std::vector<int64_t> clustersBySize() const {
    std::vector<int64_t> clusters;
    for (int64_t c = 0; c < nlist(); ++c)
      if (listSize(c) > 0) clusters.push_back(c);
    std::stable_sort(clusters.begin(), clusters.end(),
                     [&](int64_t x, int64_t y) { return listSize(x) < listSize(y); });
    return clusters;
  }
  ClusterCostModel calibrate() const;
  SharedScanCostModel calibrateShared() const;
  void initTask(SearchTask& t, const float* query, int32_t k) const;
  // How far a screened score may sit below the heap's worst and still enter: twice the error
  // bound of two float evaluations of t's inner products (see innerProductErrorBound).
  float screenMargin(const SearchTask& t) const;
  // Offers cluster c's rows to t's heap in row order, as FAISS's IVF-Flat scanner does, given
  // their screened scores (innerProductsShared): a row that cannot beat the heap's worst is
  // skipped, every other one is rescored with fvec_inner_product, FAISS's kernel, so the heap
  // sees exactly FAISS's values in FAISS's order.
  void offerScreened(SearchTask& t, int64_t c, const float* screened, float margin) const;
  // Scans t's next `take` clusters on this thread, one query per row read; clusters flagged in
  // `elsewhere` are skipped (another device scans them). Moves the cursor; counts nothing.
  void scanAlone(SearchTask& t, int32_t take, std::span<const uint8_t> elsewhere) const;
  // Marks the clusters t's last `take` steps passed as visited (vector and access counts).
  void countVisits(SearchTask& t, int32_t take) const;
  Result<StepStats> runPlanned(const std::vector<SearchTask*>& live,
                               const std::vector<int32_t>& take,
                               std::span<const uint8_t> elsewhere) const;
  Result<StepStats> runShared(const std::vector<SearchTask*>& live,
                              const std::vector<int32_t>& take) const;
};

}  // namespace rag::retrieval
