// The IVF index's step-wise search: stepping a task through its clusters, in any chunking and
// batched with other tasks, must end exactly where FAISS's own search() ends over the same
// clusters; the budget planner, counters, file format and error messages are checked too.
#include <QtTest>

#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "../fixtures/retrieval/clustered_vectors.h"
#include "retrieval/ivf_index.h"
#include "retrieval/substage_planner.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;
using rag::testing::clusteredVectors;

namespace {

constexpr int64_t kDim = 32;
constexpr int64_t kNlist = 64;
const char* const kFingerprint = "test-embedder-v1";

std::vector<SearchTask*> pointers(std::vector<SearchTask>& tasks) {
  std::vector<SearchTask*> out;
  for (SearchTask& t : tasks) out.push_back(&t);
  return out;
}

// Same ids in the same order and similarities within 1e-5.
bool sameHits(const std::vector<SearchHit>& a, const std::vector<SearchHit>& b) {
  if (a.size() != b.size()) {
    qWarning("%zu hits vs %zu", a.size(), b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || std::abs(a[i].similarity - b[i].similarity) > 1e-5f) {
      qWarning("hit %zu: id %lld (%.7f) vs id %lld (%.7f)", i, static_cast<long long>(a[i].id),
               a[i].similarity, static_cast<long long>(b[i].id), b[i].similarity);
      return false;
    }
  return true;
}

}  // namespace

class TestIvfIndex : public QObject {
  Q_OBJECT

  std::vector<float> m_data;     // F32 [20000, 32]
  std::vector<float> m_queries;  // F32 [40, 32], near the data
  std::optional<IvfIndex> m_index;

  std::span<const float> query(int64_t i) const {
    return std::span<const float>(m_queries).subspan(static_cast<size_t>(i * kDim), kDim);
  }
  int64_t queryCount() const { return static_cast<int64_t>(m_queries.size()) / kDim; }

  // Steps `t` to the end with the given budgets in turn (repeating the last), checking that
  // the partial top-k stays sorted and only improves.
  bool stepToEnd(SearchTask& t, std::vector<double> budgets) {
    float kth = -std::numeric_limits<float>::infinity();
    for (size_t s = 0; !t.done(); ++s) {
      SearchTask* one[] = {&t};
      auto r = m_index->step(one, budgets[std::min(s, budgets.size() - 1)]);
      if (!r) {
        qWarning("%s", r.status().toString().c_str());
        return false;
      }
      std::vector<SearchHit> hits = t.topK();
      for (size_t i = 1; i < hits.size(); ++i)
        if (hits[i - 1].similarity < hits[i].similarity) return false;
      if (static_cast<int32_t>(hits.size()) == t.k()) {
        if (hits.back().similarity < kth) return false;
        kth = hits.back().similarity;
      }
    }
    return true;
  }

private Q_SLOTS:
  void initTestCase() {
    m_data = clusteredVectors(20000, kDim, 80, 7);
    // Queries: data points nudged off their position.
    std::mt19937_64 rng(11);
    std::normal_distribution<float> g;
    for (int64_t i = 0; i < 40; ++i) {
      const int64_t row = (i * 487) % 20000;
      for (int64_t j = 0; j < kDim; ++j)
        m_queries.push_back(m_data[static_cast<size_t>(row * kDim + j)] + 0.05f * g(rng));
    }
    auto built = IvfIndex::build(m_data, kDim, kNlist, 42);
    QVERIFY2(built.isOk(), built.status().toString().c_str());
    m_index.emplace(std::move(built).value());
    QCOMPARE(m_index->dim(), kDim);
    QCOMPARE(m_index->nlist(), kNlist);
    QCOMPARE(m_index->size(), int64_t{20000});
  }

  void defaultNlistIsAboutFourRootN() {
    QCOMPARE(IvfIndex::defaultNlist(131072), int64_t{1024});
    QCOMPARE(IvfIndex::defaultNlist(130000), int64_t{1024});
    QCOMPARE(IvfIndex::defaultNlist(20000), int64_t{512});
    QCOMPARE(IvfIndex::defaultNlist(1000000), int64_t{4096});
    QCOMPARE(IvfIndex::defaultNlist(100), int64_t{2});  // >= 39 vectors per centroid
    QCOMPARE(IvfIndex::defaultNlist(10), int64_t{1});
  }

  void costModelIsFittedAndNonNegative() {
    const ClusterCostModel& m = m_index->costModel();
    QVERIFY(m.samples > 0);
    QVERIFY(std::isfinite(m.a) && m.a >= 0);
    QVERIFY(std::isfinite(m.b) && m.b >= 0);
    QVERIFY(m.a > 0 || m.b > 0);  // something was measured
  }

  void fullNprobeEqualsExactSearch() {
    auto ivf = m_index->search(std::span<const float>(m_queries).first(10 * kDim), 10, kNlist);
    QVERIFY2(ivf.isOk(), ivf.status().toString().c_str());
    auto flat = searchFlat(m_data, kDim, std::span<const float>(m_queries).first(10 * kDim), 10);
    QVERIFY2(flat.isOk(), flat.status().toString().c_str());
    for (int64_t i = 0; i < 10; ++i) QVERIFY(sameHits(ivf->row(i), flat->row(i)));
  }

  void stepOneClusterAtATimeEqualsFaissSearch() {
    m_index->setCostModel({.a = 1e-6, .b = 1e-8, .samples = 1});  // budget 0: one cluster a step
    for (int64_t q = 0; q < queryCount(); ++q) {
      auto task = m_index->makeTask(query(q), 10, 8);
      QVERIFY2(task.isOk(), task.status().toString().c_str());
      QCOMPARE(task->clusters().size(), size_t{8});
      QVERIFY(task->topK().empty());
      int steps = 0;
      while (!task->done()) {
        SearchTask* one[] = {&*task};
        auto s = m_index->step(one, 0.0);
        QVERIFY2(s.isOk(), s.status().toString().c_str());
        QCOMPARE(s->clustersSearched, int64_t{1});
        QCOMPARE(task->cursor(), size_t(++steps));
        QVERIFY(!task->topK().empty());  // partial results after every step
      }
      QCOMPARE(steps, 8);
      auto faiss = m_index->search(query(q), 10, 8);
      QVERIFY2(faiss.isOk(), faiss.status().toString().c_str());
      QVERIFY(sameHits(task->topK(), faiss->row(0)));
      QCOMPARE(task->topK().size(), size_t{10});
    }
    m_index->calibrateCostModel();
  }

  void arbitraryChunkingGivesTheSameResult() {
    // One task, 1 s per cluster: a budget of B seconds takes max(1, floor(B)) clusters.
    m_index->setCostModel({.a = 1.0, .b = 0.0, .samples = 1});
    const std::vector<std::vector<double>> plans = {
        {0.0}, {2.5}, {1.0, 4.2, 0.0, 3.0}, {7.9, 1.5}, {std::numeric_limits<double>::infinity()}};
    for (int64_t q = 0; q < 12; ++q) {
      auto faiss = m_index->search(query(q), 10, 24);
      QVERIFY(faiss.isOk());
      for (const auto& plan : plans) {
        auto task = m_index->makeTask(query(q), 10, 24);
        QVERIFY(task.isOk());
        if (q == 0) {  // the planner takes exactly floor(B) clusters
          SearchTask probe = *task;
          SearchTask* one[] = {&probe};
          for (double b : plan) {
            const size_t before = probe.cursor();
            auto s = m_index->step(one, b);
            QVERIFY(s.isOk());
            const size_t want = std::min<size_t>(
                24 - before, std::isinf(b) ? 24 : std::max<size_t>(1, static_cast<size_t>(b)));
            QCOMPARE(probe.cursor() - before, want);
            QCOMPARE(s->estimatedSeconds, static_cast<double>(want));
            if (probe.done()) break;
          }
        }
        QVERIFY(stepToEnd(*task, plan));
        QVERIFY(sameHits(task->topK(), faiss->row(0)));
      }
    }
    m_index->calibrateCostModel();
  }

  // Vectors whose tail has a structure of its own, longer than the head and unrelated to it (an
  // embedder's lexical bags: a passage's words, shared by passages of any topic), while a query's
  // tail is short (a question's few words): clustered by their first components, the clusters
  // are the heads' topics and nprobe 2 finds a query's neighbour; clustered whole, the tails
  // decide the clusters and the queries, which probe by their heads, look in mixed ones. Scans
  // score whole vectors either way (at nprobe = nlist both equal exact search).
  void clusteringTheFirstComponentsIgnoresAnUnrelatedTail() {
    const int64_t head = 16, tail = 64, dim = head + tail, n = 6000, nlist = 32, styles = 8;
    const std::vector<float> dense = clusteredVectors(n, head, 32, 3);
    const std::vector<float> style = clusteredVectors(styles, tail, styles, 4);  // unit rows
    std::mt19937_64 rng(5);
    std::normal_distribution<float> noise(0.0f, 0.05f), queryNoise(0.0f, 0.04f);
    std::vector<float> data(static_cast<size_t>(n * dim)), queries;
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(dense.data() + i * head, head, data.data() + i * dim);
      const int64_t st = static_cast<int64_t>(rng() % styles);
      for (int64_t j = 0; j < tail; ++j)
        data[static_cast<size_t>(i * dim + head + j)] = 1.5f * style[static_cast<size_t>(st * tail + j)] + noise(rng);
    }
    const int64_t nq = 100;
    for (int64_t q = 0; q < nq; ++q) {  // row 60q's head, a short tail of its own
      queries.insert(queries.end(), dense.data() + q * 60 * head, dense.data() + (q * 60 + 1) * head);
      for (int64_t j = head; j < dim; ++j) queries.push_back(queryNoise(rng));
    }
    auto byHead = IvfIndex::build(data, dim, nlist, 1, {}, head);
    auto whole = IvfIndex::build(data, dim, nlist, 1);
    QVERIFY2(byHead.isOk(), byHead.status().toString().c_str());
    QVERIFY2(whole.isOk(), whole.status().toString().c_str());
    auto found = [&](const IvfIndex& idx) {
      auto r = idx.search(queries, 10, 2);
      int hits = 0;
      for (int64_t q = 0; q < nq; ++q)
        for (const SearchHit& h : r->row(q)) hits += h.id == q * 60;
      return hits;
    };
    auto exact = searchFlat(data, dim, queries, 10);
    QVERIFY(exact.isOk());
    int reachable = 0;
    for (int64_t q = 0; q < nq; ++q)
      for (const SearchHit& h : exact->row(q)) reachable += h.id == q * 60;
    const int a = found(*byHead), b = found(*whole);
    qInfo("neighbour in the top 10 at nprobe 2: %d of %d clustered by the head, %d whole", a, reachable, b);
    QVERIFY(a >= reachable * 9 / 10);
    QVERIFY(a >= b + 15);
    auto all = byHead->search(queries, 10, nlist);
    QVERIFY(all.isOk());
    for (int64_t q = 0; q < nq; ++q) QVERIFY(sameHits(all->row(q), exact->row(q)));
    QVERIFY(!IvfIndex::build(data, dim, nlist, 1, {}, dim + 1));
  }

  void allNegativeSimilaritiesStillFillTopK() {
    // Every vector has positive components and every query negative ones, so every similarity
    // is negative: a heap started at +infinity (instead of -infinity) would return nothing.
    std::vector<float> pos = clusteredVectors(3000, 16, 10, 3);
    for (float& v : pos) v = std::abs(v) + 1e-3f;
    auto idx = IvfIndex::build(pos, 16, 8, 5);
    QVERIFY2(idx.isOk(), idx.status().toString().c_str());
    idx->setCostModel({.a = 1e-6, .b = 0.0, .samples = 1});
    std::vector<float> q(pos.begin(), pos.begin() + 16);
    for (float& v : q) v = -v;
    auto task = idx->makeTask(q, 5, 8);
    QVERIFY(task.isOk());
    SearchTask* one[] = {&*task};
    QVERIFY(idx->step(one, 0.0).isOk());
    std::vector<SearchHit> partial = task->topK();
    QCOMPARE(partial.size(), size_t{5});  // the first cluster alone has more than 5 vectors
    for (const SearchHit& h : partial) QVERIFY(h.similarity < 0 && h.id >= 0);
    while (!task->done()) QVERIFY(idx->step(one, 0.0).isOk());
    auto exact = searchFlat(pos, 16, q, 5);
    QVERIFY(exact.isOk());
    QVERIFY(sameHits(task->topK(), exact->row(0)));
    auto faiss = idx->search(q, 5, 8);
    QVERIFY(faiss.isOk());
    QVERIFY(sameHits(task->topK(), faiss->row(0)));
  }

  void manyTasksInOneCallEqualOneByOne() {
    const std::span<const float> qs(m_queries);
    auto a10 = m_index->makeTasks(qs, 10, 16);
    auto a5 = m_index->makeTasks(qs.first(20 * kDim), 5, 16);  // mixed k in one call
    QVERIFY(a10.isOk() && a5.isOk());
    QCOMPARE(a10->size(), size_t(queryCount()));
    std::vector<SearchTask> batched = *a10;
    batched.insert(batched.end(), a5->begin(), a5->end());
    std::vector<SearchTask> single = batched;
    std::vector<SearchTask> midBudget = batched;

    std::vector<SearchTask*> all = pointers(batched);
    auto s = m_index->step(all, std::numeric_limits<double>::infinity());
    QVERIFY2(s.isOk(), s.status().toString().c_str());
    QCOMPARE(s->tasksAdvanced, static_cast<int32_t>(batched.size()));
    QCOMPARE(s->clustersSearched, static_cast<int64_t>(batched.size()) * 16);
    for (const SearchTask& t : batched) QVERIFY(t.done());

    for (SearchTask& t : single) QVERIFY(stepToEnd(t, {0.0}));

    // A budget of a few clusters' cost: several batched steps of uneven sizes.
    std::vector<SearchTask*> mid = pointers(midBudget);
    const double budget = 3 * m_index->costModel().seconds(20000 / kNlist) *
                          static_cast<double>(midBudget.size());
    int steps = 0;
    while (std::any_of(midBudget.begin(), midBudget.end(), [](auto& t) { return !t.done(); })) {
      QVERIFY(m_index->step(mid, budget).isOk());
      QVERIFY(++steps <= 16);
    }

    for (size_t i = 0; i < batched.size(); ++i) {
      QVERIFY(sameHits(batched[i].topK(), single[i].topK()));
      QVERIFY(sameHits(batched[i].topK(), midBudget[i].topK()));
    }
    // And against FAISS, one query at a time (the same coarse-quantizer path as makeTask).
    for (int64_t q = 0; q < 5; ++q) {
      auto faiss = m_index->search(query(q), 10, 16);
      auto task = m_index->makeTask(query(q), 10, 16);
      QVERIFY(faiss.isOk() && task.isOk());
      QVERIFY(task->clusters() == batched[static_cast<size_t>(q)].clusters());
      QVERIFY(sameHits(batched[static_cast<size_t>(q)].topK(), faiss->row(0)));
    }
  }

  void tinyBudgetAdvancesEveryTaskByOne() {
    m_index->setCostModel({.a = 2e-7, .b = 1e-9, .samples = 1});  // any positive cost
    auto made = m_index->makeTasks(m_queries, 10, 8);
    QVERIFY(made.isOk());
    std::vector<SearchTask*> all = pointers(*made);
    for (double budget : {0.0, 1e-12}) {
      const std::vector<SearchTask> before = *made;
      auto s = m_index->step(all, budget);
      QVERIFY(s.isOk());
      QCOMPARE(s->tasksAdvanced, static_cast<int32_t>(all.size()));
      QCOMPARE(s->clustersSearched, static_cast<int64_t>(all.size()));
      for (size_t i = 0; i < all.size(); ++i) QCOMPARE(all[i]->cursor(), before[i].cursor() + 1);
    }
    // Finished tasks are skipped, not an error.
    for (SearchTask* t : all)
      while (!t->done()) {
        SearchTask* one[] = {t};
        QVERIFY(m_index->step(one, 1.0).isOk());
      }
    auto s = m_index->step(all, 0.0);
    QVERIFY(s.isOk());
    QCOMPARE(s->tasksAdvanced, 0);
    m_index->calibrateCostModel();
  }

  void countersCountVisits() {
    m_index->setCostModel({.a = 2e-7, .b = 1e-9, .samples = 1});  // budget 0: one cluster a step
    m_index->resetClusterAccessCounts();
    for (uint64_t c : m_index->clusterAccessCounts()) QCOMPARE(c, uint64_t{0});
    auto made = m_index->makeTasks(m_queries, 10, 12);
    QVERIFY(made.isOk());
    std::vector<SearchTask*> all = pointers(*made);
    QVERIFY(m_index->step(all, 0.0).isOk());
    QVERIFY(m_index->step(all, 0.0).isOk());
    QVERIFY(m_index->step(std::span(all).first(7), std::numeric_limits<double>::infinity()).isOk());
    std::vector<uint64_t> expected(kNlist, 0);
    uint64_t total = 0;
    for (const SearchTask& t : *made)
      for (size_t j = 0; j < t.cursor(); ++j) ++expected[static_cast<size_t>(t.clusters()[j])], ++total;
    QCOMPARE(total, uint64_t{7 * 12 + 33 * 2});
    QVERIFY(m_index->clusterAccessCounts() == expected);
    QVERIFY(m_index->search(m_queries, 10, 12).isOk());  // plain search() is not counted
    QVERIFY(m_index->clusterAccessCounts() == expected);
    m_index->resetClusterAccessCounts();
    for (uint64_t c : m_index->clusterAccessCounts()) QCOMPARE(c, uint64_t{0});
    m_index->calibrateCostModel();
  }

  void saveLoadRoundTrip() {
    QTemporaryDir dir;
    const std::filesystem::path path = std::filesystem::path(dir.path().toStdString()) / "ivf.index";
    Status saved = m_index->save(path, kFingerprint);
    QVERIFY2(saved.isOk(), saved.toString().c_str());
    int files = 0;
    for (const auto& e : std::filesystem::directory_iterator(path.parent_path())) (void)e, ++files;
    QCOMPARE(files, 1);  // the temp file was renamed, not left behind
    auto loaded = IvfIndex::load(path, kFingerprint);
    QVERIFY2(loaded.isOk(), loaded.status().toString().c_str());
    QCOMPARE(loaded->nlist(), kNlist);
    QCOMPARE(loaded->size(), m_index->size());
    QVERIFY(loaded->listSizes() == m_index->listSizes());
    QVERIFY(loaded->costModel().samples > 0);  // calibrated on load
    auto before = m_index->search(m_queries, 10, 16);
    auto after = loaded->search(m_queries, 10, 16);
    QVERIFY(before.isOk() && after.isOk());
    QVERIFY(before->ids == after->ids);
    QVERIFY(before->similarities == after->similarities);
    auto ta = m_index->makeTasks(m_queries, 10, 16);
    auto tb = loaded->makeTasks(m_queries, 10, 16);
    QVERIFY(ta.isOk() && tb.isOk());
    std::vector<SearchTask*> pa = pointers(*ta), pb = pointers(*tb);
    QVERIFY(m_index->step(pa, std::numeric_limits<double>::infinity()).isOk());
    QVERIFY(loaded->step(pb, std::numeric_limits<double>::infinity()).isOk());
    for (size_t i = 0; i < pa.size(); ++i) QVERIFY(sameHits(pa[i]->topK(), pb[i]->topK()));
  }

  void loadErrorsAreClear() {
    QTemporaryDir dir;
    const std::filesystem::path base(dir.path().toStdString());
    const std::filesystem::path path = base / "ivf.index";
    QVERIFY(m_index->save(path, kFingerprint).isOk());

    auto other = IvfIndex::load(path, "another-embedder");
    QCOMPARE(other.status().code(), StatusCode::SchemaMismatch);
    QVERIFY(mentions(other.status(), {kFingerprint, "another-embedder", "ragraph index build"}));

    auto missing = IvfIndex::load(base / "nope.index", kFingerprint);
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(missing.status(), {"nope.index", "ragraph index build"}));

    // One flipped byte in the middle of the vectors.
    const auto bytes = std::filesystem::file_size(path);
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(static_cast<std::streamoff>(bytes / 2));
      char c = 0;
      f.get(c);
      f.seekp(static_cast<std::streamoff>(bytes / 2));
      f.put(static_cast<char>(c ^ 0x5a));
    }
    auto flipped = IvfIndex::load(path, kFingerprint);
    QCOMPARE(flipped.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(flipped.status(), {"checksum", "ragraph index build"}));

    std::filesystem::resize_file(path, bytes / 3);
    auto truncated = IvfIndex::load(path, kFingerprint);
    QCOMPARE(truncated.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(truncated.status(), {"truncated", "ragraph index build"}));

    std::ofstream(base / "text.index") << "not an index at all\n";
    auto garbage = IvfIndex::load(base / "text.index", kFingerprint);
    QCOMPARE(garbage.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(garbage.status(), {"not a RAGraph IVF index", "ragraph index build"}));

    Status noFingerprint = m_index->save(base / "x.index", "");
    QCOMPARE(noFingerprint.code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(noFingerprint, {"fingerprint"}));
  }

  void badInputIsNamed() {
    const std::span<const float> data(m_data);
    auto r = IvfIndex::build(data.first(1000 * kDim + 5), kDim, 8, 1);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"32-dimensional", "dim matches"}));
    r = IvfIndex::build(data.first(1000 * kDim), kDim, 0, 1);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"nlist must be at least 1", "defaultNlist(1000) = 16"}));
    r = IvfIndex::build(data.first(100 * kDim), kDim, 101, 1);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"nlist 101 exceeds the 100 vectors", "at most 100"}));
    r = IvfIndex::build({}, kDim, 4, 1);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"no vectors"}));
    std::vector<float> nan(data.begin(), data.begin() + 100 * kDim);
    nan[5 * kDim + 3] = std::nanf("");
    r = IvfIndex::build(nan, kDim, 2, 1);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"vector 5", "NaN"}));

    auto s = m_index->search(query(0).first(16), 10, 8);
    QCOMPARE(s.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s.status(), {"16 floats", "32-dimensional", "embedder"}));
    s = m_index->search(query(0), 0, 8);
    QCOMPARE(s.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s.status(), {"k must be at least 1", "got 0"}));
    s = m_index->search(query(0), 10, 0);
    QCOMPARE(s.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s.status(), {"nprobe must be at least 1"}));
    s = m_index->search({}, 10, 8);
    QCOMPARE(s.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s.status(), {"no query vector"}));

    auto t = m_index->makeTask(query(0), -3, 8);
    QCOMPARE(t.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(t.status(), {"k must be at least 1", "got -3"}));
    const int64_t outOfRange[] = {3, kNlist};
    t = m_index->makeTask(query(0), 5, outOfRange);
    QCOMPARE(t.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(t.status(), {"cluster 64", "0..63"}));
    const int64_t twice[] = {3, 9, 3};
    t = m_index->makeTask(query(0), 5, twice);
    QCOMPARE(t.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(t.status(), {"cluster 3", "twice"}));

    auto good = m_index->makeTask(query(0), 5, 4);
    QVERIFY(good.isOk());
    SearchTask* once[] = {&*good};
    auto st = m_index->step(once, -1.0);
    QCOMPARE(st.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(st.status(), {"budget", ">= 0"}));
    SearchTask* dup[] = {&*good, &*good};
    st = m_index->step(dup, 1.0);
    QCOMPARE(st.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(st.status(), {"listed twice"}));
    QCOMPARE(good->cursor(), size_t{0});  // a refused step changes nothing

    std::vector<float> small = clusteredVectors(500, 8, 4, 9);
    auto other = IvfIndex::build(small, 8, 4, 1);
    QVERIFY(other.isOk());
    SearchTask* foreign[] = {&*good};
    st = other->step(foreign, 1.0);
    QCOMPARE(st.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(st.status(), {"32-dimensional", "dimension 8", "this index's makeTask"}));

    auto flat = searchFlat(data.first(100 * kDim), kDim, query(0), 0);
    QCOMPARE(flat.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(flat.status(), {"k must be at least 1"}));
  }

  void explicitClusterOrderIsFollowed() {
    // A caller-chosen order (what similarity-aware reordering will pass) visits exactly those
    // clusters in that order and ends at FAISS's result for the same set.
    auto natural = m_index->makeTask(query(3), 10, 10);
    QVERIFY(natural.isOk());
    std::vector<int64_t> reversed(natural->clusters().rbegin(), natural->clusters().rend());
    auto task = m_index->makeTask(query(3), 10, reversed);
    QVERIFY(task.isOk());
    QVERIFY(task->clusters() == reversed);
    QVERIFY(stepToEnd(*task, {0.0}));
    auto faiss = m_index->search(query(3), 10, 10);
    QVERIFY(faiss.isOk());
    QVERIFY(sameHits(task->topK(), faiss->row(0)));
  }
  void sharedStepsEqualFaissStepsBitForBit() {
    // Dimension 40 (the kernel's 16-lane loop plus a tail) and 400 duplicated rows, so that
    // equal similarities (ties) occur: the shared step must keep FAISS's choice among them.
    constexpr int64_t d = 40, n = 6000;
    std::vector<float> data = clusteredVectors(n, d, 12, 3);
    for (int64_t i = 0; i < 400; ++i)
      std::copy_n(data.begin() + i * d, d, data.begin() + (n - 1 - i) * d);
    auto built = IvfIndex::build(data, d, 32, 9);
    QVERIFY2(built.isOk(), built.status().toString().c_str());
    const IvfIndex& index = *built;
    QVERIFY(index.sharedCostModel().samples > 0);
    QVERIFY(index.sharedCostModel().b > 0 || index.sharedCostModel().a > 0);
    std::vector<float> queries;
    for (int64_t q = 0; q < 24; ++q)  // a duplicated row itself for some: exact ties at the top
      queries.insert(queries.end(), data.begin() + ((q * 211) % n) * d, data.begin() + ((q * 211) % n + 1) * d);
    auto k20 = index.makeTasks(queries, 20, 24);  // 24 of 32 clusters: they overlap a lot
    auto k5 = index.makeTasks(std::span<const float>(queries).first(8 * d), 5, 24);
    QVERIFY(k20.isOk() && k5.isOk());
    std::vector<SearchTask> faissTasks = *k20;
    faissTasks.insert(faissTasks.end(), k5->begin(), k5->end());
    std::vector<SearchTask> whole = faissTasks, chunked = faissTasks;

    std::vector<SearchTask*> f = pointers(faissTasks), w = pointers(whole), c = pointers(chunked);
    auto fs = index.step(f, std::numeric_limits<double>::infinity());
    auto ws = index.stepShared(w, std::numeric_limits<double>::infinity());
    QVERIFY2(fs.isOk() && ws.isOk(), ws.status().toString().c_str());
    QCOMPARE(ws->tasksAdvanced, static_cast<int32_t>(whole.size()));
    QCOMPARE(ws->clustersSearched, fs->clustersSearched);
    QCOMPARE(ws->vectorsScanned, fs->vectorsScanned);
    QVERIFY(ws->clustersRead <= 32);  // each cluster read once for all 32 searches
    QCOMPARE(fs->clustersRead, fs->clustersSearched);

    // Small budgets, with the tasks' priority order changing between steps.
    const double budget = 2 * index.sharedCostModel().firstSeconds(n / 32);
    for (int steps = 0; std::any_of(chunked.begin(), chunked.end(), [](auto& t) { return !t.done(); }); ++steps) {
      QVERIFY(steps < 2000);
      std::rotate(c.begin(), c.begin() + 1, c.end());
      auto s = index.stepShared(c, budget);
      QVERIFY2(s.isOk(), s.status().toString().c_str());
      QVERIFY(s->tasksAdvanced >= 1);
    }
    for (size_t i = 0; i < faissTasks.size(); ++i) {
      const std::vector<SearchHit> want = faissTasks[i].topK();
      for (const std::vector<SearchHit>& got : {whole[i].topK(), chunked[i].topK()}) {
        QCOMPARE(got.size(), want.size());
        for (size_t j = 0; j < want.size(); ++j) {
          QCOMPARE(got[j].id, want[j].id);
          QVERIFY(got[j].similarity == want[j].similarity);  // bit-identical, not merely close
        }
      }
    }
  }

  void sharedStepTakesTasksInTheGivenOrder() {
    auto made = m_index->makeTasks(m_queries, 10, 8);
    QVERIFY(made.isOk());
    std::vector<SearchTask*> all = pointers(*made);
    m_index->resetClusterAccessCounts();
    // Budget 0: only the first task advances, by one cluster.
    auto s = m_index->stepShared(all, 0.0);
    QVERIFY(s.isOk());
    QCOMPARE(s->tasksAdvanced, 1);
    QCOMPARE(s->clustersSearched, int64_t{1});
    QCOMPARE(all[0]->cursor(), size_t{1});
    for (size_t i = 1; i < all.size(); ++i) QCOMPARE(all[i]->cursor(), size_t{0});
    // A budget of about one whole search: the first task finishes before the second starts.
    const double one = 8 * m_index->sharedCostModel().firstSeconds(20000 / kNlist);
    s = m_index->stepShared(all, one);
    QVERIFY(s.isOk());
    QVERIFY(all[0]->done() || all[1]->cursor() == 0);
    QVERIFY(!all.back()->done());
    uint64_t visits = 0;
    for (uint64_t v : m_index->clusterAccessCounts()) visits += v;
    uint64_t expected = 0;
    for (SearchTask* t : all) expected += t->cursor();
    QCOMPARE(visits, expected);
    // Bad input is refused as step() refuses it.
    QCOMPARE(m_index->stepShared(all, -1.0).status().code(), StatusCode::InvalidArgument);
    std::vector<SearchTask*> twice = {all[2], all[2]};
    QCOMPARE(m_index->stepShared(twice, 1.0).status().code(), StatusCode::InvalidArgument);
  }

  // The one planner: every order and scan mode, at budgets from the minimum to unlimited, steps
  // 40 searches to the end where FAISS's search over the same clusters ends, bit for bit; plans
  // only decide when a cluster is visited.
  void plannerStrategiesEndAtFaissTopK() {
    auto faiss = m_index->search(m_queries, 10, 8);
    QVERIFY(faiss.isOk());
    const double oneCluster = m_index->costModel().seconds(20000 / kNlist);
    for (PlanOrder order : {PlanOrder::RoundRobin, PlanOrder::OldestFirst})
      for (ScanMode scan : {ScanMode::Alone, ScanMode::Shared})
        for (double budget : {0.0, 3 * oneCluster, 40 * oneCluster, std::numeric_limits<double>::infinity()}) {
          auto made = m_index->makeTasks(m_queries, 10, 8);
          QVERIFY(made.isOk());
          std::vector<SearchTask*> all = pointers(*made);
          int steps = 0;
          while (std::any_of(all.begin(), all.end(), [](SearchTask* t) { return !t->done(); })) {
            auto plan = planSubStage(*m_index, all, budget, {.order = order, .scan = scan, .threads = 2});
            QVERIFY2(plan.isOk(), plan.status().toString().c_str());
            QCOMPARE(plan->take.size(), all.size());
            int32_t planned = 0;
            for (size_t i = 0; i < all.size(); ++i) {
              if (all[i]->done()) QCOMPARE(plan->take[i], 0);
              planned += plan->take[i];
            }
            QVERIFY(planned > 0);  // every step makes progress
            if (order == PlanOrder::RoundRobin)  // every unfinished search advances
              for (size_t i = 0; i < all.size(); ++i) QVERIFY(all[i]->done() || plan->take[i] > 0);
            if (order == PlanOrder::OldestFirst)  // a later search only once the earlier ones are planned to the end
              for (size_t i = 1; i < all.size(); ++i)
                if (plan->take[i] > 0)
                  for (size_t e = 0; e < i; ++e)
                    QCOMPARE(size_t(plan->take[e]), all[e]->clustersLeft());
            auto st = m_index->execute(all, *plan);
            QVERIFY2(st.isOk(), st.status().toString().c_str());
            QCOMPARE(st->clustersSearched, int64_t{planned});
            QVERIFY(++steps <= 400);
          }
          if (std::isinf(budget)) QCOMPARE(steps, 1);
          for (int64_t q = 0; q < queryCount(); ++q) {
            const std::vector<SearchHit> mine = all[static_cast<size_t>(q)]->topK(), ref = faiss->row(q);
            QCOMPARE(mine.size(), ref.size());
            for (size_t j = 0; j < mine.size(); ++j) {
              QCOMPARE(mine[j].id, ref[j].id);
              QCOMPARE(mine[j].similarity, ref[j].similarity);  // bit for bit
            }
          }
        }
    // Bad plans are refused, naming the problem.
    auto made = m_index->makeTasks(m_queries, 10, 8);
    std::vector<SearchTask*> all = pointers(*made);
    QCOMPARE(planSubStage(*m_index, all, -1.0, {}).status().code(), StatusCode::InvalidArgument);
    QCOMPARE(planSubStage(*m_index, all, 1.0, {.threads = 0}).status().code(), StatusCode::InvalidArgument);
    SubStagePlan tooMuch{.take = std::vector<int32_t>(all.size(), 9)};
    QCOMPARE(m_index->execute(all, tooMuch).status().code(), StatusCode::InvalidArgument);
    SubStagePlan shortPlan{.take = {1}};
    QCOMPARE(m_index->execute(all, shortPlan).status().code(), StatusCode::InvalidArgument);
    SubStagePlan sharedSplit{.take = std::vector<int32_t>(all.size(), 1), .scan = ScanMode::Shared};
    std::vector<uint8_t> elsewhere(kNlist, 0);
    QCOMPARE(m_index->execute(all, sharedSplit, elsewhere).status().code(), StatusCode::InvalidArgument);
  }
};

QTEST_GUILESS_MAIN(TestIvfIndex)
#include "test_ivf_index.moc"
