// The IVF index: building, search tasks, and the one step executor (execute) that runs a
// sub-stage plan (retrieval/substage_planner.h). The file format is in ivf_index_file.cpp, the
// cost models' calibration in ivf_cost_model.cpp, the internals they share in ivf_index_impl.h.
#include "retrieval/ivf_index.h"

#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>
#include <faiss/utils/distances.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <new>

#include "core/clock.h"
#include "retrieval/ivf_index_impl.h"
#include "retrieval/shared_scan.h"
#include "retrieval/substage_planner.h"

namespace rag::retrieval {

using namespace ivf_detail;

Status ivf_detail::faissFailure(std::string_view what, const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return Status::internal(std::string(what) + " ran out of memory; use fewer vectors or a "
                                                "machine with more memory");
  return Status::internal(std::string(what) + " failed inside FAISS: " + e.what());
}

namespace {

void markEmptySlots(SearchResults& r) {
  for (size_t i = 0; i < r.ids.size(); ++i)
    if (r.ids[i] < 0) r.similarities[i] = kEmptySim;
}

}  // namespace

// ---- SearchResults / SearchTask ------------------------------------------------------------

std::vector<SearchHit> SearchResults::row(int64_t i) const {
  std::vector<SearchHit> out;
  if (i < 0 || i >= n) return out;
  const size_t base = static_cast<size_t>(i) * static_cast<size_t>(k);
  for (size_t j = 0; j < static_cast<size_t>(k); ++j)
    if (ids[base + j] >= 0) out.push_back({ids[base + j], similarities[base + j]});
  return out;
}

std::vector<SearchHit> SearchTask::topK() const {
  std::vector<float> sims = m_heapSims;
  std::vector<int64_t> ids = m_heapIds;
  const size_t filled = faiss::heap_reorder<IpHeap>(sims.size(), sims.data(), ids.data());
  std::vector<SearchHit> out(filled);
  for (size_t i = 0; i < filled; ++i) out[i] = {ids[i], sims[i]};
  return out;
}

void SearchTask::mergeHits(std::span<const float> sims, std::span<const int64_t> ids) {
  const size_t k = m_heapSims.size();
  const size_t n = std::min(sims.size(), ids.size());
  for (size_t i = 0; i < n; ++i)
    if (ids[i] >= 0 && k > 0 && IpHeap::cmp(m_heapSims[0], sims[i]))  // as FAISS's scanners
      faiss::heap_replace_top<IpHeap>(k, m_heapSims.data(), m_heapIds.data(), sims[i], ids[i]);
}

// ---- IvfIndex ------------------------------------------------------------------------------

Result<std::unique_ptr<IvfIndex::Impl>> IvfIndex::Impl::wrap(
    std::unique_ptr<faiss::IndexIVFFlat> index, const std::string& source) {
  const auto* quantizer = dynamic_cast<const faiss::IndexFlat*>(index->quantizer);
  if (index->metric_type != faiss::METRIC_INNER_PRODUCT || !quantizer ||
      quantizer->metric_type != faiss::METRIC_INNER_PRODUCT || !index->is_trained ||
      quantizer->ntotal != static_cast<FaissId>(index->nlist))
    return Status::corrupt(source + " is not a trained inner-product IVF-Flat index; " +
                           kRebuildHint);
  auto impl = std::make_unique<IvfIndex::Impl>();
  impl->quantizer = quantizer;
  impl->accessCounts.reset(new std::atomic<uint64_t>[index->nlist]());
  for (size_t c = 0; c < index->nlist; ++c) {
    const size_t n = index->invlists->list_size(c);
    if (n == 0) continue;
    faiss::InvertedLists::ScopedCodes codes(index->invlists, c);
    const auto* x = reinterpret_cast<const float*>(codes.get());  // IVF-Flat codes are the floats
    for (size_t j = 0; j < n; ++j)
      impl->maxRowNorm = std::max(impl->maxRowNorm,
                                  std::sqrt(static_cast<double>(faiss::fvec_norm_L2sqr(x + j * index->d, index->d))));
  }
  impl->index = std::move(index);
  return impl;
}


void IvfIndex::Impl::initTask(SearchTask& t, const float* query, int32_t k) const {
  t.m_query.assign(query, query + dim());
  t.m_heapSims.assign(static_cast<size_t>(k), kEmptySim);
  t.m_heapIds.assign(static_cast<size_t>(k), -1);
  t.m_cursor = 0;
  t.m_vectorsScanned = 0;
}

IvfIndex::IvfIndex(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
IvfIndex::IvfIndex(IvfIndex&&) noexcept = default;
IvfIndex& IvfIndex::operator=(IvfIndex&&) noexcept = default;
IvfIndex::~IvfIndex() = default;

int64_t IvfIndex::defaultNlist(int64_t n) {
  if (n < 39) return 1;
  const double target = 4.0 * std::sqrt(static_cast<double>(n));
  int64_t lo = 1;
  while (static_cast<double>(lo * 2) <= target) lo *= 2;
  int64_t p = (target - static_cast<double>(lo) <= static_cast<double>(2 * lo) - target) ? lo : 2 * lo;
  while (p > 1 && p * 39 > n) p /= 2;  // FAISS wants >= 39 training vectors per centroid
  return p;
}

Result<IvfIndex> IvfIndex::build(std::span<const float> vectors, int64_t dim, int64_t nlist,
                                 uint64_t seed, const ProgressFn& progress, int64_t clusterDims) {
  if (dim <= 0)
    return Status::invalidArgument("vector dimension must be positive (got " +
                                   std::to_string(dim) + "); pass the embedder's output size");
  if (vectors.empty())
    return Status::invalidArgument("no vectors to index; embed the passages first");
  if (vectors.size() % static_cast<size_t>(dim) != 0)
    return Status::invalidArgument(
        std::to_string(vectors.size()) + " floats are not a whole number of " +
        std::to_string(dim) + "-dimensional vectors; check that dim matches the embedder's "
        "output size");
  const int64_t n = static_cast<int64_t>(vectors.size()) / dim;
  if (nlist <= 0)
    return Status::invalidArgument("nlist must be at least 1 (got " + std::to_string(nlist) +
                                   "); use IvfIndex::defaultNlist(" + std::to_string(n) +
                                   ") = " + std::to_string(defaultNlist(n)));
  if (nlist > n)
    return Status::invalidArgument(
        "nlist " + std::to_string(nlist) + " exceeds the " + std::to_string(n) +
        " vectors to index (every cluster needs vectors); use at most " + std::to_string(n) +
        ", e.g. defaultNlist = " + std::to_string(defaultNlist(n)));
  for (size_t i = 0; i < vectors.size(); ++i)
    if (!std::isfinite(vectors[i]))
      return Status::invalidArgument(
          "vector " + std::to_string(i / static_cast<size_t>(dim)) +
          " has a NaN or infinite component; fix the embedder's output before indexing");

  if (clusterDims < 0 || clusterDims > dim)
    return Status::invalidArgument("the clustered components must be 1.." + std::to_string(dim) + " (got " +
                                   std::to_string(clusterDims) + "); 0 clusters whole vectors");
  const bool partial = clusterDims > 0 && clusterDims < dim;
  auto report = [&](std::string_view phase, uint64_t done, uint64_t total) {
    if (progress) progress(phase, done, total);
  };
  std::unique_ptr<faiss::IndexIVFFlat> ivf;
  try {
    auto quantizer = std::make_unique<faiss::IndexFlatIP>(dim);
    ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer.get(), dim, static_cast<size_t>(nlist),
                                                faiss::METRIC_INNER_PRODUCT);
    quantizer.release();
    ivf->own_fields = true;
    ivf->cp.seed = static_cast<int>((seed ^ (seed >> 32)) & 0x7fffffff);
    ivf->cp.spherical = true;  // unit-norm centroids for unit-norm vectors
    report("k-means (coarse quantizer)", 0, 1);
    if (!partial) {
      ivf->train(n, vectors.data());
    } else {
      // k-means over the first clusterDims components, the centroids padded with zeros.
      std::vector<float> head(static_cast<size_t>(n * clusterDims));
      for (int64_t i = 0; i < n; ++i)
        std::copy_n(vectors.data() + i * dim, clusterDims, head.data() + i * clusterDims);
      faiss::Clustering kmeans(static_cast<int>(clusterDims), static_cast<int>(nlist), ivf->cp);
      faiss::IndexFlatIP assign(clusterDims);
      kmeans.train(n, head.data(), assign);
      std::vector<float> centroids(static_cast<size_t>(nlist * dim), 0.0f);
      for (int64_t c = 0; c < nlist; ++c)
        std::copy_n(kmeans.centroids.data() + c * clusterDims, clusterDims, centroids.data() + c * dim);
      ivf->quantizer->add(nlist, centroids.data());
      ivf->is_trained = true;
    }
    report("k-means (coarse quantizer)", 1, 1);
    constexpr int64_t kChunk = 16384;
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      ivf->add(m, vectors.data() + i * dim);
      report("adding vectors", static_cast<uint64_t>(i + m), static_cast<uint64_t>(n));
    }
  } catch (const std::exception& e) {
    return faissFailure("building the IVF index", e);
  }
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::wrap(std::move(ivf), "the new index"));
  report("calibrating the cluster cost model", 0, 1);
  impl->cost = impl->calibrate();
  impl->sharedCost = impl->calibrateShared();
  report("calibrating the cluster cost model", 1, 1);
  return IvfIndex(std::move(impl));
}


float IvfIndex::Impl::screenMargin(const SearchTask& t) const {
  const double qNorm = std::sqrt(static_cast<double>(faiss::fvec_norm_L2sqr(t.m_query.data(), static_cast<size_t>(dim()))));
  return static_cast<float>(innerProductErrorBound(dim(), qNorm * maxRowNorm));
}

void IvfIndex::Impl::offerScreened(SearchTask& t, int64_t c, const float* screened, float margin) const {
  const size_t n = static_cast<size_t>(listSize(c));
  const size_t d = static_cast<size_t>(dim());
  const size_t k = t.m_heapSims.size();
  float* heapSims = t.m_heapSims.data();
  int64_t* heapIds = t.m_heapIds.data();
  const float* q = t.m_query.data();
  faiss::InvertedLists::ScopedCodes codes(index->invlists, static_cast<size_t>(c));
  faiss::InvertedLists::ScopedIds ids(index->invlists, static_cast<size_t>(c));
  const auto* rows = reinterpret_cast<const float*>(codes.get());
  for (size_t j = 0; j < n; ++j) {
    if (screened[j] < heapSims[0] - margin) continue;  // cannot beat the worst kept
    const float sim = faiss::fvec_inner_product(q, rows + j * d, d);
    if (IpHeap::cmp(heapSims[0], sim)) faiss::heap_replace_top<IpHeap>(k, heapSims, heapIds, sim, ids[j]);
  }
}

void IvfIndex::Impl::scanAlone(SearchTask& t, int32_t take, std::span<const uint8_t> elsewhere) const {
  thread_local std::vector<float> screened;  // one cluster's scores (OpenMP threads: their own)
  const float margin = screenMargin(t);
  const float* q = t.m_query.data();
  for (int32_t j = 0; j < take; ++j) {
    const int64_t c = t.m_clusters[t.m_cursor++];
    if (!elsewhere.empty() && elsewhere[static_cast<size_t>(c)]) continue;
    const int64_t n = listSize(c);
    if (n == 0) continue;
    if (screened.size() < static_cast<size_t>(n)) screened.resize(static_cast<size_t>(n));
    float* out = screened.data();
    faiss::InvertedLists::ScopedCodes codes(index->invlists, static_cast<size_t>(c));
    innerProductsShared(&q, &out, 1, reinterpret_cast<const float*>(codes.get()), n, dim());
    offerScreened(t, c, out, margin);
  }
}

void IvfIndex::Impl::countVisits(SearchTask& t, int32_t take) const {
  for (size_t j = t.m_cursor - static_cast<size_t>(take); j < t.m_cursor; ++j) {
    const int64_t c = t.m_clusters[j];
    t.m_vectorsScanned += listSize(c);
    accessCounts[c].fetch_add(1, std::memory_order_relaxed);
  }
}

int64_t IvfIndex::dim() const { return m_impl->dim(); }
int64_t IvfIndex::nlist() const { return m_impl->nlist(); }
int64_t IvfIndex::size() const { return m_impl->index->ntotal; }
std::vector<int32_t> IvfIndex::clusterOfIds() const {
  std::vector<int32_t> out(static_cast<size_t>(size()), -1);
  const faiss::InvertedLists* lists = m_impl->index->invlists;
  for (int64_t c = 0; c < m_impl->nlist(); ++c) {
    faiss::InvertedLists::ScopedIds ids(lists, static_cast<size_t>(c));
    const size_t n = lists->list_size(static_cast<size_t>(c));
    for (size_t j = 0; j < n; ++j)
      if (ids[j] >= 0 && ids[j] < size()) out[static_cast<size_t>(ids[j])] = static_cast<int32_t>(c);
  }
  return out;
}

int64_t IvfIndex::listSize(int64_t cluster) const {
  return cluster >= 0 && cluster < nlist() ? m_impl->listSize(cluster) : 0;
}
std::vector<int64_t> IvfIndex::listSizes() const {
  std::vector<int64_t> out(static_cast<size_t>(nlist()));
  for (int64_t c = 0; c < nlist(); ++c) out[static_cast<size_t>(c)] = m_impl->listSize(c);
  return out;
}

const ClusterCostModel& IvfIndex::costModel() const { return m_impl->cost; }
const SharedScanCostModel& IvfIndex::sharedCostModel() const { return m_impl->sharedCost; }
void IvfIndex::setCostModel(const ClusterCostModel& model) { m_impl->cost = model; }

Status IvfIndex::checkQueries(std::span<const float> queries, int32_t k, const char* what) const {
  const int64_t d = dim();
  if (queries.empty())
    return Status::invalidArgument(std::string(what) + ": no query vector given; embed the "
                                                       "query text first");
  if (queries.size() % static_cast<size_t>(d) != 0)
    return Status::invalidArgument(std::string(what) + ": a query of " +
                                   std::to_string(queries.size()) + " floats does not fit this "
                                   "index of " + std::to_string(d) + "-dimensional vectors; "
                                   "embed queries with the embedder that built the index");
  if (k <= 0)
    return Status::invalidArgument(std::string(what) + ": k must be at least 1 (got " +
                                   std::to_string(k) + "); ask for one result or more");
  for (float v : queries)
    if (!std::isfinite(v))
      return Status::invalidArgument(std::string(what) + ": a query has a NaN or infinite "
                                                         "component; check the embedder's output");
  return Status::ok();
}

Result<SearchTask> IvfIndex::makeTask(std::span<const float> query, int32_t k,
                                      int64_t nprobe) const {
  RAG_RETURN_IF_ERROR(checkQueries(query, k, "makeTask"));
  if (static_cast<int64_t>(query.size()) != dim())
    return Status::invalidArgument("makeTask: takes one query of " + std::to_string(dim()) +
                                   " floats (got " + std::to_string(query.size()) +
                                   "); use makeTasks for several");
  RAG_ASSIGN_OR_RETURN(std::vector<SearchTask> tasks, makeTasks(query, k, nprobe));
  return std::move(tasks.front());
}

Result<SearchTask> IvfIndex::makeTask(std::span<const float> query, int32_t k,
                                      std::span<const int64_t> clusters) const {
  RAG_RETURN_IF_ERROR(checkQueries(query, k, "makeTask"));
  if (static_cast<int64_t>(query.size()) != dim())
    return Status::invalidArgument("makeTask: takes one query of " + std::to_string(dim()) +
                                   " floats (got " + std::to_string(query.size()) + ")");
  std::vector<char> seen(static_cast<size_t>(nlist()), 0);
  for (int64_t c : clusters) {
    if (c < 0 || c >= nlist())
      return Status::invalidArgument("makeTask: cluster " + std::to_string(c) +
                                     " is outside this index's clusters 0.." +
                                     std::to_string(nlist() - 1));
    if (seen[static_cast<size_t>(c)]++)
      return Status::invalidArgument("makeTask: cluster " + std::to_string(c) +
                                     " is listed twice; each cluster may be visited once");
  }
  SearchTask t;
  m_impl->initTask(t, query.data(), k);
  t.m_clusters.assign(clusters.begin(), clusters.end());
  return t;
}

Result<std::vector<SearchTask>> IvfIndex::makeTasks(std::span<const float> queries, int32_t k,
                                                    int64_t nprobe) const {
  RAG_RETURN_IF_ERROR(checkQueries(queries, k, "makeTasks"));
  if (nprobe <= 0)
    return Status::invalidArgument("nprobe must be at least 1 (got " + std::to_string(nprobe) +
                                   "); it is the number of clusters a query visits");
  const int64_t d = dim();
  const int64_t n = static_cast<int64_t>(queries.size()) / d;
  const int64_t p = std::min(nprobe, nlist());
  std::vector<FaissId> assign(static_cast<size_t>(n * p));
  std::vector<float> coarse(static_cast<size_t>(n * p));
  // Sliced over the threads exactly as IndexIVF::search slices its queries: the same BLAS calls
  // on the same row blocks, so the cluster lists match FAISS's bit for bit, and the cost
  // matches too (one big BLAS call from here made OpenBLAS's and OpenMP's threads collide).
  const int64_t slices = std::min<int64_t>(std::max(1, omp_get_max_threads()), n);
  std::vector<Status> failures(static_cast<size_t>(slices));
#pragma omp parallel for if (slices > 1)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t i0 = n * s / slices, i1 = n * (s + 1) / slices;
    if (i1 <= i0) continue;
    try {
      m_impl->quantizer->search(i1 - i0, queries.data() + i0 * d, p, coarse.data() + i0 * p,
                                assign.data() + i0 * p);
    } catch (const std::exception& e) {
      failures[static_cast<size_t>(s)] = faissFailure("coarse quantization", e);
    }
  }
  for (const Status& f : failures) RAG_RETURN_IF_ERROR(f);
  std::vector<SearchTask> tasks(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    SearchTask& t = tasks[static_cast<size_t>(i)];
    m_impl->initTask(t, queries.data() + i * d, k);
    t.m_clusters.reserve(static_cast<size_t>(p));
    for (int64_t j = i * p; j < (i + 1) * p; ++j) {
      if (assign[static_cast<size_t>(j)] < 0) continue;  // fewer centroids than nprobe
      t.m_clusters.push_back(assign[static_cast<size_t>(j)]);
    }
  }
  return tasks;
}

namespace {

// The checks every step entry point makes on its tasks (the unfinished ones matter).
Status checkStepTasks(std::span<SearchTask* const> tasks, int64_t d, int64_t nlist,
                      const char* what) {
  std::vector<SearchTask*> sorted;
  sorted.reserve(tasks.size());
  for (SearchTask* t : tasks) {
    if (!t) return Status::invalidArgument(std::string(what) + ": a task pointer is null");
    sorted.push_back(t);
    if (t->done()) continue;
    if (t->dim() != d || t->k() <= 0)
      return Status::invalidArgument(std::string(what) + ": a task for " +
                                     std::to_string(t->dim()) +
                                     "-dimensional queries was given to an index of dimension " +
                                     std::to_string(d) + "; make tasks with this index's makeTask");
    for (size_t j = t->cursor(); j < t->clusters().size(); ++j)
      if (t->clusters()[j] < 0 || t->clusters()[j] >= nlist)
        return Status::invalidArgument(std::string(what) + ": a task's cluster " +
                                       std::to_string(t->clusters()[j]) +
                                       " is outside this index's clusters 0.." +
                                       std::to_string(nlist - 1) +
                                       "; the task was made by another index");
  }
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return Status::invalidArgument(std::string(what) +
                                   ": the same task is listed twice; list each task once");
  return Status::ok();
}

}  // namespace

// Runs a planned step over `live` (take[i] > 0 next clusters of live[i]): each task scans its
// clusters alone, the tasks spread over OpenMP's threads; clusters flagged in `elsewhere` are
// skipped but count as visited.
Result<StepStats> IvfIndex::Impl::runPlanned(const std::vector<SearchTask*>& live,
                                             const std::vector<int32_t>& take,
                                             std::span<const uint8_t> elsewhere) const {
  const int64_t n = static_cast<int64_t>(live.size());
  const int threads = static_cast<int>(std::min<int64_t>(std::max(1, omp_get_max_threads()), n));
  Stopwatch w;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (threads > 1)
  for (int64_t i = 0; i < n; ++i) scanAlone(*live[static_cast<size_t>(i)], take[static_cast<size_t>(i)], elsewhere);
  StepStats stats;
  stats.seconds = w.elapsedSeconds();
  stats.tasksAdvanced = static_cast<int32_t>(live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    SearchTask& t = *live[i];
    countVisits(t, take[i]);
    for (size_t j = t.cursor() - static_cast<size_t>(take[i]); j < t.cursor(); ++j) {
      const int64_t c = t.clusters()[j];
      if (!elsewhere.empty() && elsewhere[static_cast<size_t>(c)]) continue;
      stats.clustersSearched += 1;
      stats.vectorsScanned += listSize(c);
    }
  }
  stats.clustersRead = stats.clustersSearched;
  return stats;
}

// The shared step's two passes. Screening: each distinct cluster is read once and scored for
// every task visiting it (in parallel over clusters). Merging: each task walks its clusters in
// its own order and offers every row to its heap as FAISS's IVF-Flat scanner does (in parallel
// over tasks); a row whose screened score is below the heap's worst by more than the two
// kernels can disagree cannot enter, and every other row is rescored with fvec_inner_product,
// FAISS's kernel, so the heap sees exactly FAISS's values in FAISS's order.
Result<StepStats> IvfIndex::Impl::runShared(const std::vector<SearchTask*>& live,
                                            const std::vector<int32_t>& take) const {
  struct Visit {
    int64_t cluster;
    uint32_t task;
    size_t scores;  // offset of its scores in the buffer
  };
  std::vector<Visit> visits;       // task by task, each in its visiting order
  std::vector<size_t> firstVisit;  // task i's visits are [firstVisit[i], firstVisit[i + 1])
  size_t buffer = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    firstVisit.push_back(visits.size());
    const SearchTask& t = *live[i];
    for (size_t j = t.cursor(); j < t.cursor() + static_cast<size_t>(take[i]); ++j) {
      const int64_t c = t.clusters()[j];
      visits.push_back({c, static_cast<uint32_t>(i), buffer});
      buffer += static_cast<size_t>(listSize(c));
    }
  }
  firstVisit.push_back(visits.size());
  thread_local std::vector<float> scoreBuffer;  // reused: a step's buffer is a few MiB
  if (scoreBuffer.size() < buffer) scoreBuffer.resize(buffer);
  float* const scores = scoreBuffer.data();  // (the OpenMP threads below have their own thread_locals)
  // Visits grouped by cluster; within a cluster in task order.
  std::vector<uint32_t> byCluster(visits.size());
  for (uint32_t v = 0; v < byCluster.size(); ++v) byCluster[v] = v;
  std::stable_sort(byCluster.begin(), byCluster.end(),
                   [&](uint32_t x, uint32_t y) { return visits[x].cluster < visits[y].cluster; });
  std::vector<size_t> runs;  // start of each cluster's group in byCluster, and the end
  for (size_t v = 0; v < byCluster.size(); ++v)
    if (v == 0 || visits[byCluster[v]].cluster != visits[byCluster[v - 1]].cluster) runs.push_back(v);
  runs.push_back(byCluster.size());

  const int64_t d = dim();
  const int threads = std::max(1, omp_get_max_threads());
  const int64_t nruns = static_cast<int64_t>(runs.size()) - 1;
  const int64_t nlive = static_cast<int64_t>(live.size());
  Stopwatch w;
#pragma omp parallel num_threads(threads)
  {
    std::vector<const float*> queries;
    std::vector<float*> outs;
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < nruns; ++r) {
      queries.clear();
      outs.clear();
      for (size_t v = runs[static_cast<size_t>(r)]; v < runs[static_cast<size_t>(r) + 1]; ++v) {
        const Visit& visit = visits[byCluster[v]];
        queries.push_back(live[visit.task]->m_query.data());
        outs.push_back(scores + visit.scores);
      }
      const int64_t c = visits[byCluster[runs[static_cast<size_t>(r)]]].cluster;
      faiss::InvertedLists::ScopedCodes codes(index->invlists, static_cast<size_t>(c));
      innerProductsShared(queries.data(), outs.data(), static_cast<int32_t>(queries.size()),
                          reinterpret_cast<const float*>(codes.get()), listSize(c), d);
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < nlive; ++i) {
      SearchTask& t = *live[static_cast<size_t>(i)];
      const float margin = screenMargin(t);
      for (size_t v = firstVisit[static_cast<size_t>(i)]; v < firstVisit[static_cast<size_t>(i) + 1]; ++v)
        offerScreened(t, visits[v].cluster, scores + visits[v].scores, margin);
      t.m_cursor += static_cast<size_t>(take[static_cast<size_t>(i)]);
      countVisits(t, take[static_cast<size_t>(i)]);
    }
  }
  StepStats stats;
  stats.seconds = w.elapsedSeconds();
  stats.tasksAdvanced = 0;
  for (int32_t n : take) stats.tasksAdvanced += n > 0 ? 1 : 0;
  stats.clustersSearched = static_cast<int64_t>(visits.size());
  stats.clustersRead = nruns;
  for (const Visit& v : visits) stats.vectorsScanned += listSize(v.cluster);
  return stats;
}

Result<StepStats> IvfIndex::execute(std::span<SearchTask* const> tasks, const SubStagePlan& plan,
                                    std::span<const uint8_t> elsewhere) const {
  RAG_RETURN_IF_ERROR(checkStepTasks(tasks, dim(), nlist(), "execute"));
  if (plan.take.size() != tasks.size())
    return Status::invalidArgument("execute: a plan of " + std::to_string(plan.take.size()) + " searches for " +
                                   std::to_string(tasks.size()) + " tasks; plan these tasks with planSubStage");
  if (!elsewhere.empty() && static_cast<int64_t>(elsewhere.size()) != nlist())
    return Status::invalidArgument("execute: the device mask has " + std::to_string(elsewhere.size()) +
                                   " entries, the index " + std::to_string(nlist()) + " clusters");
  if (!elsewhere.empty() && plan.scan == ScanMode::Shared)
    return Status::invalidArgument("execute: a shared scan reads every cluster here; plan a device split with ScanMode::Alone");
  std::vector<SearchTask*> live;
  std::vector<int32_t> take;
  double total = 0, costliest = 0;  // Alone with a device split: the CPU part's estimate
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (plan.take[i] < 0 || static_cast<size_t>(plan.take[i]) > tasks[i]->clustersLeft())
      return Status::invalidArgument("execute: task " + std::to_string(i) + " has " +
                                     std::to_string(tasks[i]->clustersLeft()) + " clusters left, the plan takes " +
                                     std::to_string(plan.take[i]));
    if (plan.take[i] == 0) continue;
    live.push_back(tasks[i]);
    take.push_back(plan.take[i]);
    if (elsewhere.empty()) continue;
    double c = 0;
    const SearchTask& t = *tasks[i];
    for (size_t j = t.cursor(); j < t.cursor() + static_cast<size_t>(plan.take[i]); ++j)
      if (!elsewhere[static_cast<size_t>(t.clusters()[j])]) c += m_impl->cost.seconds(m_impl->listSize(t.clusters()[j]));
    total += c;
    costliest = std::max(costliest, c);
  }
  if (live.empty()) return StepStats{};
  RAG_ASSIGN_OR_RETURN(StepStats stats, plan.scan == ScanMode::Shared ? m_impl->runShared(live, take)
                                                                      : m_impl->runPlanned(live, take, elsewhere));
  stats.estimatedSeconds =
      elsewhere.empty() ? plan.estimatedSeconds : std::max(costliest, total / std::max(1, omp_get_max_threads()));
  return stats;
}

int IvfIndex::searchThreads() { return std::max(1, omp_get_max_threads()); }

namespace {

// A step planned and executed at once (IvfIndex::step, stepShared).
Result<StepStats> planAndExecute(const IvfIndex& index, std::span<SearchTask* const> tasks, double budgetSeconds,
                                 PlanOrder order, ScanMode scan, const char* what) {
  RAG_RETURN_IF_ERROR(checkStepTasks(tasks, index.dim(), index.nlist(), what));
  RAG_ASSIGN_OR_RETURN(SubStagePlan plan, planSubStage(index, tasks, budgetSeconds,
                                                       {.order = order, .scan = scan, .threads = IvfIndex::searchThreads()}));
  return index.execute(tasks, plan);
}

}  // namespace

Result<StepStats> IvfIndex::step(std::span<SearchTask* const> tasks, double budgetSeconds) const {
  return planAndExecute(*this, tasks, budgetSeconds, PlanOrder::RoundRobin, ScanMode::Alone, "step");
}

Result<StepStats> IvfIndex::stepShared(std::span<SearchTask* const> tasks, double budgetSeconds) const {
  return planAndExecute(*this, tasks, budgetSeconds, PlanOrder::OldestFirst, ScanMode::Shared, "stepShared");
}

Status IvfIndex::copyCluster(int64_t cluster, std::vector<float>& vectors,
                             std::vector<int64_t>& ids) const {
  if (cluster < 0 || cluster >= nlist())
    return Status::invalidArgument("copyCluster: cluster " + std::to_string(cluster) +
                                   " is outside this index's clusters 0.." +
                                   std::to_string(nlist() - 1));
  const faiss::InvertedLists* lists = m_impl->index->invlists;
  const size_t c = static_cast<size_t>(cluster);
  const size_t n = lists->list_size(c);
  const size_t d = static_cast<size_t>(dim());
  try {
    faiss::InvertedLists::ScopedCodes codes(lists, c);
    faiss::InvertedLists::ScopedIds listIds(lists, c);
    const auto* x = reinterpret_cast<const float*>(codes.get());  // IVF-Flat codes are the floats
    vectors.assign(x, x + n * d);
    ids.assign(listIds.get(), listIds.get() + n);
  } catch (const std::exception& e) {
    return faissFailure("reading cluster " + std::to_string(cluster), e);
  }
  return Status::ok();
}

Result<SearchResults> IvfIndex::search(std::span<const float> queries, int32_t k,
                                       int64_t nprobe) const {
  RAG_RETURN_IF_ERROR(checkQueries(queries, k, "search"));
  if (nprobe <= 0)
    return Status::invalidArgument("nprobe must be at least 1 (got " + std::to_string(nprobe) +
                                   "); it is the number of clusters a query visits");
  SearchResults r;
  r.n = static_cast<int64_t>(queries.size()) / dim();
  r.k = k;
  r.similarities.resize(static_cast<size_t>(r.n) * static_cast<size_t>(k));
  r.ids.resize(r.similarities.size());
  faiss::SearchParametersIVF params;
  params.nprobe = static_cast<size_t>(std::min(nprobe, nlist()));
  try {
    m_impl->index->search(r.n, queries.data(), k, r.similarities.data(), r.ids.data(), &params);
  } catch (const std::exception& e) {
    return faissFailure("IVF search", e);
  }
  markEmptySlots(r);
  return r;
}

std::vector<uint64_t> IvfIndex::clusterAccessCounts() const {
  std::vector<uint64_t> out(static_cast<size_t>(nlist()));
  for (size_t c = 0; c < out.size(); ++c)
    out[c] = m_impl->accessCounts[c].load(std::memory_order_relaxed);
  return out;
}

void IvfIndex::resetClusterAccessCounts() {
  for (int64_t c = 0; c < nlist(); ++c) m_impl->accessCounts[c].store(0, std::memory_order_relaxed);
}

Result<SearchResults> searchFlat(std::span<const float> vectors, int64_t dim,
                                 std::span<const float> queries, int32_t k) {
  if (dim <= 0)
    return Status::invalidArgument("searchFlat: dimension must be positive (got " +
                                   std::to_string(dim) + ")");
  if (vectors.empty() || vectors.size() % static_cast<size_t>(dim) != 0)
    return Status::invalidArgument("searchFlat: " + std::to_string(vectors.size()) +
                                   " floats are not a non-empty set of " + std::to_string(dim) +
                                   "-dimensional vectors");
  if (queries.empty() || queries.size() % static_cast<size_t>(dim) != 0)
    return Status::invalidArgument("searchFlat: a query of " + std::to_string(queries.size()) +
                                   " floats does not fit " + std::to_string(dim) +
                                   "-dimensional vectors; embed queries with the same embedder");
  if (k <= 0)
    return Status::invalidArgument("searchFlat: k must be at least 1 (got " + std::to_string(k) +
                                   "); ask for one result or more");
  SearchResults r;
  r.n = static_cast<int64_t>(queries.size()) / dim;
  r.k = k;
  r.similarities.resize(static_cast<size_t>(r.n) * static_cast<size_t>(k));
  r.ids.resize(r.similarities.size());
  try {
    faiss::knn_inner_product(queries.data(), vectors.data(), static_cast<size_t>(dim),
                             static_cast<size_t>(r.n), vectors.size() / static_cast<size_t>(dim),
                             static_cast<size_t>(k), r.similarities.data(), r.ids.data());
  } catch (const std::exception& e) {
    return faissFailure("exact search", e);
  }
  markEmptySlots(r);
  return r;
}

}  // namespace rag::retrieval
