// The passage index (retrieval/passage_index.h) around a stand-in embedder: one vector per
// passage in id order, a resumable embedding pass, an IVF index over the same vectors, files
// that refuse another embedder, and the default nprobe measured on labelled queries
// (retrieval/nprobe_calibration.h).
#include <QtTest>

#include <cmath>
#include <algorithm>
#include <filesystem>

#include "../fixtures/workload/tiny_corpus.h"
#include "core/fs.h"
#include "retrieval/nprobe_calibration.h"
#include "retrieval/passage_index.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kDim = 8;



// A deterministic unit vector per text (a stand-in for a trained encoder).
std::vector<float> hashVector(const std::string& text) {
  std::vector<float> v(kDim);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  double norm = 0;
  for (int64_t i = 0; i < kDim; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    v[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>(h >> 11) / 9007199254740992.0 - 0.5);
    norm += v[static_cast<size_t>(i)] * v[static_cast<size_t>(i)];
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

struct CountingEmbedder {
  int64_t texts = 0, calls = 0;
  int64_t failAfterCalls = -1;  // fail this call (0-based); -1: never
  Result<std::vector<float>> operator()(std::span<const std::string> batch) {
    if (calls++ == failAfterCalls) return Status::ioError("embedder crashed");
    std::vector<float> out;
    for (const std::string& t : batch) {
      std::vector<float> v = hashVector(t);
      out.insert(out.end(), v.begin(), v.end());
    }
    texts += static_cast<int64_t>(batch.size());
    return out;
  }
};

}  // namespace

class TestPassageIndex : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path corpus() const { return fs::path(m_dir.path().toStdString()) / "corpus.db"; }

  PassageIndexParams params(const char* base) const {
    PassageIndexParams p;
    p.corpus = corpus();
    p.base = fs::path(m_dir.path().toStdString()) / base;
    p.fingerprint = "hash-embedder-1";
    p.dim = kDim;
    p.batch = 16;
    p.nlist = 4;
    return p;
  }

private Q_SLOTS:
  void initTestCase() {
    testing::TinyCorpusSpec spec;
    spec.entities = 100;
    spec.passages = true;
    QVERIFY(testing::makeTinyCorpus(corpus(), spec).isOk());
  }

  void buildsVectorsInIdOrderAndAnIndexOverThem() {
    CountingEmbedder e;
    auto built = buildPassageIndex(params("a"), std::ref(e));
    QVERIFY2(built.isOk(), built.status().message().c_str());
    QCOMPARE(built->passages, int64_t{100});
    QCOMPARE(built->resumedFrom, int64_t{0});
    QCOMPARE(e.texts, int64_t{100});
    auto idx = PassageIndex::load(params("a").base, "hash-embedder-1");
    QVERIFY2(idx.isOk(), idx.status().message().c_str());
    QCOMPARE(idx->size(), int64_t{100});
    // Passage 37's own vector finds passage 37 first, exactly and through all clusters.
    std::vector<float> q = hashVector(testing::tinyPassage(37));
    auto exact = idx->searchExact(q, 3);
    QVERIFY(exact.isOk());
    QCOMPARE(exact->at(0).at(0), int64_t{37});
    auto ivf = idx->searchIvf(q, 3, 4);
    QVERIFY(ivf.isOk());
    QCOMPARE(ivf->at(0), exact->at(0));
    // A second build finds the finished vectors and embeds nothing.
    CountingEmbedder again;
    QVERIFY(buildPassageIndex(params("a"), std::ref(again)).isOk());
    QCOMPARE(again.texts, int64_t{0});
  }

  void anInterruptedEmbeddingResumesAfterItsLastWholeBatch() {
    CountingEmbedder crash;
    crash.failAfterCalls = 3;  // batches 0..2 (48 passages) are written, then it fails
    auto first = buildPassageIndex(params("b"), std::ref(crash));
    QVERIFY(mentions(first.status(), {"embedder crashed"}));
    QVERIFY(!fs::exists(fs::path(params("b").base) += ".vectors"));
    CountingEmbedder rest;
    auto second = buildPassageIndex(params("b"), std::ref(rest));
    QVERIFY2(second.isOk(), second.status().message().c_str());
    QCOMPARE(second->resumedFrom, int64_t{48});
    QCOMPARE(rest.texts, int64_t{52});
    // The result equals an uninterrupted build.
    auto a = PassageIndex::load(params("a").base, "hash-embedder-1");
    auto b = PassageIndex::load(params("b").base, "hash-embedder-1");
    QVERIFY(a.isOk() && b.isOk());
    QVERIFY(std::equal(a->vectors().begin(), a->vectors().end(), b->vectors().begin(), b->vectors().end()));
  }

  void otherEmbeddersAndBadInputAreRefused() {
    QCOMPARE(PassageIndex::load(params("a").base, "another-embedder").status().code(), StatusCode::SchemaMismatch);
    QVERIFY(mentions(PassageIndex::load(params("absent").base, "x").status(), {"ragraph index build"}));
    auto wrongSize = [](std::span<const std::string> batch) -> Result<std::vector<float>> {
      return std::vector<float>(batch.size() * 3, 0.0f);
    };
    QVERIFY(mentions(buildPassageIndex(params("c"), wrongSize).status(), {"dimension 8"}));
    PassageIndexParams noCorpus = params("d");
    noCorpus.corpus = fs::path(m_dir.path().toStdString()) / "absent.db";
    QVERIFY(!buildPassageIndex(noCorpus, CountingEmbedder{}).isOk());
  }

  // Queries near their gold passages (noisy enough that one cluster often misses them): the
  // calibrated nprobe is the smallest whose IVF recall@5 reaches the target share of exact.
  void calibratedNprobeIsTheSmallestThatKeepsTheTargetRecall() {
    auto idx = PassageIndex::load(params("a").base, "hash-embedder-1");
    QVERIFY(idx.isOk());
    std::vector<float> queries;
    std::vector<int64_t> gold;
    uint64_t h = 7;
    for (int entity = 1; entity <= 100; ++entity) {
      std::vector<float> v = hashVector(testing::tinyPassage(entity));
      double norm = 0;
      for (float& x : v) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        x += static_cast<float>((static_cast<double>(h >> 11) / 9007199254740992.0 - 0.5) * 0.6);
        norm += x * x;
      }
      for (float& x : v) queries.push_back(static_cast<float>(x / std::sqrt(norm)));
      gold.push_back(entity);
    }
    gold[3] = -1;  // a question without a gold passage is left out
    auto recall = [&](int64_t nprobe) {
      auto rows = nprobe == 0 ? idx->searchExact(queries, 5) : idx->searchIvf(queries, 5, nprobe);
      double found = 0;
      for (size_t i = 0; i < gold.size(); ++i)
        if (gold[i] >= 0) found += std::find(rows->at(i).begin(), rows->at(i).end(), gold[i]) != rows->at(i).end();
      return found / 99.0;
    };
    const double flat = recall(0);
    QVERIFY(flat > 0.5);
    QVERIFY2(recall(1) < flat, "the fixture must make one cluster lose recall, or the test proves nothing");

    NprobeCalibrationParams exact;
    exact.target = 1.0;
    exact.confidence = 0.0;  // the point estimate
    auto c = calibrateNprobe(*idx, queries, gold, "hash-embedder-1", exact);
    QVERIFY2(c.isOk(), c.status().message().c_str());
    QCOMPARE(c->queries, int64_t{99});
    QCOMPARE(c->flatRecall, flat);
    QVERIFY(c->nprobe > 1 && c->nprobe <= 4);
    QCOMPARE(c->ivfRecall, recall(c->nprobe));
    QVERIFY(c->ivfRecall >= flat);
    QVERIFY(recall(c->nprobe - 1) < flat);
    QCOMPARE(c->probes.at(c->nprobe), c->ivfRecall);

    // Asking for the target with confidence costs clusters: the lower bound, not the ratio,
    // must reach it.
    NprobeCalibrationParams point, confident;
    point.target = confident.target = 0.9;
    point.confidence = 0.0;
    auto byPoint = calibrateNprobe(*idx, queries, gold, "hash-embedder-1", point);
    auto byBound = calibrateNprobe(*idx, queries, gold, "hash-embedder-1", confident);
    QVERIFY(byPoint.isOk() && byBound.isOk());
    QCOMPARE(byBound->confidence, 0.95);
    QVERIFY(byBound->ratioLowerBound >= 0.9);
    QVERIFY(byBound->ratioLowerBound <= byBound->ivfRecall / byBound->flatRecall);
    QVERIFY(byBound->nprobe >= byPoint->nprobe);
    QVERIFY(byPoint->ivfRecall / byPoint->flatRecall >= 0.9);

    NprobeCalibrationParams lenient;
    lenient.target = 0.01;
    auto loose = calibrateNprobe(*idx, queries, gold, "hash-embedder-1", lenient);
    QVERIFY(loose.isOk());
    QCOMPARE(loose->nprobe, int64_t{1});

    // Stored next to the index, for this embedder only.
    const fs::path base = params("a").base;
    QVERIFY(saveNprobeCalibration(base, *c).isOk());
    auto back = loadNprobeCalibration(base, "hash-embedder-1");
    QVERIFY(back.isOk() && back->has_value());
    QCOMPARE((*back)->nprobe, c->nprobe);
    QCOMPARE((*back)->probes, c->probes);
    QVERIFY(loadNprobeCalibration(base, "another-embedder")->has_value() == false);
    QVERIFY(loadNprobeCalibration(params("absent").base, "hash-embedder-1")->has_value() == false);
    // A file of the earlier point-estimate rule has no "confidence": measured again, not used.
    QVERIFY(writeFileAtomic(nprobeCalibrationPath(base), "{\"fingerprint\": \"hash-embedder-1\", \"nprobe\": 3}").isOk());
    QVERIFY(loadNprobeCalibration(base, "hash-embedder-1")->has_value() == false);
    QVERIFY(writeFileAtomic(nprobeCalibrationPath(base), "{\"fingerprint\": \"hash-embedder-1\"}").isOk());
    QVERIFY(mentions(loadNprobeCalibration(base, "hash-embedder-1").status(), {"nprobe", "ragraph index build"}));

    // Bad input names the problem.
    std::vector<int64_t> none(gold.size(), -1);
    QVERIFY(mentions(calibrateNprobe(*idx, queries, none, "x").status(), {"no calibration question has a gold passage"}));
    QVERIFY(mentions(calibrateNprobe(*idx, std::span<const float>(queries).first(12), gold, "x").status(), {"dimension 8"}));
    NprobeCalibrationParams unsure;
    unsure.confidence = 1.0;
    QVERIFY(mentions(calibrateNprobe(*idx, queries, gold, "x", unsure).status(), {"confidence in [0, 1)"}));
  }

  // The bound by hand: IVF finds 3 of the 4 questions exact search finds, so R = 0.75, the
  // paired differences are 0.25 (x3) and -0.75, se = sqrt(0.75 / (4 * 3)) = 0.25, and the
  // one-sided 95 % quantile is 1.6449.
  void recallRatioLowerBoundIsTheDeltaMethodBound() {
    const std::vector<uint8_t> ivf{1, 1, 0, 1}, exact{1, 1, 1, 1};
    QVERIFY(std::abs(recallRatioLowerBound(ivf, exact, 0.95) - (0.75 - 1.644854 * 0.25)) < 1e-5);
    QCOMPARE(recallRatioLowerBound(ivf, exact, 0.0), 0.75);
    QCOMPARE(recallRatioLowerBound(ivf, exact, 0.5), 0.75);
    // Questions both searches miss, or both find, carry no uncertainty about the ratio.
    const std::vector<uint8_t> same{1, 0, 0, 1};
    QCOMPARE(recallRatioLowerBound(same, same, 0.99), 1.0);
    QCOMPARE(recallRatioLowerBound(ivf, std::vector<uint8_t>(4, 0), 0.95), 0.0);
    // More questions with the same ratio: a tighter bound.
    std::vector<uint8_t> ivf100, exact100(100, 1);
    for (int i = 0; i < 25; ++i) ivf100.insert(ivf100.end(), {1, 1, 0, 1});
    QVERIFY(recallRatioLowerBound(ivf100, exact100, 0.95) > recallRatioLowerBound(ivf, exact, 0.95));
  }
};

QTEST_GUILESS_MAIN(TestPassageIndex)
#include "test_passage_index.moc"
