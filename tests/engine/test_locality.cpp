// Similarity-aware search order (retrieval/locality.h): the local cache of a retrieval, the
// cluster reordering of the next one, early termination, and that reordering reaches a similar
// query's final top-k after fewer clusters without changing it.
#include <QtTest>

#include <numeric>
#include <random>

#include "../fixtures/retrieval/clustered_vectors.h"
#include "retrieval/locality.h"

using namespace rag;
using namespace rag::retrieval;

namespace {
constexpr int64_t kDim = 32;
}

class TestLocality : public QObject {
  Q_OBJECT
  std::vector<float> m_x;
  std::optional<IvfIndex> m_index;

  std::vector<float> row(int64_t i) const {
    return {m_x.begin() + i * kDim, m_x.begin() + (i + 1) * kDim};
  }
  // v plus noise, renormalised: a follow-up query about nearly the same thing.
  std::vector<float> near(const std::vector<float>& v, std::mt19937_64& rng) const {
    std::normal_distribution<float> g(0.0f, 0.15f);
    std::vector<float> out = v;
    float norm = 0;
    for (float& x : out) {
      x += g(rng);
      norm += x * x;
    }
    for (float& x : out) x /= std::sqrt(norm);
    return out;
  }

private Q_SLOTS:
  void initTestCase() {
    m_x = testing::clusteredVectors(6000, kDim, 40, 3);
    auto built = IvfIndex::build(m_x, kDim, 64, 1);
    QVERIFY2(built.isOk(), built.status().message().c_str());
    m_index.emplace(std::move(*built));
  }

  void reorderPutsHitClustersFirstThenSearchedOnes() {
    LocalCache c;
    c.hitClusters = {7, 3};
    c.searched = {3, 9, 7, 5};
    const std::vector<int64_t> cPrime = {1, 5, 3, 8, 9, 7};
    QCOMPARE(reorderClusters(cPrime, c), (std::vector<int64_t>{3, 7, 5, 9, 1, 8}));
    QCOMPARE(reorderClusters(cPrime, LocalCache{}), cPrime);  // nothing remembered: unchanged
  }

  void theCacheKnowsWhereItsHitsLive() {
    const std::vector<int32_t> clusterOf = m_index->clusterOfIds();
    QCOMPARE(static_cast<int64_t>(clusterOf.size()), int64_t{6000});
    QVERIFY(std::none_of(clusterOf.begin(), clusterOf.end(), [](int32_t c) { return c < 0; }));
    // A vector is found by searching its own cluster alone.
    for (int64_t id : {0, 17, 2999, 5999}) {
      auto t = m_index->makeTask(row(id), 1, std::vector<int64_t>{clusterOf[static_cast<size_t>(id)]});
      QVERIFY(t.isOk());
      SearchTask* one[] = {&*t};
      QVERIFY(m_index->step(one, 1e9).isOk());
      QCOMPARE(t->topK().at(0).id, id);
    }
    auto task = m_index->makeTask(row(5), 20, 16);
    SearchTask* one[] = {&*task};
    QVERIFY(m_index->step(one, 1e9).isOk());
    LocalCache c = LocalCache::remember(*task, clusterOf, 20);
    QCOMPARE(c.top.size(), size_t{20});
    QCOMPARE(c.searched, task->clusters());
    for (const SearchHit& h : c.top)
      QVERIFY(std::find(c.hitClusters.begin(), c.hitClusters.end(), clusterOf[static_cast<size_t>(h.id)]) != c.hitClusters.end());
  }

  void reorderingReachesTheSameResultSooner() {
    const std::vector<int32_t> clusterOf = m_index->clusterOfIds();
    std::mt19937_64 rng(11);
    int64_t plain = 0, reordered = 0;
    for (int q = 0; q < 60; ++q) {
      const std::vector<float> v = row(q * 97);
      auto first = m_index->makeTask(v, 20, 16);
      SearchTask* one[] = {&*first};
      QVERIFY(m_index->step(one, 1e9).isOk());
      const LocalCache cache = LocalCache::remember(*first, clusterOf);
      const std::vector<float> v2 = near(v, rng);
      auto full = m_index->makeTask(v2, 5, 16);
      SearchTask* f[] = {&*full};
      QVERIFY(m_index->step(f, 1e9).isOk());
      const std::vector<SearchHit> final = full->topK();
      auto a = m_index->makeTask(v2, 5, 16);
      auto b = m_index->makeTask(v2, 5, reorderClusters(a->clusters(), cache));
      auto na = clustersUntil(*m_index, *a, final);
      auto nb = clustersUntil(*m_index, *b, final);
      QVERIFY(na.isOk() && nb.isOk());
      plain += *na;
      reordered += *nb;
      // Reordering changes when the result is reached, never what it is.
      while (!b->done()) {
        SearchTask* bb[] = {&*b};
        QVERIFY(m_index->step(bb, 1e9).isOk());
      }
      QCOMPARE(b->topK().size(), final.size());
      for (size_t i = 0; i < final.size(); ++i) QCOMPARE(b->topK()[i].id, final[i].id);
    }
    qInfo("clusters until the final top-5: %lld in nearest-centroid order, %lld reordered",
          static_cast<long long>(plain), static_cast<long long>(reordered));
    QVERIFY(reordered <= plain);
  }

  void earlyStopEndsSettledSearchesOnly() {
    auto t = m_index->makeTask(row(42), 5, 32);
    auto never = searchWithEarlyStop(*m_index, *t, 0);
    QVERIFY(never.isOk());
    QVERIFY(!never->stoppedEarly);
    QCOMPARE(never->clustersSearched, int64_t{32});
    auto t2 = m_index->makeTask(row(42), 5, 32);
    auto early = searchWithEarlyStop(*m_index, *t2, 3);
    QVERIFY(early.isOk());
    QVERIFY(early->stoppedEarly);
    QVERIFY(early->clustersSearched < 32);
    QCOMPARE(early->top.at(0).id, int64_t{42});  // its own vector, found in its own cluster
  }
};

QTEST_GUILESS_MAIN(TestLocality)
#include "test_locality.moc"
