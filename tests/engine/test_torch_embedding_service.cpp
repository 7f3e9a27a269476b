// The embedding service with the real encoder (retrieval/text_embedder_instance.h): vectors
// served through either queue equal TextEmbedder::embed's, however the queries were batched.
#include "model/bert.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way

#include <QtTest>

#include <filesystem>

#include "retrieval/embedding_service.h"
#include "retrieval/text_embedder_instance.h"
#include "status_checks.h"
#include "tiny_embedder.h"

using namespace rag;
using namespace rag::retrieval;
namespace fs = std::filesystem;

class TestTorchEmbeddingService : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path m_model;
  const std::vector<std::string> m_texts = {
      "the quick brown fox", "a", "jumps over the lazy dog and keeps running far away",
      "fox", "dog dog dog", "brown paper bag", "running", "the lazy fox runs"};

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_model = fs::path(m_dir.path().toStdString()) / "embedder";
    auto bert = writeTinyEmbedder(m_model, m_texts, 5);
    QVERIFY2(bert.isOk(), bert.status().message().c_str());
  }

  void servedVectorsEqualDirectEmbedding() {
    auto main = TextEmbedderInstance::load({.dir = m_model});
    auto aux = TextEmbedderInstance::load({.dir = m_model});
    QVERIFY2(main.isOk() && aux.isOk(), main.status().message().c_str());
    auto direct = (*main)->model().embed(m_texts, 1);
    QVERIFY(direct.isOk());
    auto svc = EmbeddingService::create({"cpu-main", *main, {}}, EmbeddingInstance{"cpu-aux", *aux, {}},
                                        {.mainDepth = 5, .auxDepth = 3, .heterogeneous = true, .maxBatch = 4});
    QVERIFY2(svc.isOk(), svc.status().message().c_str());
    QCOMPARE((*svc)->dim(), int64_t{16});
    std::vector<Submission> subs;
    for (const std::string& t : m_texts) subs.push_back((*svc)->submit(t));
    int onAux = 0;
    for (size_t i = 0; i < subs.size(); ++i) {
      QVERIFY(subs[i].route == Route::Main || subs[i].route == Route::Auxiliary);
      onAux += subs[i].route == Route::Auxiliary;
      Result<std::vector<float>> v = subs[i].result.get();
      QVERIFY2(v.isOk(), v.status().message().c_str());
      QCOMPARE(v->size(), size_t{16});
      for (size_t j = 0; j < 16; ++j)
        QVERIFY2(std::abs((*v)[j] - (*direct)[i * 16 + j]) < 1e-5f, m_texts[i].c_str());
    }
    // The main queue (depth 5) can hold at most five of the eight at once.
    QVERIFY(onAux <= 3);
    const EmbeddingServiceStats st = (*svc)->stats();
    QCOMPARE(st.main.served + st.auxiliary->served, int64_t{8});
  }

  void cudaIsRefusedWithoutADevice() {
    if (model::cudaAvailable()) QSKIP("libtorch has CUDA here: nothing to refuse");
    auto e = TextEmbedderInstance::load({.dir = m_model, .device = DeviceKind::Cuda});
    QCOMPARE(e.status().code(), StatusCode::Unavailable);
    QVERIFY(mentions(e.status(), {"CUDA", "CPU-only"}));
  }
};

QTEST_GUILESS_MAIN(TestTorchEmbeddingService)
#include "test_torch_embedding_service.moc"
