// The partial GPU cluster cache (retrieval/cluster_cache.h) on the host-memory store: the
// hottest clusters are chosen by frequency, updates happen only every N sub-stages, clusters in
// flight are searched on the CPU, and a hybrid step leaves every task exactly where
// IvfIndex::step leaves it, through cache changes, evictions and a failing device.
#include <QtTest>

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include "../fixtures/retrieval/clustered_vectors.h"
#include "retrieval/cluster_cache.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;

namespace {

constexpr int64_t kDim = 24;
constexpr int64_t kNlist = 48;

std::vector<SearchTask*> pointers(std::vector<SearchTask>& tasks) {
  std::vector<SearchTask*> out;
  for (SearchTask& t : tasks) out.push_back(&t);
  return out;
}

bool sameState(const SearchTask& a, const SearchTask& b) {
  if (a.cursor() != b.cursor() || a.vectorsScanned() != b.vectorsScanned()) {
    qWarning("cursor %zu vs %zu", a.cursor(), b.cursor());
    return false;
  }
  const auto x = a.topK(), y = b.topK();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].id != y[i].id || std::abs(x[i].similarity - y[i].similarity) > 1e-5f) {
      qWarning("hit %zu: %lld vs %lld", i, static_cast<long long>(x[i].id), static_cast<long long>(y[i].id));
      return false;
    }
  return true;
}

// A store whose scans fail after starting, as a device that fell over would.
class FailingScanStore final : public ClusterStore {
public:
  std::string describe() const override { return "failing"; }
  Status beginUpload(int64_t c, int64_t d, std::span<const float> v, std::span<const int64_t> i) override {
    return m_inner.beginUpload(c, d, v, i);
  }
  Status beginEvict(int64_t c) override { return m_inner.beginEvict(c); }
  Result<bool> transferDone(int64_t c) override { return m_inner.transferDone(c); }
  Status beginScan(std::span<const float> q, int64_t d, int32_t k,
                   const std::vector<std::vector<int64_t>>& c) override {
    return m_inner.beginScan(q, d, k, c);
  }
  Result<SearchResults> finishScan() override {
    (void)m_inner.finishScan();
    return Status::internal("device lost");
  }

private:
  CpuClusterStore m_inner;
};

}  // namespace

class TestClusterCache : public QObject {
  Q_OBJECT

  std::vector<float> m_data;
  std::optional<IvfIndex> m_index;

  // Queries near data rows [first, first + n*step): a topic-skewed stream.
  std::vector<float> queries(int64_t first, int64_t n, int64_t step) const {
    std::vector<float> q;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = m_data.data() + ((first + i * step) % 8000) * kDim;
      q.insert(q.end(), row, row + kDim);
    }
    return q;
  }

  // Runs the same queries through plain steps and hybrid steps side by side, comparing after
  // every step.
  bool runSideBySide(ClusterCache& cache, const std::vector<float>& q, double budget) {
    auto plain = m_index->makeTasks(q, 10, 16);
    auto hybrid = m_index->makeTasks(q, 10, 16);
    if (!plain || !hybrid) return false;
    auto p = pointers(*plain), h = pointers(*hybrid);
    while (std::any_of(p.begin(), p.end(), [](SearchTask* t) { return !t->done(); })) {
      if (!m_index->step(p, budget)) return false;
      auto s = cache.step(h, budget);
      if (!s) {
        qWarning("%s", s.status().toString().c_str());
        return false;
      }
      for (size_t i = 0; i < p.size(); ++i)
        if (!sameState(*p[i], *h[i])) return false;
    }
    return true;
  }

private Q_SLOTS:
  void initTestCase() {
    m_data = rag::testing::clusteredVectors(8000, kDim, 30, 21);
    auto built = IvfIndex::build(m_data, kDim, kNlist, 4);
    QVERIFY2(built.isOk(), built.status().toString().c_str());
    m_index.emplace(std::move(built).value());
    m_index->setCostModel({.a = 1e-6, .b = 1e-8, .samples = 1});  // deterministic plans
  }

  void selectsHottestThatFit() {
    const std::vector<double> heat{1, 9, 0, 5, 7, 3};
    const std::vector<int64_t> bytes{10, 10, 10, 50, 10, 10};
    QCOMPARE(selectHotClusters(heat, bytes, 0, 3), (std::vector<int64_t>{1, 4, 3}));
    // 40 bytes: 1, 4, (3 too big), 5, 0
    QCOMPARE(selectHotClusters(heat, bytes, 40, 0), (std::vector<int64_t>{1, 4, 5, 0}));
    QCOMPARE(selectHotClusters(heat, bytes, 40, 2), (std::vector<int64_t>{1, 4}));
    QVERIFY(selectHotClusters(std::vector<double>(6, 0.0), bytes, 0, 3).empty());
  }

  void updatesOnlyEveryNSubStages() {
    CpuClusterStore store;
    auto cache = ClusterCache::create(*m_index, store, {.capacityClusters = 3, .updateInterval = 5, .decay = 1.0});
    QVERIFY2(cache.isOk(), cache.status().toString().c_str());
    for (int i = 0; i < 10; ++i) cache->recordAccess(7);
    for (int i = 0; i < 6; ++i) cache->recordAccess(2);
    cache->recordAccess(30);
    cache->recordAccess(11), cache->recordAccess(11);
    for (int s = 1; s <= 4; ++s) {
      QVERIFY(cache->onSubStage().isOk());
      QCOMPARE(cache->stats().uploads, uint64_t{0});
      QCOMPARE(cache->residency(7), ClusterResidency::Absent);
    }
    QVERIFY(cache->onSubStage().isOk());  // the 5th: update, uploads start
    QCOMPARE(cache->stats().updates, uint64_t{1});
    QCOMPARE(cache->stats().uploads, uint64_t{3});
    QCOMPARE(cache->residency(7), ClusterResidency::SwappingIn);
    QCOMPARE(cache->residency(2), ClusterResidency::SwappingIn);
    QCOMPARE(cache->residency(11), ClusterResidency::SwappingIn);
    QCOMPARE(cache->residency(30), ClusterResidency::Absent);  // gc = 3
    QVERIFY(!cache->onDevice(7));
    QVERIFY(cache->onSubStage().isOk());  // transfers finish, seen at the next poll
    QVERIFY(cache->onDevice(7) && cache->onDevice(2) && cache->onDevice(11));
    QCOMPARE(cache->stats().residentClusters, int64_t{3});
    QCOMPARE(cache->stats().bytesHeld,
             clusterBytes(m_index->listSize(7), kDim) + clusterBytes(m_index->listSize(2), kDim) +
                 clusterBytes(m_index->listSize(11), kDim));
  }

  void hotspotShiftSwapsClustersOutAndIn() {
    CpuClusterStore store({.transferPolls = 2});
    auto cache = ClusterCache::create(*m_index, store, {.capacityClusters = 2, .updateInterval = 1, .decay = 0.25});
    QVERIFY(cache.isOk());
    for (int i = 0; i < 8; ++i) cache->recordAccess(1), cache->recordAccess(2);
    QVERIFY(cache->update().isOk());
    QCOMPARE(cache->heat()[1], 2.0);  // decayed by 0.25 after the update
    for (int s = 0; s < 4; ++s) QVERIFY(cache->onSubStage().isOk());
    QVERIFY(cache->onDevice(1) && cache->onDevice(2));
    for (int i = 0; i < 40; ++i) cache->recordAccess(5), cache->recordAccess(6);
    QVERIFY(cache->update().isOk());
    QCOMPARE(cache->residency(1), ClusterResidency::SwappingOut);
    QCOMPARE(cache->residency(2), ClusterResidency::SwappingOut);
    // Capacity is 2 clusters, still held by the evictions: the new ones wait.
    QCOMPARE(cache->residency(5), ClusterResidency::Absent);
    QVERIFY(!cache->onDevice(1));  // a cluster swapping out is searched on the CPU
    int subStages = 0;
    while (!(cache->onDevice(5) && cache->onDevice(6)) && subStages < 20) {
      QVERIFY(cache->onSubStage().isOk());
      ++subStages;
    }
    QVERIFY(subStages < 20);
    QCOMPARE(cache->residency(1), ClusterResidency::Absent);
    QCOMPARE(cache->stats().evictions, uint64_t{2});
    QCOMPARE(cache->stats().uploads, uint64_t{4});
  }

  void hybridStepsEqualPlainSteps() {
    CpuClusterStore store;
    const int64_t quarter = [&] {
      int64_t total = 0;
      for (int64_t c = 0; c < kNlist; ++c) total += clusterBytes(m_index->listSize(c), kDim);
      return total / 4;
    }();
    auto cache = ClusterCache::create(*m_index, store, {.capacityBytes = quarter, .updateInterval = 3});
    QVERIFY(cache.isOk());
    // A skewed stream on one topic region, then a shift to another: hits, then evictions.
    for (int round = 0; round < 3; ++round)
      QVERIFY(runSideBySide(*cache, queries(round * 7, 24, 13), 0.0));
    const uint64_t hitsBefore = cache->stats().deviceVisits;
    QVERIFY(hitsBefore > 0);
    for (int round = 0; round < 3; ++round)
      QVERIFY(runSideBySide(*cache, queries(4001 + round * 5, 24, 3), 2e-5));
    const ClusterCacheStats& st = cache->stats();
    QVERIFY(st.deviceVisits > hitsBefore);
    QVERIFY(st.evictions > 0);
    QVERIFY(st.bytesHeld <= quarter);
    QVERIFY(st.hitRate() > 0.0 && st.hitRate() < 1.0);
    qInfo("hit rate %.3f, %llu uploads, %llu evictions", st.hitRate(),
          static_cast<unsigned long long>(st.uploads), static_cast<unsigned long long>(st.evictions));
  }

  void inFlightClustersAreSearchedOnTheCpu() {
    CpuClusterStore store({.transferPolls = 1000});  // transfers never finish in this test
    auto cache = ClusterCache::create(*m_index, store, {.capacityClusters = 8, .updateInterval = 2});
    QVERIFY(cache.isOk());
    QVERIFY(runSideBySide(*cache, queries(100, 16, 17), 0.0));
    QCOMPARE(cache->stats().deviceVisits, uint64_t{0});
    QVERIFY(cache->stats().uploads > 0);
    QVERIFY(cache->stats().cpuVisitsWhileSwapping > 0);
  }

  void deviceHitsKeepAClusterHot() {
    // IvfIndex's counters only see CPU scans; the cache counts device hits too, so a cluster
    // served from the device stays cached. One round of the stream is 16 sub-stages (nprobe
    // 16, one cluster per task per step), so updates see whole rounds.
    CpuClusterStore store;
    auto cache = ClusterCache::create(*m_index, store, {.capacityClusters = 4, .updateInterval = 16});
    QVERIFY(cache.isOk());
    const auto q = queries(50, 8, 1);
    for (int round = 0; round < 6; ++round) QVERIFY(runSideBySide(*cache, q, 0.0));
    QVERIFY(cache->stats().deviceVisits > 0);
    const uint64_t evictions = cache->stats().evictions;
    for (int round = 0; round < 4; ++round) QVERIFY(runSideBySide(*cache, q, 0.0));
    QCOMPARE(cache->stats().evictions, evictions);  // the same stream: nothing leaves
  }

  // Planned with the cache's resident mask, device clusters cost the CPU budget nothing: with
  // every cluster resident a zero-budget sub-stage finishes every search (without the mask it
  // takes one cluster each), and the searches end where whole CPU searches end. With nothing
  // resident the mask changes no plan.
  void residentClustersCostTheSubStageBudgetNothing() {
    CpuClusterStore store;
    auto cache = ClusterCache::create(*m_index, store, {.capacityClusters = static_cast<int32_t>(kNlist), .updateInterval = 1000});
    QVERIFY(cache.isOk());
    const std::vector<uint8_t> none = cache->residentMask();
    QCOMPARE(std::count(none.begin(), none.end(), uint8_t{1}), 0);
    for (int64_t c = 0; c < kNlist; ++c) cache->recordAccess(c);
    QVERIFY(cache->update().isOk());
    for (int i = 0; i < 100 && cache->stats().residentClusters < kNlist; ++i) QVERIFY(cache->onSubStage().isOk());
    QCOMPARE(cache->stats().residentClusters, kNlist);
    const std::vector<uint8_t> all = cache->residentMask();
    QCOMPARE(std::count(all.begin(), all.end(), uint8_t{1}), static_cast<long>(kNlist));

    const auto q = queries(10, 6, 11);
    for (PlanOrder order : {PlanOrder::RoundRobin, PlanOrder::OldestFirst}) {
      auto hybrid = m_index->makeTasks(q, 10, 16), whole = m_index->makeTasks(q, 10, 16);
      QVERIFY(hybrid.isOk() && whole.isOk());
      auto h = pointers(*hybrid), w = pointers(*whole);
      auto plain = planSubStage(*m_index, h, 0.0, {.order = order});
      auto bare = planSubStage(*m_index, h, 0.0, {.order = order, .onDevice = none});
      auto free = planSubStage(*m_index, h, 0.0, {.order = order, .onDevice = all});
      QVERIFY(plain.isOk() && bare.isOk() && free.isOk());
      QCOMPARE(bare->take, plain->take);
      QVERIFY(std::accumulate(plain->take.begin(), plain->take.end(), 0) < 16 * 6);
      for (int32_t t : free->take) QCOMPARE(t, 16);
      QVERIFY(cache->step(h, *free).isOk());
      QVERIFY(m_index->step(w, std::numeric_limits<double>::infinity()).isOk());
      for (size_t i = 0; i < h.size(); ++i) {
        QVERIFY(h[i]->done());
        QVERIFY(sameState(*h[i], *w[i]));
      }
    }
    QVERIFY(cache->stats().deviceVisits >= 2 * 16 * 6);
  }

  // Partly resident (even clusters), zero budget: a search takes the cluster it is owed (each
  // under round-robin, the first under oldest-first) and then every cluster it meets on the
  // device until its next CPU cluster; under oldest-first, once the CPU budget is spent, the
  // later searches still take their leading device clusters.
  void deviceVisitsNeverWaitForTheCpuBudget() {
    std::vector<uint8_t> even(static_cast<size_t>(kNlist));
    for (size_t c = 0; c < even.size(); c += 2) even[c] = 1;
    auto tasks = m_index->makeTasks(queries(33, 8, 7), 10, 16);
    QVERIFY(tasks.isOk());
    auto t = pointers(*tasks);
    // Device clusters at the head of task i's list from position `from`.
    auto leading = [&](size_t i, size_t from) {
      int32_t n = 0;
      while (from + static_cast<size_t>(n) < t[i]->clusters().size() && even[static_cast<size_t>(t[i]->clusters()[from + static_cast<size_t>(n)])]) ++n;
      return n;
    };
    auto owed = [&](size_t i) { return leading(i, 0) > 0 ? leading(i, 0) : 1 + leading(i, 1); };
    for (PlanOrder order : {PlanOrder::RoundRobin, PlanOrder::OldestFirst}) {
      auto plan = planSubStage(*m_index, t, 0.0, {.order = order, .onDevice = even});
      QVERIFY(plan.isOk());
      for (size_t i = 0; i < t.size(); ++i) {
        const int32_t want = order == PlanOrder::RoundRobin || i == 0 ? owed(i) : leading(i, 0);
        QVERIFY2(plan->take[i] == want, qPrintable(QString("task %1: %2 clusters, expected %3").arg(i).arg(plan->take[i]).arg(want)));
      }
    }
  }

  // warmStart: the cache fills when made, before any visit. As large as the index, every cluster
  // is resident once the uploads land and the first searches are served wholly by the device
  // (without warmStart, nothing for updateInterval sub-stages); four clusters' room goes to the
  // four largest lists, then counted visits take it over, and the unvisited clusters leave only
  // for those.
  void warmStartFillsTheCacheBeforeAnyVisit() {
    CpuClusterStore store;
    auto cold = ClusterCache::create(*m_index, store, {.capacityClusters = static_cast<int32_t>(kNlist), .updateInterval = 1000});
    QVERIFY(cold.isOk());
    QCOMPARE(cold->stats().uploads, uint64_t{0});
    CpuClusterStore warmStore;
    auto warm = ClusterCache::create(*m_index, warmStore,
                                     {.capacityClusters = static_cast<int32_t>(kNlist), .updateInterval = 1000, .warmStart = true});
    QVERIFY2(warm.isOk(), warm.status().toString().c_str());
    QCOMPARE(warm->stats().uploads, static_cast<uint64_t>(kNlist));
    QVERIFY(warm->onSubStage().isOk());  // the uploads land
    QCOMPARE(warm->stats().residentClusters, kNlist);
    QVERIFY(runSideBySide(*warm, queries(70, 12, 9), 0.0));  // results as plain steps give
    QCOMPARE(warm->stats().cpuVisits, uint64_t{0});
    QCOMPARE(warm->stats().hitRate(), 1.0);

    CpuClusterStore smallStore;
    auto small = ClusterCache::create(*m_index, smallStore, {.capacityClusters = 4, .updateInterval = 1000, .warmStart = true});
    QVERIFY(small.isOk());
    std::vector<int64_t> bySize(static_cast<size_t>(kNlist));
    std::iota(bySize.begin(), bySize.end(), int64_t{0});
    std::stable_sort(bySize.begin(), bySize.end(),
                     [&](int64_t a, int64_t b) { return m_index->listSize(a) > m_index->listSize(b); });
    QVERIFY(small->onSubStage().isOk());
    for (int i = 0; i < 4; ++i) QVERIFY2(small->onDevice(bySize[static_cast<size_t>(i)]), qPrintable(QString("cluster %1").arg(bySize[static_cast<size_t>(i)])));
    const int64_t visited = bySize.back();  // the smallest list: the prior alone never picks it
    small->recordAccess(visited);
    QVERIFY(small->update().isOk());
    for (int i = 0; i < 4; ++i) QVERIFY(small->onSubStage().isOk());
    QVERIFY(small->onDevice(visited));
    QCOMPARE(small->stats().evictions, uint64_t{1});  // only the coolest of the four made room
    for (int i = 0; i < 3; ++i) QVERIFY(small->onDevice(bySize[static_cast<size_t>(i)]));
  }

  // maxUpdateSeconds: with an update due only every 1000 sub-stages, the cached set is still
  // recomputed at the first sub-stage after that many seconds; without it, not.
  void updatesAfterMaxUpdateSecondsWhateverTheSubStages() {
    for (double maxSeconds : {0.0, 0.01}) {
      CpuClusterStore store;
      auto cache = ClusterCache::create(*m_index, store, {.capacityClusters = 4, .updateInterval = 1000, .maxUpdateSeconds = maxSeconds});
      QVERIFY(cache.isOk());
      cache->recordAccess(9);
      QTest::qSleep(30);
      QVERIFY(cache->onSubStage().isOk());
      QCOMPARE(cache->stats().updates, maxSeconds > 0 ? uint64_t{1} : uint64_t{0});
      QCOMPARE(cache->residency(9), maxSeconds > 0 ? ClusterResidency::SwappingIn : ClusterResidency::Absent);
    }
  }

  void aFailingDeviceFallsBackToTheCpu() {
    FailingScanStore store;
    auto cache = ClusterCache::create(*m_index, store, {.capacityClusters = 16, .updateInterval = 1});
    QVERIFY(cache.isOk());
    for (int round = 0; round < 3; ++round) QVERIFY(runSideBySide(*cache, queries(300, 12, 7), 0.0));
    QVERIFY(cache->stats().deviceFailures > 0);
  }

  void rejectsBadParameters() {
    CpuClusterStore store;
    auto c = ClusterCache::create(*m_index, store, {});
    QVERIFY(!c.isOk());
    QVERIFY(mentions(c.status(), {"capacityBytes", "capacityClusters"}));
    QVERIFY(!ClusterCache::create(*m_index, store, {.capacityClusters = 2, .updateInterval = 0}).isOk());
    QVERIFY(!ClusterCache::create(*m_index, store, {.capacityClusters = 2, .decay = 0.0}).isOk());
    QVERIFY(!ClusterCache::create(*m_index, store, {.capacityClusters = 2, .decay = 1.5}).isOk());
    auto late = ClusterCache::create(*m_index, store, {.capacityClusters = 2, .maxUpdateSeconds = -1});
    QVERIFY(!late.isOk());
    QVERIFY(mentions(late.status(), {"maxUpdateSeconds"}));
  }
};

QTEST_GUILESS_MAIN(TestClusterCache)
#include "test_cluster_cache.moc"
