// IVF index with step-wise search (HedraRAG §4.2 and §5): a FAISS IndexIVFFlat with inner
// product, whose search can be cut into sub-stages of a few clusters each.
//
// A SearchTask is one query's retrieval: the clusters to visit, in order (the coarse quantizer's
// nprobe nearest centroids, or an order a caller chose), a cursor into them, and a top-k heap that
// persists from one step to the next. IvfIndex::step() advances many tasks in one batched call,
// each by as many clusters as fit a time budget under a per-cluster cost model
// (seconds ≈ a + b · list_size, fitted when the index is built or loaded), and the partial top-k is
// readable after any step:
//
//   RAG_ASSIGN_OR_RETURN(IvfIndex index, IvfIndex::load(path, embedder.fingerprint()));
//   RAG_ASSIGN_OR_RETURN(std::vector<SearchTask> tasks, index.makeTasks(queries, /*k=*/5, /*nprobe=*/64));
//   std::vector<SearchTask*> live = ...;  // &tasks[i], and other requests' tasks
//   while (any task in live is not done()) {
//     RAG_ASSIGN_OR_RETURN(StepStats s, index.step(live, /*budgetSeconds=*/0.002));
//     ... tasks[i].topK() is the best of the clusters searched so far ...
//   }
//
// Underneath, a step scans each task's next clusters with the scan kernel of
// retrieval/shared_scan.h (one query per row read; stepShared reads a cluster once for every task
// that visits it) and offers the rows that could enter the top-k to the task's FAISS heap,
// rescored with FAISS's own fvec_inner_product in FAISS's row order, so the heaps carry over
// between steps and stepping a task to the end gives exactly what IndexIVF::search returns for
// the same clusters. Every serving policy searches through this one kernel; search() is FAISS's
// own IndexIVF::search, the reference the tests compare steps with.
//
// Threads: step(), search() and makeTask*() are const and may run concurrently from several
// threads, as long as no task is in two calls at once (calibrateCostModel and setCostModel may
// not overlap them). A step spreads its tasks over OpenMP's threads (omp_get_max_threads(), the
// pool FAISS itself uses), as IndexIVF::search does with its queries. FAISS headers stay in
// ivf_index.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/progress.h"
#include "rag/status.h"

namespace rag::retrieval {

struct SubStagePlan;  // retrieval/substage_planner.h

struct SearchHit {
  int64_t id = -1;          // row of the vector in the data the index was built from
  float similarity = 0.0f;  // inner product with the query
};

// Results of a batched search: n rows of k slots, each row best first. Slots that no vector
// filled (fewer than k vectors in the clusters searched) have id -1 and come last.
struct SearchResults {
  int64_t n = 0;
  int32_t k = 0;
  std::vector<float> similarities;  // F32 [n, k]
  std::vector<int64_t> ids;         // I64 [n, k]

  // Row i without its empty slots.
  std::vector<SearchHit> row(int64_t i) const;
};

// Estimated single-thread seconds for one query to scan one cluster inside a batched step:
// a + b · list_size. Fitted from timed scans shaped like steps (several
// queries, each on its own clusters), so a is the per-visit cost, not a per-call overhead.
struct ClusterCostModel {
  double a = 0.0;  // seconds per cluster visit (list set-up, heap bookkeeping)
  double b = 0.0;  // seconds per vector in the cluster
  int32_t samples = 0;  // timed calls behind the fit (0: not calibrated)

  double seconds(int64_t listSize) const { return a + b * static_cast<double>(listSize); }
};

// Estimated single-thread seconds of a shared step (IvfIndex::stepShared), where the searches of
// a step that visit the same cluster read its vectors once: the first visit of a cluster in a
// step costs a + b · list_size, each further visit of it in the same step extra · list_size (the
// rows are read once per four queries and are warm in cache). Fitted by timing the scan kernel.
struct SharedScanCostModel {
  double a = 0.0;
  double b = 0.0;
  double extra = 0.0;
  int32_t samples = 0;  // timed calls behind the fit (0: not calibrated)

  double firstSeconds(int64_t listSize) const { return a + b * static_cast<double>(listSize); }
  double extraSeconds(int64_t listSize) const { return extra * static_cast<double>(listSize); }
};

// One query's step-wise search. Made by IvfIndex::makeTask/makeTasks; advanced by
// IvfIndex::step. Movable and cheap to keep per request.
class SearchTask {
public:
  int64_t dim() const { return static_cast<int64_t>(m_query.size()); }
  int32_t k() const { return static_cast<int32_t>(m_heapIds.size()); }
  std::span<const float> query() const { return m_query; }
  // Clusters to visit, in visiting order; the first cursor() of them have been searched.
  const std::vector<int64_t>& clusters() const { return m_clusters; }
  size_t cursor() const { return m_cursor; }
  size_t clustersLeft() const { return m_clusters.size() - m_cursor; }
  bool done() const { return m_cursor >= m_clusters.size(); }
  // Vectors compared with the query so far.
  int64_t vectorsScanned() const { return m_vectorsScanned; }

  // The best hits among the clusters searched so far, best first (at most k; empty before the
  // first step).
  std::vector<SearchHit> topK() const;

  // Merges hits found outside IvfIndex (the GPU cluster cache scanning some of this task's
  // clusters, retrieval/cluster_cache.h) into the top-k, as if a step had scanned them: a hit
  // enters when its similarity beats the current k-th (FAISS's rule). sims and ids have equal
  // length; slots with id < 0 are empty and skipped. The hits must come from clusters of this
  // task that no step scans on the CPU (IvfIndex::execute's `elsewhere`), or one vector
  // could appear twice.
  void mergeHits(std::span<const float> sims, std::span<const int64_t> ids);

private:
  friend class IvfIndex;
  std::vector<float> m_query;       // F32 [dim]
  std::vector<int64_t> m_clusters;  // I64 [n_clusters], visiting order
  size_t m_cursor = 0;
  int64_t m_vectorsScanned = 0;
  // FAISS min-heap of the k best similarities (worst at [0]). Empty slots hold -infinity with
  // id -1: for inner product a +infinity start would never be displaced and return nothing.
  std::vector<float> m_heapSims;    // F32 [k]
  std::vector<int64_t> m_heapIds;   // I64 [k]
};

// What one step did.
struct StepStats {
  int32_t tasksAdvanced = 0;
  int64_t clustersSearched = 0;  // (task, cluster) visits
  int64_t clustersRead = 0;      // distinct clusters read: fewer than the visits in a shared step
  int64_t vectorsScanned = 0;
  double estimatedSeconds = 0.0;  // the cost model's wall-time estimate for the planned work
  double seconds = 0.0;           // measured wall time of the search itself
};

class IvfIndex {
public:
  // About 4·sqrt(n), rounded to a power of two (1024 for 131k vectors), and small enough that
  // k-means sees at least 39 vectors per centroid (FAISS warns below that); at least 1.
  static int64_t defaultNlist(int64_t n);

  // Trains the coarse quantizer (spherical k-means, FAISS defaults, seeded) on `vectors`
  // (row-major, size n * dim) and adds them with ids 0..n-1, then calibrates the cost model.
  // The similarity is the plain inner product. With 0 < clusterDims < dim the k-means sees only
  // each vector's first clusterDims components (unit-norm there) and the centroids are 0 in the
  // rest, so a query's clusters are ranked by that part alone while every scan still scores whole
  // vectors: an embedder whose vectors append a lexical bag (model/lexical_words.h) clusters by
  // its dense part, as its questions (few words, short bags) are probed by it. Measured with the
  // first rag-embedder-lex (weight 0.03, stopwords kept) over the 131,666 passages and 1,000 test
  // questions, recall@5 at nprobe 32 / 128 /
  // 256 / 512: 0.763 / 0.880 / 0.917 / 0.960 clustered by the 256 dense components, 0.716 /
  // 0.868 / 0.918 / 0.954 clustered whole: better early steps, the same at the calibrated nprobe.
  static Result<IvfIndex> build(std::span<const float> vectors, int64_t dim, int64_t nlist,
                                uint64_t seed, const ProgressFn& progress = {}, int64_t clusterDims = 0);

  // Writes the index and `fingerprint` (which embedder made the vectors) to a temp file beside
  // `path`, then renames it over `path`. The file carries a checksum.
  Status save(const std::filesystem::path& path, std::string_view fingerprint) const;
  // Reads an index written by save(). NotFound for a missing file, Corrupt for a damaged one,
  // SchemaMismatch when it was built by another embedder than `expectedFingerprint`.
  static Result<IvfIndex> load(const std::filesystem::path& path,
                               std::string_view expectedFingerprint);

  IvfIndex(IvfIndex&&) noexcept;
  IvfIndex& operator=(IvfIndex&&) noexcept;
  ~IvfIndex();

  int64_t dim() const;
  int64_t nlist() const;
  int64_t size() const;  // vectors indexed
  int64_t listSize(int64_t cluster) const;
  // The cluster of every indexed vector, by id (0..size()-1): H_v of a result set.
  std::vector<int32_t> clusterOfIds() const;
  std::vector<int64_t> listSizes() const;

  // A task over the query's min(nprobe, nlist) nearest clusters, nearest first.
  Result<SearchTask> makeTask(std::span<const float> query, int32_t k, int64_t nprobe) const;
  // A task over clusters in the caller's order (e.g. reordered by similarity to a previous
  // query). Ids must be distinct and in [0, nlist).
  Result<SearchTask> makeTask(std::span<const float> query, int32_t k,
                              std::span<const int64_t> clusters) const;
  // One task per row of `queries` (size n * dim); the coarse quantizer runs over the queries
  // in thread slices, as in IndexIVF::search, so the cluster lists are the ones it would use.
  Result<std::vector<SearchTask>> makeTasks(std::span<const float> queries, int32_t k,
                                            int64_t nprobe) const;

  // Runs one sub-stage plan (retrieval/substage_planner.h: planSubStage) over `tasks`, in one
  // batched call: tasks[i] advances by exactly plan.take[i] of its next clusters. Alone: each
  // task scans its clusters on its own, the tasks spread over the search threads; clusters c
  // with elsewhere[c] != 0 (`elsewhere` empty or nlist() entries) are not scanned here but count
  // as visited (cursor, vectorsScanned, access counts): the caller scans them on another device
  // and merges the hits with SearchTask::mergeHits, and StepStats counts the CPU part only.
  // Shared: each cluster the step visits is read once for every task visiting it
  // (retrieval/shared_scan.h), and rows that could enter a task's top-k are rescored with
  // FAISS's own kernel in the task's visiting order. Either way every heap ends bit-identical to
  // FAISS's search over the same clusters. InvalidArgument for a plan of other tasks, a take
  // beyond a task's clusters, a device mask with a shared scan, a task of another dimension or
  // index, or one task listed twice.
  Result<StepStats> execute(std::span<SearchTask* const> tasks, const SubStagePlan& plan,
                            std::span<const uint8_t> elsewhere = {}) const;
  // The threads a step runs on (FAISS's OpenMP threads on the calling thread): what plans use.
  static int searchThreads();
  // planSubStage + execute: RoundRobin order, Alone scans (every unfinished task advances by at
  // least one cluster; 0 is allowed, +infinity finishes every task).
  Result<StepStats> step(std::span<SearchTask* const> tasks, double budgetSeconds) const;
  // planSubStage + execute: OldestFirst order (the order given), Shared scans.
  Result<StepStats> stepShared(std::span<SearchTask* const> tasks, double budgetSeconds) const;

  // A copy of cluster c's vectors (F32 [listSize(c), dim]) and their ids (I64 [listSize(c)]), for
  // uploading it to a device. InvalidArgument for a cluster out of range.
  Status copyCluster(int64_t cluster, std::vector<float>& vectors, std::vector<int64_t>& ids) const;

  // FAISS's own IndexIVF::search over each query's min(nprobe, nlist) nearest clusters: the
  // reference step() is compared with. nprobe = nlist makes it exact.
  Result<SearchResults> search(std::span<const float> queries, int32_t k, int64_t nprobe) const;

  // The fitted per-cluster cost (single thread); refit with calibrateCostModel() when the machine
  // is quieter, or set one (tests, a scheduler's measured model).
  const ClusterCostModel& costModel() const;
  ClusterCostModel calibrateCostModel();  // also refits sharedCostModel()
  void setCostModel(const ClusterCostModel& model);
  const SharedScanCostModel& sharedCostModel() const;

  // How often step() has visited each cluster (one count per task and cluster), for the heatmap
  // and the GPU cluster cache. Relaxed atomics: cheap, and exact once the steps have returned.
  std::vector<uint64_t> clusterAccessCounts() const;
  void resetClusterAccessCounts();

private:
  struct Impl;
  explicit IvfIndex(std::unique_ptr<Impl> impl);
  Status checkQueries(std::span<const float> queries, int32_t k, const char* what) const;
  std::unique_ptr<Impl> m_impl;
};

// Exact top-k by inner product of each query (size nq * dim) against `vectors` (size n * dim),
// with FAISS's brute-force kernel (what IndexFlatIP runs), reading the vectors in place: the
// ground truth for recall. Ids are rows of `vectors`.
Result<SearchResults> searchFlat(std::span<const float> vectors, int64_t dim,
                                 std::span<const float> queries, int32_t k);

}  // namespace rag::retrieval
