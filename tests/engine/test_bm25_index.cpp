// BM25 retrieval through SQLite FTS5 (retrieval/bm25_index.h): built from the corpus on first
// use and rebuilt when the corpus changes, ranks the passage that holds a query's rare words
// first, survives queries full of FTS5 syntax, and fuses rankings by reciprocal rank, with
// constants measured per embedder (retrieval/fusion_calibration.h).
#include <QtTest>
#include <QTemporaryDir>

#include <filesystem>

#include "../fixtures/workload/tiny_corpus.h"
#include "core/fs.h"
#include "retrieval/bm25_index.h"
#include "retrieval/fusion_calibration.h"
#include "storage/sqlite.h"

using namespace rag;
using namespace rag::retrieval;
namespace fs = std::filesystem;

class TestBm25Index : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path path(const char* name) const { return fs::path(m_dir.path().toStdString()) / name; }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(testing::makeTinyCorpus(path("corpus.db"), {.entities = 40, .passages = true}).isOk());
  }

  void buildsOnceAndFindsThePassage() {
    std::vector<std::string> said;
    auto idx = Bm25Index::openOrBuild(path("corpus.db"), {}, [&](const std::string& m) { said.push_back(m); });
    QVERIFY2(idx.isOk(), idx.status().toString().c_str());
    QVERIFY(idx->rebuilt());
    QCOMPARE(said.size(), size_t{1});
    QVERIFY(fs::exists(path("corpus.db.fts")));
    QCOMPARE(idx->size(), int64_t{40});
    // "sub 17a" and "answer 17" occur only in entity 17's passage.
    auto hits = idx->search("What is the answer 17 or sub 17a?", 5);
    QVERIFY2(hits.isOk(), hits.status().toString().c_str());
    QVERIFY(!hits->empty());
    QCOMPARE(hits->front(), int64_t{17});
    QVERIFY(hits->size() <= 5);
    // Words in most passages are left out, unless nothing else is left.
    QCOMPARE(*idx->passagesWith("entity"), int64_t{40});
    QCOMPARE(*idx->passagesWith("17a"), int64_t{1});
    auto common = idx->search("entity thing", 3);
    QVERIFY(common.isOk());
    QCOMPARE(common->size(), size_t{3});
    // Opened again: no rebuild.
    auto again = Bm25Index::openOrBuild(path("corpus.db"));
    QVERIFY(again.isOk());
    QVERIFY(!again->rebuilt());
  }

  void oddQueriesAreNotSyntaxErrors() {
    auto idx = Bm25Index::openOrBuild(path("corpus.db"));
    QVERIFY(idx.isOk());
    for (const char* q : {"\"unbalanced", "a AND OR NOT (", "NEAR(x y)", "col:thing*", "-- ; DROP TABLE passages", "caf\xC3\xA9"})
      QVERIFY2(idx->search(q, 3).isOk(), q);
    auto none = idx->search("what is the", 3);  // only function words: nothing to look for
    QVERIFY(none.isOk());
    QVERIFY(none->empty());
    const std::vector<std::string> words = Bm25Index::queryWords("What is Entity-7?");
    QCOMPARE(words, (std::vector<std::string>{"entity", "7"}));
    QCOMPARE(Bm25Index::matchExpression(words), std::string("\"entity\" OR \"7\""));
    QCOMPARE(idx->search("entity", 0).status().code(), StatusCode::InvalidArgument);
  }

  void rankAmongReordersOnlyTheGivenIds() {
    auto idx = Bm25Index::openOrBuild(path("corpus.db"));
    QVERIFY(idx.isOk());
    // rankAmong gives positions in `ids`; read back as the ids they point at.
    auto rankAmong = [&](std::string_view query, const std::vector<int64_t>& ids) -> Result<std::vector<int64_t>> {
      RAG_ASSIGN_OR_RETURN(std::vector<size_t> order, idx->rankAmong(query, ids));
      std::vector<size_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < sorted.size(); ++i)
        if (sorted[i] != i) return Status::internal("not a permutation of the positions");
      std::vector<int64_t> out;
      for (size_t i : order) out.push_back(ids[i]);
      return out;
    };
    // Entity 17's passage leads; ids the query does not match keep their order, then empty slots.
    const std::vector<int64_t> given = {3, -1, 9, 17, 5};
    auto ranked = rankAmong("What is the answer 17 or sub 17a?", given);
    QVERIFY2(ranked.isOk(), ranked.status().toString().c_str());
    QCOMPARE(ranked->size(), given.size());
    QCOMPARE(ranked->front(), int64_t{17});
    QCOMPARE(ranked->back(), int64_t{-1});
    // The order FTS5's own bm25() gives over the whole corpus (rankAmong scores with the
    // remembered IDFs instead of FTS5's counting them): given reversed, they come back as ranked.
    auto full = idx->searchScored("17 17a 17b 12 12a 5 8b", 40);
    QVERIFY(full.isOk());
    QVERIFY(full->size() >= 4);
    std::vector<int64_t> best;
    for (size_t i = 0; i < 4; ++i) best.push_back((*full)[i].id);
    for (size_t i = 1; i < 4; ++i) QVERIFY2((*full)[i - 1].score > (*full)[i].score, "ties: the check would prove nothing");
    auto reordered = rankAmong("17 17a 17b 12 12a 5 8b", std::vector<int64_t>(best.rbegin(), best.rend()));
    QVERIFY(reordered.isOk());
    QCOMPARE(*reordered, best);
    // Nothing new brought in, nothing lost.
    QCOMPARE(std::count(ranked->begin(), ranked->end(), int64_t{17}), 1);
    for (int64_t id : {3, 9, 5}) QVERIFY(std::find(ranked->begin(), ranked->end(), id) != ranked->end());
    // A query with nothing to match, or no ids: the given order.
    QCOMPARE(*rankAmong("what is the", given), given);
    QVERIFY(rankAmong("answer 17", std::vector<int64_t>{})->empty());
  }

  void anotherCorpusIsRebuilt() {
    QVERIFY(Bm25Index::openOrBuild(path("corpus.db")).isOk());
    // Same file name, a corpus of another build: the index is rebuilt, not used stale.
    fs::remove(path("corpus.db"));
    QVERIFY(testing::makeTinyCorpus(path("corpus.db"), {.entities = 12, .passages = true}).isOk());
    auto idx = Bm25Index::openOrBuild(path("corpus.db"));
    QVERIFY(idx.isOk());
    QVERIFY(idx->rebuilt());
    QCOMPARE(idx->size(), int64_t{12});
    // A missing corpus is named.
    auto missing = Bm25Index::openOrBuild(path("nope.db"));
    QVERIFY(!missing.isOk());
    QVERIFY(missing.status().message().find("nope.db") != std::string::npos);
    QVERIFY(!fs::exists(path("nope.db.fts")));
  }

  void reciprocalRankFusionOrdersByFusedRank() {
    const std::vector<std::vector<int64_t>> r = {{1, 2, 3, -1}, {3, 4, 1}};
    // 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie: 1 was seen first); 2: 1/62; 4: 1/62 (2 seen first).
    QCOMPARE(reciprocalRankFusion(r, 10), (std::vector<int64_t>{1, 3, 2, 4}));
    QCOMPARE(reciprocalRankFusion(r, 2), (std::vector<int64_t>{1, 3}));
    QVERIFY(reciprocalRankFusion({}, 3).empty());
  }

  void weightedFusionLetsTheHeavierRankingLead() {
    const std::vector<int64_t> dense = {5, 6, 7}, lexical = {7, 8, 5};
    // Equal weights, c = 60: 5 = 1/61 + 1/63, 7 = 1/63 + 1/61 (tie: dense first), 6 = 1/62, 8 = 1/62.
    QCOMPARE(hybridFusion(dense, lexical, 4, {.c = 60, .denseWeight = 1}), (std::vector<int64_t>{5, 7, 6, 8}));
    // Dense at weight 0: BM25's order alone, dense-only ids after it at score 0 in dense order.
    QCOMPARE(hybridFusion(dense, lexical, 4, {.c = 60, .denseWeight = 0}), (std::vector<int64_t>{7, 8, 5, 6}));
    // A small c makes ranks matter more: with c = 1 and dense at 0.5, 7 = 0.5/4 + 1/2 leads,
    // 5 = 0.5/2 + 1/4 = 0.5 beats 8 = 1/3, and 6 = 0.5/3 comes last.
    QCOMPARE(hybridFusion(dense, lexical, 4, {.c = 1, .denseWeight = 0.5}), (std::vector<int64_t>{7, 5, 8, 6}));
    // Weights beyond the rankings given default to 1.
    const std::vector<std::vector<int64_t>> r = {dense, lexical};
    const double oneWeight[] = {1.0};
    QCOMPARE(reciprocalRankFusion(r, 4, 60, oneWeight), reciprocalRankFusion(r, 4));
  }
  // The calibration keeps the grid's best point: a dense ranking that always holds the gold
  // passage first needs weight on the dense side, one that never holds it none.
  void fusionCalibrationKeepsTheBestConstants() {
    std::vector<std::vector<int64_t>> goldFirst, noGold, allGold;
    std::vector<int64_t> gold;
    for (int64_t q = 0; q < 20; ++q) {
      const int64_t g = 1000 + q;
      gold.push_back(g);
      allGold.push_back({g});
      std::vector<int64_t> first = {g}, without;
      for (int64_t i = 0; i < 20; ++i) {
        if (i < 19) first.push_back(100 * (q + 1) + i);
        without.push_back(5000 + 100 * q + i);
      }
      goldFirst.push_back(first);
      noGold.push_back(without);
    }
    // Strong dense side (gold first), BM25 without the gold passage.
    auto strong = calibrateFusion(goldFirst, noGold, gold, allGold, "emb-a", 7);
    QVERIFY2(strong.isOk(), strong.status().toString().c_str());
    QCOMPARE(strong->recall, 1.0);
    QCOMPARE(strong->denseRecall, 1.0);
    QCOMPARE(strong->lexicalRecall, 0.0);
    QVERIFY(strong->fusion.denseWeight > 0);
    QCOMPARE(strong->grid.size(), fusionGrid().size());
    QCOMPARE(strong->defaultRecall, scoreFusion(HybridFusion{}, goldFirst, noGold, gold, allGold, 5).recall);
    for (const FusionPoint& p : strong->grid) {
      QVERIFY(p.recall <= strong->recall);
      // Dense at weight 0 is BM25's order: the gold passage (dense only) falls behind its 20.
      if (p.fusion.denseWeight == 0) QCOMPARE(p.recall, 0.0);
    }
    // The other way round: every point with weight on BM25 finds it; the first such is kept.
    auto weak = calibrateFusion(noGold, goldFirst, gold, allGold, "emb-b", 7);
    QVERIFY2(weak.isOk(), weak.status().toString().c_str());
    QCOMPARE(weak->recall, 1.0);
    QCOMPARE(weak->fusion.c, fusionGrid().front().c);
    QCOMPARE(weak->fusion.denseWeight, fusionGrid().front().denseWeight);

    // Stored beside the index for its embedder, and read back.
    const fs::path base = path("fused.index");
    QVERIFY(saveFusionCalibration(base, *strong).isOk());
    auto back = loadFusionCalibration(base, "emb-a");
    QVERIFY2(back.isOk() && back->has_value(), back.status().toString().c_str());
    QCOMPARE((*back)->fusion.c, strong->fusion.c);
    QCOMPARE((*back)->fusion.denseWeight, strong->fusion.denseWeight);
    QCOMPARE((*back)->nprobe, int64_t{7});
    QCOMPARE((*back)->grid.size(), strong->grid.size());
    QVERIFY(!loadFusionCalibration(base, "emb-b")->has_value());  // another embedder's
    QVERIFY(!loadFusionCalibration(path("absent.index"), "emb-a")->has_value());
    QVERIFY(writeFileAtomic(fusionCalibrationPath(base), R"({"fingerprint": "emb-a", "c": 5, "dense_weight": -1,
                                                            "lexical_weight": 1})").isOk());
    auto negative = loadFusionCalibration(base, "emb-a");
    QCOMPARE(negative.status().code(), StatusCode::Corrupt);
    QVERIFY(negative.status().message().find("ragraph index calibrate") != std::string::npos);
    QVERIFY(writeFileAtomic(fusionCalibrationPath(base), "{not json").isOk());
    QCOMPARE(loadFusionCalibration(base, "emb-a").status().code(), StatusCode::Corrupt);

    // Bad input names the problem.
    const std::vector<int64_t> noGoldIds(20, -1);
    auto none = calibrateFusion(goldFirst, noGold, noGoldIds, allGold, "x", 1);
    QVERIFY(!none.isOk() && none.status().message().find("no calibration question has a gold passage") != std::string::npos);
    auto uneven = calibrateFusion(std::span(goldFirst).first(3), noGold, gold, allGold, "x", 1);
    QVERIFY(!uneven.isOk() && uneven.status().message().find("got 3, 20, 20 and 20") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestBm25Index)
#include "test_bm25_index.moc"
