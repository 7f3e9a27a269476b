// The CPU reference scan of cached clusters (retrieval/cluster_scan.h): exact top-k against a
// brute-force ranking, the -inf start (all-negative similarities still fill k slots), ties by
// id, k beyond the rows, and rows that merge into a SearchTask to give IvfIndex's own result.
#include <QtTest>

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

#include "../fixtures/retrieval/clustered_vectors.h"
#include "retrieval/cluster_scan.h"
#include "retrieval/ivf_index.h"
#include "retrieval/substage_planner.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;

namespace {

struct Block {
  std::vector<float> vectors;
  std::vector<int64_t> ids;
  ScanSegment segment() const { return {vectors.data(), ids.data(), static_cast<int64_t>(ids.size())}; }
};

struct Rows {
  std::vector<float> sims;
  std::vector<int64_t> ids;
};

Result<Rows> scan(std::span<const float> queries, int64_t dim, int32_t k,
                  const std::vector<ScanSegment>& segments, const std::vector<int32_t>& offsets) {
  const size_t nq = queries.size() / static_cast<size_t>(dim);
  Rows r{std::vector<float>(nq * static_cast<size_t>(k)), std::vector<int64_t>(nq * static_cast<size_t>(k))};
  RAG_RETURN_IF_ERROR(scanClustersCpu(queries, dim, k, segments, offsets, r.sims, r.ids));
  return r;
}

}  // namespace

class TestClusterScan : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesBruteForceRanking() {
    constexpr int64_t d = 16;
    std::mt19937 rng(3);
    std::normal_distribution<float> g;
    std::vector<Block> blocks(6);
    int64_t next = 0;
    for (size_t b = 0; b < blocks.size(); ++b) {
      const int rows = 5 + static_cast<int>(b) * 37;
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < d; ++j) blocks[b].vectors.push_back(g(rng));
        blocks[b].ids.push_back(next += 3);  // ids are not positions
      }
    }
    std::vector<float> queries(3 * d);
    for (float& x : queries) x = g(rng);
    // query 0: blocks 0,2,5; query 1: none; query 2: all
    const std::vector<std::vector<int>> lists = {{0, 2, 5}, {}, {0, 1, 2, 3, 4, 5}};
    std::vector<ScanSegment> segments;
    std::vector<int32_t> offsets{0};
    for (const auto& l : lists) {
      for (int b : l) segments.push_back(blocks[static_cast<size_t>(b)].segment());
      offsets.push_back(static_cast<int32_t>(segments.size()));
    }
    constexpr int32_t k = 7;
    auto got = scan(queries, d, k, segments, offsets);
    QVERIFY2(got.isOk(), got.status().toString().c_str());
    for (size_t q = 0; q < lists.size(); ++q) {
      std::vector<std::pair<float, int64_t>> all;
      for (int b : lists[q]) {
        const Block& blk = blocks[static_cast<size_t>(b)];
        for (size_t r = 0; r < blk.ids.size(); ++r) {
          float s = 0;
          for (int j = 0; j < d; ++j) s += queries[q * d + static_cast<size_t>(j)] * blk.vectors[r * d + static_cast<size_t>(j)];
          all.push_back({s, blk.ids[r]});
        }
      }
      std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
      for (int j = 0; j < k; ++j) {
        const size_t slot = q * k + static_cast<size_t>(j);
        if (static_cast<size_t>(j) < all.size()) {
          QCOMPARE(got->ids[slot], all[static_cast<size_t>(j)].second);
          QCOMPARE(got->sims[slot], all[static_cast<size_t>(j)].first);
        } else {
          QCOMPARE(got->ids[slot], int64_t{-1});
          QCOMPARE(got->sims[slot], -std::numeric_limits<float>::infinity());
        }
      }
    }
  }

  void allNegativeSimilaritiesStillFillK() {
    // Every vector points away from the query: an inner-product heap started at +inf (the
    // authors' bug) would keep nothing.
    constexpr int64_t d = 4;
    Block b;
    for (int r = 0; r < 20; ++r) {
      for (int j = 0; j < d; ++j) b.vectors.push_back(-1.0f - 0.1f * static_cast<float>(r));
      b.ids.push_back(r);
    }
    const std::vector<float> q(d, 1.0f);
    auto got = scan(q, d, 5, {b.segment()}, {0, 1});
    QVERIFY2(got.isOk(), got.status().toString().c_str());
    for (int j = 0; j < 5; ++j) {
      QCOMPARE(got->ids[static_cast<size_t>(j)], int64_t{j});  // least negative first
      QVERIFY(got->sims[static_cast<size_t>(j)] < 0);
    }
  }

  void tiesGoToTheLowerIdAndShortListsPad() {
    constexpr int64_t d = 2;
    Block b;
    b.vectors = {1, 0, 1, 0, 1, 0};  // three identical vectors
    b.ids = {42, 7, 19};
    const std::vector<float> q{0.5f, 2.0f};
    auto got = scan(q, d, 5, {b.segment()}, {0, 1});
    QVERIFY2(got.isOk(), got.status().toString().c_str());
    QCOMPARE(got->ids, (std::vector<int64_t>{7, 19, 42, -1, -1}));
    QCOMPARE(got->sims[0], 0.5f);
    QCOMPARE(got->sims[3], -std::numeric_limits<float>::infinity());
  }

  void rowsMergeIntoATaskAsIvfIndexWouldScanThem() {
    constexpr int64_t d = 24, nlist = 32;
    const std::vector<float> data = rag::testing::clusteredVectors(6000, d, 40, 5);
    auto built = IvfIndex::build(data, d, nlist, 9);
    QVERIFY2(built.isOk(), built.status().toString().c_str());
    const IvfIndex& index = *built;
    for (int64_t qi = 0; qi < 10; ++qi) {
      const std::span<const float> query(data.data() + qi * 311 * d, d);
      auto plain = index.makeTask(query, 10, 12);
      auto hybrid = index.makeTask(query, 10, 12);
      QVERIFY(plain.isOk() && hybrid.isOk());
      SearchTask* p[] = {&*plain};
      QVERIFY(index.step(p, std::numeric_limits<double>::infinity()).isOk());
      // The hybrid task: every other cluster on the "device" (the CPU reference over copies).
      std::vector<uint8_t> elsewhere(nlist, 0);
      std::vector<Block> copies;
      for (size_t j = 0; j < hybrid->clusters().size(); j += 2) {
        const int64_t c = hybrid->clusters()[j];
        elsewhere[static_cast<size_t>(c)] = 1;
        Block b;
        QVERIFY(index.copyCluster(c, b.vectors, b.ids).isOk());
        QCOMPARE(static_cast<int64_t>(b.ids.size()), index.listSize(c));
        copies.push_back(std::move(b));
      }
      std::vector<ScanSegment> segments;
      for (const Block& b : copies) segments.push_back(b.segment());
      auto rows = scan(query, d, 10, segments, {0, static_cast<int32_t>(segments.size())});
      QVERIFY2(rows.isOk(), rows.status().toString().c_str());
      SearchTask* h[] = {&*hybrid};
      SubStagePlan plan{.take = {static_cast<int32_t>(hybrid->clusters().size())}};
      auto st = index.execute(h, plan, elsewhere);
      QVERIFY2(st.isOk(), st.status().toString().c_str());
      QCOMPARE(st->clustersSearched, int64_t{6});  // the CPU half only
      QVERIFY(hybrid->done());
      QCOMPARE(hybrid->vectorsScanned(), plain->vectorsScanned());
      hybrid->mergeHits(rows->sims, rows->ids);
      const auto a = plain->topK(), b = hybrid->topK();
      QCOMPARE(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        QCOMPARE(a[i].id, b[i].id);
        QVERIFY(std::abs(a[i].similarity - b[i].similarity) < 1e-5f);
      }
    }
  }

  void rejectsMalformedBatches() {
    const std::vector<float> q(8, 1.0f);
    std::vector<float> sims(2);
    std::vector<int64_t> ids(2);
    Status s = scanClustersCpu(q, 4, 1, {}, std::vector<int32_t>{0, 0}, sims, ids);
    QVERIFY(!s.isOk());  // two queries need three offsets
    QVERIFY(mentions(s, {"offsets", "2 queries"}));
    s = scanClustersCpu(q, 4, 1, {}, std::vector<int32_t>{0, 1, 0}, sims, ids);
    QVERIFY(!s.isOk());
    s = scanClustersCpu(q, 4, 0, {}, std::vector<int32_t>{0, 0, 0}, sims, ids);
    QVERIFY(mentions(s, {"k must be at least 1"}));
    QVERIFY(scanClustersCpu(q, 4, 1, {}, std::vector<int32_t>{0, 0, 0}, sims, ids).isOk());
    QCOMPARE(ids[1], int64_t{-1});
  }
};

QTEST_GUILESS_MAIN(TestClusterScan)
#include "test_cluster_scan.moc"
