#include "retrieval/ivf_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/utils/Heap.h>
#include <faiss/utils/distances.h>
#include <omp.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include "core/clock.h"
#include "core/fs.h"
#include "retrieval/shared_scan.h"

namespace fs = std::filesystem;

namespace rag::retrieval {

namespace {

using FaissId = faiss::Index::idx_t;
static_assert(std::is_same_v<FaissId, int64_t>, "FAISS ids are passed as int64_t");
using IpHeap = faiss::CMin<float, int64_t>;  // FAISS's result heap for inner product

constexpr float kEmptySim = -std::numeric_limits<float>::infinity();

// File layout: header | FAISS write_index payload | trailer. The trailer's length and CRC-32 let
// load() reject a truncated or damaged file before FAISS parses a byte of it.
constexpr char kMagic[8] = {'R', 'A', 'G', 'I', 'V', 'F', '0', '1'};
constexpr char kTrailerMagic[8] = {'R', 'A', 'G', 'I', 'V', 'F', 'E', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kMaxFingerprintBytes = 4096;
constexpr size_t kTrailerBytes = 8 + 4 + 8;  // payload bytes, CRC-32, magic

const char* const kRebuildHint = "rebuild it with `ragraph index build`";

Status faissFailure(std::string_view what, const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return Status::internal(std::string(what) + " ran out of memory; use fewer vectors or a "
                                                "machine with more memory");
  return Status::internal(std::string(what) + " failed inside FAISS: " + e.what());
}

uLong crcOf(uLong crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return crc;
}

// Streams FAISS's serialisation to a FILE while summing its length and CRC-32.
struct ChecksummingWriter : faiss::IOWriter {
  explicit ChecksummingWriter(std::FILE* f) : file(f) { name = "ivf index"; }
  size_t operator()(const void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || nitems == 0) return nitems;  // FAISS writes empty vectors with null data
    const size_t written = std::fwrite(ptr, size, nitems, file);
    crc = crcOf(crc, ptr, written * size);
    bytes += written * size;
    return written;
  }
  std::FILE* file;
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t bytes = 0;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

template <typename T>
bool writePod(std::FILE* f, const T& v) {
  return std::fwrite(&v, sizeof v, 1, f) == 1;
}
template <typename T>
bool readPod(std::FILE* f, T& v) {
  return std::fread(&v, sizeof v, 1, f) == 1;
}

void markEmptySlots(SearchResults& r) {
  for (size_t i = 0; i < r.ids.size(); ++i)
    if (r.ids[i] < 0) r.similarities[i] = kEmptySim;
}

// One timed batch of scans: `visits` (query, cluster) pairs covering `vectors` vectors.
struct CostSample {
  double visits = 0;
  double vectors = 0;
  double seconds = 0;
};

// Least squares seconds = a·visits + b·vectors with a, b >= 0 (the two-variable NNLS: solve
// the normal equations; if a coefficient comes out negative, drop it and refit the other).
ClusterCostModel fitCostModel(const std::vector<CostSample>& samples) {
  ClusterCostModel m;
  m.samples = static_cast<int32_t>(samples.size());
  double uu = 0, uv = 0, vv = 0, ut = 0, vt = 0;
  for (const CostSample& s : samples) {
    uu += s.visits * s.visits, uv += s.visits * s.vectors, vv += s.vectors * s.vectors;
    ut += s.visits * s.seconds, vt += s.vectors * s.seconds;
  }
  const double det = uu * vv - uv * uv;
  if (det > 1e-12 * uu * vv) {
    m.a = (ut * vv - vt * uv) / det;
    m.b = (vt * uu - ut * uv) / det;
  } else {
    m.a = m.b = -1;  // collinear samples: fall through to a one-variable fit
  }
  if (m.a < 0 || m.b < 0) {
    const double bOnly = vv > 0 ? vt / vv : 0;  // a = 0
    const double aOnly = uu > 0 ? ut / uu : 0;  // b = 0
    double errB = 0, errA = 0;
    for (const CostSample& s : samples) {
      errB += (s.seconds - bOnly * s.vectors) * (s.seconds - bOnly * s.vectors);
      errA += (s.seconds - aOnly * s.visits) * (s.seconds - aOnly * s.visits);
    }
    if (errB <= errA) m.a = 0, m.b = std::max(0.0, bOnly);
    else m.a = std::max(0.0, aOnly), m.b = 0;
  }
  return m;
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

struct IvfIndex::Impl {
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

// Times the step's scan (scanAlone: carried heaps, several queries per call, each visiting
// clusters no other query in the call visits, so most reads are cold), and fits
// seconds = a·visits + b·vectors over the calls. The clusters are split by size into four bands
// and each call draws from one band, so that the calls differ in vectors per visit and a and b
// can be told apart. Every call runs twice, in two passes over all calls, and keeps its faster
// time (a preempted run only ever adds time).
ClusterCostModel IvfIndex::Impl::calibrate() const {
  const std::vector<int64_t> clusters = clustersBySize();
  if (clusters.empty()) return {};

  constexpr int kBands = 4, kCallsPerBand = 8, kQueries = 8, kProbes = 8, kPasses = 2;
  constexpr int32_t k = 10;
  struct Call {
    std::vector<float> queries;   // F32 [kQueries, dim]
    std::vector<FaissId> keys;    // I64 [kQueries, probes]
    std::vector<float> coarse;    // F32 [kQueries, probes]
    int64_t probes = 0;
    CostSample sample;
  };
  std::vector<Call> calls;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&rng](uint64_t bound) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (rng * 0x2545F4914F6CDD1Dull >> 11) % bound;
  };
  const size_t bandWidth = (clusters.size() + kBands - 1) / kBands;
  for (int band = 0; band < kBands; ++band) {
    const size_t lo = std::min(clusters.size(), band * bandWidth);
    const size_t hi = std::min(clusters.size(), lo + bandWidth);
    if (lo >= hi) continue;
    for (int c = 0; c < kCallsPerBand; ++c) {
      Call call;
      call.probes = std::min<int64_t>(kProbes, static_cast<int64_t>(hi - lo));
      for (int q = 0; q < kQueries; ++q) {
        // Another random cluster's centroid: a plausible query.
        const float* query = centroid(clusters[next(clusters.size())]);
        call.queries.insert(call.queries.end(), query, query + dim());
        const size_t start = next(hi - lo);  // distinct clusters within one query
        for (int64_t j = 0; j < call.probes; ++j) {
          const int64_t key = clusters[lo + (start + static_cast<size_t>(j)) % (hi - lo)];
          call.keys.push_back(key);
          call.coarse.push_back(faiss::fvec_inner_product(query, centroid(key), dim()));
          call.sample.visits += 1;
          call.sample.vectors += static_cast<double>(listSize(key));
        }
      }
      call.sample.seconds = std::numeric_limits<double>::infinity();
      calls.push_back(std::move(call));
    }
  }

  for (int pass = 0; pass < kPasses; ++pass)
    for (Call& call : calls) {
      Stopwatch w;
      for (int q = 0; q < kQueries; ++q) {
        SearchTask t;
        initTask(t, call.queries.data() + q * dim(), k);
        t.m_clusters.assign(call.keys.begin() + q * call.probes, call.keys.begin() + (q + 1) * call.probes);
        scanAlone(t, static_cast<int32_t>(call.probes), {});
      }
      call.sample.seconds = std::min(call.sample.seconds, w.elapsedSeconds());
    }
  std::vector<CostSample> samples;
  for (const Call& call : calls) samples.push_back(call.sample);
  return fitCostModel(samples);
}

// Times the shared scan kernel the way a shared step uses it and fits SharedScanCostModel: per
// band of cluster sizes (as calibrate()), eight queries each on eight clusters of their own
// gives the first visits (a, b); then all eight on the same eight clusters gives the further
// visits (extra: what those calls took beyond one first visit per cluster). Best of two passes.
SharedScanCostModel IvfIndex::Impl::calibrateShared() const {
  const std::vector<int64_t> clusters = clustersBySize();
  if (clusters.empty()) return {};
  constexpr int kBands = 4, kQueries = 8, kProbes = 8, kPasses = 2;
  const size_t longest = static_cast<size_t>(listSize(clusters.back()));
  std::vector<float> scores(kQueries * longest);
  std::vector<const float*> queries(kQueries);
  std::vector<float*> outs(kQueries);
  for (size_t q = 0; q < kQueries; ++q) {
    queries[q] = centroid(clusters[(q * 7919) % clusters.size()]);  // plausible queries
    outs[q] = scores.data() + q * longest;
  }
  auto rows = [&](int64_t c) {
    faiss::InvertedLists::ScopedCodes codes(index->invlists, static_cast<size_t>(c));
    return reinterpret_cast<const float*>(codes.get());  // array lists: the codes stay put
  };
  std::vector<CostSample> firstVisits;
  struct Shared {
    double visits = 0, vectors = 0, seconds = 0;
  };
  std::vector<Shared> shared;
  const size_t bandWidth = (clusters.size() + kBands - 1) / kBands;
  for (size_t band = 0; band < kBands; ++band) {
    const size_t lo = std::min(clusters.size(), band * bandWidth);
    const size_t hi = std::min(clusters.size(), lo + bandWidth);
    if (lo >= hi) continue;
    const size_t probes = std::min<size_t>(kProbes, hi - lo);
    CostSample alone{.seconds = std::numeric_limits<double>::infinity()};
    Shared together{.seconds = std::numeric_limits<double>::infinity()};
    for (int pass = 0; pass < kPasses; ++pass) {
      Stopwatch w;
      for (size_t q = 0; q < kQueries; ++q)
        for (size_t j = 0; j < probes; ++j) {  // distinct clusters per query: cold reads
          const int64_t c = clusters[lo + (q * probes + j) % (hi - lo)];
          innerProductsShared(&queries[q], &outs[q], 1, rows(c), listSize(c), dim());
          if (pass == 0) alone.visits += 1, alone.vectors += static_cast<double>(listSize(c));
        }
      alone.seconds = std::min(alone.seconds, w.elapsedSeconds());
      Stopwatch w2;
      for (size_t j = hi - probes; j < hi; ++j) {
        innerProductsShared(queries.data(), outs.data(), kQueries, rows(clusters[j]),
                            listSize(clusters[j]), dim());
        if (pass == 0) together.visits += 1, together.vectors += static_cast<double>(listSize(clusters[j]));
      }
      together.seconds = std::min(together.seconds, w2.elapsedSeconds());
    }
    firstVisits.push_back(alone);
    shared.push_back(together);
  }
  const ClusterCostModel fit = fitCostModel(firstVisits);
  SharedScanCostModel m{.a = fit.a, .b = fit.b, .samples = fit.samples};
  double beyond = 0, vectors = 0;
  for (const Shared& s : shared) {
    beyond += s.seconds - (m.a * s.visits + m.b * s.vectors);
    vectors += s.vectors * (kQueries - 1);
  }
  if (vectors > 0) m.extra = std::max(0.0, beyond / vectors);
  return m;
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
                                 uint64_t seed, const ProgressFn& progress) {
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
    ivf->train(n, vectors.data());
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

Status IvfIndex::save(const fs::path& path, std::string_view fingerprint) const {
  if (fingerprint.empty() || fingerprint.size() > kMaxFingerprintBytes)
    return Status::invalidArgument(
        "the embedder fingerprint must be 1 to " + std::to_string(kMaxFingerprintBytes) +
        " bytes (got " + std::to_string(fingerprint.size()) +
        "); pass the fingerprint of the embedder that made the vectors");
  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(path));
  auto failed = [&](std::string why) {
    discardStagedOutput(staged);
    return Status::ioError("cannot write the index to " + staged.temp.string() + ": " + why);
  };
  {
    FilePtr f(std::fopen(staged.temp.c_str(), "wb"));
    if (!f) return failed(std::strerror(errno));
    const uint32_t fpBytes = static_cast<uint32_t>(fingerprint.size());
    bool ok = std::fwrite(kMagic, 1, sizeof kMagic, f.get()) == sizeof kMagic &&
              writePod(f.get(), kFormatVersion) && writePod(f.get(), fpBytes) &&
              std::fwrite(fingerprint.data(), 1, fpBytes, f.get()) == fpBytes;
    if (!ok) return failed(std::strerror(errno));
    ChecksummingWriter writer(f.get());
    try {
      faiss::write_index(m_impl->index.get(), &writer);
    } catch (const std::exception& e) {
      return failed(std::string("FAISS: ") + e.what() + " (disk full?)");
    }
    const uint32_t crc = static_cast<uint32_t>(writer.crc);
    ok = writePod(f.get(), writer.bytes) && writePod(f.get(), crc) &&
         std::fwrite(kTrailerMagic, 1, sizeof kTrailerMagic, f.get()) == sizeof kTrailerMagic &&
         std::fflush(f.get()) == 0 && !std::ferror(f.get());
    if (!ok) return failed(std::string(std::strerror(errno)) + " (disk full?)");
    if (std::fclose(f.release()) != 0) return failed(std::strerror(errno));
  }
  Status s = commitStagedOutput(staged);
  if (!s) discardStagedOutput(staged);
  return s;
}

Result<IvfIndex> IvfIndex::load(const fs::path& path, std::string_view expectedFingerprint) {
  const std::string where = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec))
    return Status::notFound("index file " + where + " does not exist; build it with "
                            "`ragraph index build`");
  const uint64_t fileBytes = fs::file_size(path, ec);
  if (ec) return Status::ioError("cannot read " + where + ": " + ec.message());
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return Status::ioError("cannot open " + where + ": " + std::strerror(errno));

  auto corrupt = [&](const std::string& why) {
    return Status::corrupt("index file " + where + " is damaged (" + why + "); " + kRebuildHint);
  };
  char magic[8];
  uint32_t version = 0, fpBytes = 0;
  if (std::fread(magic, 1, sizeof magic, f.get()) != sizeof magic ||
      std::memcmp(magic, kMagic, sizeof magic) != 0)
    return Status::corrupt(where + " is not a RAGraph IVF index file; " + kRebuildHint);
  if (!readPod(f.get(), version) || !readPod(f.get(), fpBytes)) return corrupt("truncated header");
  if (version != kFormatVersion)
    return Status::schemaMismatch(where + " has index format " + std::to_string(version) +
                                  ", this build reads format " + std::to_string(kFormatVersion) +
                                  "; " + kRebuildHint);
  if (fpBytes > kMaxFingerprintBytes) return corrupt("bad fingerprint length");
  std::string fingerprint(fpBytes, '\0');
  if (std::fread(fingerprint.data(), 1, fpBytes, f.get()) != fpBytes)
    return corrupt("truncated header");
  if (fingerprint != expectedFingerprint)
    return Status::schemaMismatch("index " + where + " was built from the embeddings of '" +
                                  fingerprint + "', not of the current embedder '" +
                                  std::string(expectedFingerprint) + "'; " + kRebuildHint);

  const uint64_t headerBytes = sizeof kMagic + 8 + fpBytes;
  if (fileBytes < headerBytes + kTrailerBytes) return corrupt("truncated");
  uint64_t payloadBytes = 0;
  uint32_t storedCrc = 0;
  char endMagic[8];
  if (std::fseek(f.get(), static_cast<long>(fileBytes - kTrailerBytes), SEEK_SET) != 0 ||
      !readPod(f.get(), payloadBytes) || !readPod(f.get(), storedCrc) ||
      std::fread(endMagic, 1, sizeof endMagic, f.get()) != sizeof endMagic ||
      std::memcmp(endMagic, kTrailerMagic, sizeof endMagic) != 0 ||
      payloadBytes != fileBytes - headerBytes - kTrailerBytes)
    return corrupt("truncated or missing its end marker");

  // Checksum first, so FAISS never parses damaged sizes.
  if (std::fseek(f.get(), static_cast<long>(headerBytes), SEEK_SET) != 0)
    return Status::ioError("cannot seek in " + where);
  {
    std::vector<char> buf(size_t{1} << 20);
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t left = payloadBytes;
    while (left > 0) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      if (std::fread(buf.data(), 1, want, f.get()) != want)
        return Status::ioError("cannot read " + where + ": " + std::strerror(errno));
      crc = crcOf(crc, buf.data(), want);
      left -= want;
    }
    if (static_cast<uint32_t>(crc) != storedCrc) return corrupt("checksum mismatch");
  }

  if (std::fseek(f.get(), static_cast<long>(headerBytes), SEEK_SET) != 0)
    return Status::ioError("cannot seek in " + where);
  std::unique_ptr<faiss::Index> raw;
  try {
    faiss::FileIOReader reader(f.get());
    raw.reset(faiss::read_index(&reader));
  } catch (const std::exception& e) {
    return corrupt(std::string("FAISS cannot parse it: ") + e.what());
  }
  if (static_cast<uint64_t>(std::ftell(f.get())) != headerBytes + payloadBytes)
    return corrupt("the FAISS payload does not end where the trailer says");
  auto* ivf = dynamic_cast<faiss::IndexIVFFlat*>(raw.get());
  if (!ivf) return corrupt("it holds a FAISS index of another type");
  raw.release();
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                       Impl::wrap(std::unique_ptr<faiss::IndexIVFFlat>(ivf), where));
  impl->cost = impl->calibrate();
  impl->sharedCost = impl->calibrateShared();
  return IvfIndex(std::move(impl));
}

// ---- step planning -------------------------------------------------------------------------

namespace {

// Clusters per task for one step, and the step's estimated wall time.
struct StepPlan {
  std::vector<int32_t> take;  // next clusters of live[i] to search
  double estimatedSeconds = 0;
};

// One cluster per task per round, in each task's order, while the estimated wall time (the
// costliest task, or the total over the threads) stays within the budget; every task gets one.
template <typename ClusterCost>
StepPlan planStep(const std::vector<SearchTask*>& live, double budget, int threads,
                  ClusterCost clusterCost) {
  const size_t nt = live.size();
  StepPlan plan;
  plan.take.assign(nt, 1);
  std::vector<double> cost(nt, 0.0);  // each task's estimated single-thread seconds so far
  double total = 0, costliest = 0;
  auto estimate = [&](double tot, double top) { return std::max(top, tot / threads); };
  auto nextCost = [&](size_t i) {
    const SearchTask& t = *live[i];
    return clusterCost(t.clusters()[t.cursor() + static_cast<size_t>(plan.take[i]) - 1]);
  };
  std::vector<size_t> open;
  for (size_t i = 0; i < nt; ++i) {
    cost[i] = nextCost(i);
    total += cost[i];
    costliest = std::max(costliest, cost[i]);
    if (live[i]->clustersLeft() > 1) open.push_back(i);
  }
  while (!open.empty()) {
    size_t kept = 0;
    for (size_t i : open) {
      ++plan.take[i];
      const double c = nextCost(i);
      if (!std::isinf(budget) &&
          estimate(total + c, std::max(costliest, cost[i] + c)) > budget) {
        --plan.take[i];  // does not fit; estimates only grow, so this task is full
        continue;
      }
      cost[i] += c;
      total += c;
      costliest = std::max(costliest, cost[i]);
      if (live[i]->clustersLeft() > static_cast<size_t>(plan.take[i])) open[kept++] = i;
    }
    open.resize(kept);
  }
  plan.estimatedSeconds = estimate(total, costliest);
  return plan;
}

}  // namespace

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
ClusterCostModel IvfIndex::calibrateCostModel() {
  m_impl->sharedCost = m_impl->calibrateShared();
  return m_impl->cost = m_impl->calibrate();
}
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

Status checkBudget(double budgetSeconds) {
  if (std::isnan(budgetSeconds) || budgetSeconds < 0)
    return Status::invalidArgument("step budget must be >= 0 seconds (got " +
                                   std::to_string(budgetSeconds) +
                                   "); 0 advances every task by one cluster, +infinity finishes "
                                   "them all");
  return Status::ok();
}

// A step's arguments checked, and its tasks that are not done yet, in the order given.
Result<std::vector<SearchTask*>> unfinishedTasks(std::span<SearchTask* const> tasks,
                                                 double budgetSeconds, int64_t d, int64_t nlist,
                                                 const char* what) {
  RAG_RETURN_IF_ERROR(checkBudget(budgetSeconds));
  RAG_RETURN_IF_ERROR(checkStepTasks(tasks, d, nlist, what));
  std::vector<SearchTask*> live;
  for (SearchTask* t : tasks)
    if (!t->done()) live.push_back(t);
  return live;
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

Result<StepStats> IvfIndex::step(std::span<SearchTask* const> tasks, double budgetSeconds) const {
  RAG_ASSIGN_OR_RETURN(std::vector<SearchTask*> live,
                       unfinishedTasks(tasks, budgetSeconds, dim(), nlist(), "step"));
  if (live.empty()) return StepStats{};
  const ClusterCostModel& model = m_impl->cost;
  const StepPlan plan = retrieval::planStep(live, budgetSeconds, std::max(1, omp_get_max_threads()),
                                 [&](int64_t cluster) { return model.seconds(m_impl->listSize(cluster)); });
  RAG_ASSIGN_OR_RETURN(StepStats stats, m_impl->runPlanned(live, plan.take, {}));
  stats.estimatedSeconds = plan.estimatedSeconds;
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

Result<StepStats> IvfIndex::stepShared(std::span<SearchTask* const> tasks,
                                       double budgetSeconds) const {
  RAG_ASSIGN_OR_RETURN(std::vector<SearchTask*> live,
                       unfinishedTasks(tasks, budgetSeconds, dim(), nlist(), "stepShared"));
  if (live.empty()) return StepStats{};
  // Plan: whole remaining searches in the given order, cluster by cluster, while the estimated
  // cost fits the budget on the search threads; a cluster some earlier task of the step visits
  // costs only its further-visit price.
  const int threads = std::max(1, omp_get_max_threads());
  const double capacity = budgetSeconds * threads;
  const SharedScanCostModel& model = m_impl->sharedCost;
  std::vector<int32_t> visitors(static_cast<size_t>(nlist()), 0);
  std::vector<int32_t> take(live.size(), 0);
  double total = 0;
  bool full = false;
  for (size_t i = 0; i < live.size() && !full; ++i) {
    const SearchTask& t = *live[i];
    for (size_t j = t.cursor(); j < t.clusters().size(); ++j) {
      const int64_t c = t.clusters()[j];
      const int64_t n = m_impl->listSize(c);
      const double cost = visitors[static_cast<size_t>(c)] == 0 ? model.firstSeconds(n) : model.extraSeconds(n);
      if (take[0] > 0 && total + cost > capacity) {
        full = true;
        break;
      }
      total += cost;
      ++visitors[static_cast<size_t>(c)];
      ++take[i];
    }
  }
  std::vector<SearchTask*> planned;
  std::vector<int32_t> plannedTake;
  for (size_t i = 0; i < live.size(); ++i)
    if (take[i] > 0) planned.push_back(live[i]), plannedTake.push_back(take[i]);
  RAG_ASSIGN_OR_RETURN(StepStats stats, m_impl->runShared(planned, plannedTake));
  stats.estimatedSeconds = total / threads;
  return stats;
}

Result<std::vector<int32_t>> IvfIndex::planStep(std::span<SearchTask* const> tasks,
                                                double budgetSeconds) const {
  RAG_ASSIGN_OR_RETURN(std::vector<SearchTask*> live,
                       unfinishedTasks(tasks, budgetSeconds, dim(), nlist(), "planStep"));
  std::vector<int32_t> take(tasks.size(), 0);
  if (live.empty()) return take;
  const ClusterCostModel& model = m_impl->cost;
  const StepPlan plan = retrieval::planStep(live, budgetSeconds, std::max(1, omp_get_max_threads()),
                                 [&](int64_t cluster) { return model.seconds(m_impl->listSize(cluster)); });
  for (size_t i = 0, j = 0; i < tasks.size(); ++i)
    if (!tasks[i]->done()) take[i] = plan.take[j++];
  return take;
}

Result<StepStats> IvfIndex::stepPlanned(std::span<SearchTask* const> tasks,
                                        std::span<const int32_t> take,
                                        std::span<const uint8_t> elsewhere) const {
  RAG_RETURN_IF_ERROR(checkStepTasks(tasks, dim(), nlist(), "stepPlanned"));
  if (take.size() != tasks.size())
    return Status::invalidArgument("stepPlanned: " + std::to_string(take.size()) +
                                   " cluster counts for " + std::to_string(tasks.size()) +
                                   " tasks; give one count per task");
  if (!elsewhere.empty() && static_cast<int64_t>(elsewhere.size()) != nlist())
    return Status::invalidArgument("stepPlanned: the device mask has " +
                                   std::to_string(elsewhere.size()) + " entries, the index " +
                                   std::to_string(nlist()) + " clusters");
  std::vector<SearchTask*> live;
  std::vector<int32_t> liveTake;
  double total = 0, costliest = 0;
  const ClusterCostModel& model = m_impl->cost;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (take[i] < 0 || static_cast<size_t>(take[i]) > tasks[i]->clustersLeft())
      return Status::invalidArgument("stepPlanned: task " + std::to_string(i) + " has " +
                                     std::to_string(tasks[i]->clustersLeft()) +
                                     " clusters left, asked for " + std::to_string(take[i]));
    if (take[i] == 0) continue;
    const SearchTask& t = *tasks[i];
    double c = 0;
    for (size_t j = t.cursor(); j < t.cursor() + static_cast<size_t>(take[i]); ++j)
      if (elsewhere.empty() || !elsewhere[static_cast<size_t>(t.clusters()[j])])
        c += model.seconds(m_impl->listSize(t.clusters()[j]));
    live.push_back(tasks[i]);
    liveTake.push_back(take[i]);
    total += c;
    costliest = std::max(costliest, c);
  }
  if (live.empty()) return StepStats{};
  RAG_ASSIGN_OR_RETURN(StepStats stats, m_impl->runPlanned(live, liveTake, elsewhere));
  stats.estimatedSeconds = std::max(costliest, total / std::max(1, omp_get_max_threads()));
  return stats;
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
