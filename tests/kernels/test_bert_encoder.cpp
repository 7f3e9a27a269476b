// The embedder's GPU encoder (kernels/bert_encoder.h) and its kernels against the CPU kernels:
// layer_norm.cuh against cpu::layerNorm, gelu.cuh against cpu::gelu (whose erf is within 1.5e-7),
// encoder_attention.cuh against cpu::attendBidirectional per text, and whole vectors of a
// TextEmbedder on the CUDA backend against the same embedder on its CPU kernels: a tiny random
// encoder, and the shipped one (datasets/models/rag-embedder, or $RAGWB_EMBEDDER, when present)
// on questions of the corpus's kinds. Tolerances: 1e-5 absolute + 1e-5 relative for the ops;
// 2e-5 absolute per component of a unit vector (F32 sums in another order through 2 to 4
// layers). Skips (exit 77) without a CUDA device.
#include "model/bert.h"  // torch before Qt

#include <cstdlib>
#include <filesystem>

#include "../engine/tiny_embedder.h"
#include "bert_encoder.h"
#include "encoder_attention.cuh"
#include "gelu.cuh"
#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "layer_norm.cuh"
#include "model/decode_kernels.h"
#include "model/text_embedder.h"

using namespace rag;
using namespace rag::cuda::testing;
namespace fs = std::filesystem;

namespace {

// The same texts through `dir`'s embedder on the CPU kernels and on the GPU backend.
void compareEmbedders(const fs::path& dir, const std::vector<std::string>& texts, int64_t batch) {
  auto cpu = model::TextEmbedder::load(dir);
  auto gpu = model::TextEmbedder::load(dir);
  QVERIFY2(cpu.isOk() && gpu.isOk(), "loading the embedder");
  const Status used = (*gpu)->useBackend(cuda::cudaEncoderBackendFactory());
  QVERIFY2(used.isOk(), used.toString().c_str());
  QVERIFY((*gpu)->device().starts_with("cuda:0"));
  auto want = (*cpu)->embed(texts, batch);
  auto got = (*gpu)->embed(texts, batch);
  QVERIFY2(got.isOk(), got.status().toString().c_str());
  expectClose(*got, *want, 2e-5, 0, "encoder vectors");
  // A second call reuses the grown buffers: the same vectors again.
  auto again = (*gpu)->embed(texts, batch);
  QVERIFY(again.isOk());
  QVERIFY(*again == *got);
}

}  // namespace

class TestBertEncoderGpu : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

private Q_SLOTS:
  void layerNormMatchesCpu_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("dim");
    QTest::newRow("narrow") << 3 << 16;
    QTest::newRow("an encoder's rows") << 57 << 256;
    QTest::newRow("wider than the block") << 2 << 1031;
  }
  void layerNormMatchesCpu() {
    QFETCH(int, rows);
    QFETCH(int, dim);
    const std::vector<float> x = randomVector(size_t(rows) * dim, 1, 3.0f), g = randomVector(size_t(dim), 2),
                             b = randomVector(size_t(dim), 3);
    std::vector<float> want(x.size());
    model::cpu::layerNorm(x.data(), g.data(), b.data(), rows, dim, 1e-12f, want.data());
    cuda::DeviceBuffer dx = toDevice(x), dg = toDevice(g), db = toDevice(b);
    const Status s = cuda::layerNorm(dx.as<float>(), dg.as<float>(), db.as<float>(), rows, dim, 1e-12f, dx.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dx, x.size()), want, 1e-5, 1e-5, "layerNorm");
  }

  void geluMatchesCpu() {
    std::vector<float> x = randomVector(70001, 4, 3.0f);
    x[0] = 0.0f;
    x[1] = -12.0f;
    x[2] = 12.0f;
    std::vector<float> want(x.size());
    model::cpu::gelu(x.data(), std::ssize(x), want.data());
    cuda::DeviceBuffer dx = toDevice(x), dout = toDevice(std::vector<float>(x.size()));
    const Status s = cuda::gelu(dx.as<float>(), std::ssize(x), dout.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dout, x.size()), want, 1e-5, 1e-5, "gelu");
  }

  // Texts of 1, 7 and 40 rows packed together; heads of 16 and 64: each row over its own text.
  void encoderAttentionMatchesCpu_data() {
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("headDim");
    QTest::newRow("4 x 16") << 4 << 16;
    QTest::newRow("2 x 64") << 2 << 64;
  }
  void encoderAttentionMatchesCpu() {
    QFETCH(int, heads);
    QFETCH(int, headDim);
    const std::vector<int32_t> lengths = {7, 1, 40};
    std::vector<int32_t> firstRow = {0}, textOf;
    for (size_t t = 0; t < lengths.size(); ++t) {
      firstRow.push_back(firstRow.back() + lengths[t]);
      textOf.insert(textOf.end(), size_t(lengths[t]), int32_t(t));
    }
    const int64_t rows = firstRow.back(), width = int64_t(heads) * headDim;
    std::vector<int32_t> rowIds(static_cast<size_t>(rows));
    std::iota(rowIds.begin(), rowIds.end(), 0);
    const std::vector<float> qkv = randomVector(size_t(rows * 3 * width), 5);
    const float scale = 1.0f / std::sqrt(float(headDim));
    std::vector<float> want(size_t(rows * width));
    for (size_t t = 0; t < lengths.size(); ++t) {
      const int64_t first = firstRow[t], n = lengths[t];
      std::vector<float> k(size_t(n * width)), v(size_t(n * width));
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < width; ++i) {
          k[size_t(j * width + i)] = qkv[size_t((first + j) * 3 * width + width + i)];
          v[size_t(j * width + i)] = qkv[size_t((first + j) * 3 * width + 2 * width + i)];
        }
      const int32_t block = 0;
      const model::cpu::PagedKv kv{k.data(), v.data(), &block, n, heads, headDim};
      std::vector<float> scratch(size_t(model::cpu::attendPrefillScratch(n, n, headDim)));
      model::cpu::attendBidirectional(qkv.data() + first * 3 * width, 3 * width, n, heads, kv, scale, scratch.data(),
                                      want.data() + first * width, width);
    }
    cuda::DeviceBuffer dqkv = toDevice(qkv), dTextOf = toDevice(textOf), dFirst = toDevice(firstRow),
                       dRowIds = toDevice(rowIds), dk = toDevice(std::vector<float>(want.size())),
                       dv = toDevice(std::vector<float>(want.size())), dout = toDevice(std::vector<float>(want.size()));
    const Status s = cuda::encoderAttention(dqkv.as<float>(), rows, heads, headDim, dTextOf.as<int32_t>(), dFirst.as<int32_t>(),
                                            dRowIds.as<int32_t>(), dk.as<float>(), dv.as<float>(), scale, dout.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dout, want.size()), want, 1e-5, 1e-5, "encoder attention");
  }

  void tinyEncoderGivesTheCpuVectors() {
    const std::vector<std::string> texts = {"the quick brown fox", "a", "jumps over the lazy dog and keeps running far away",
                                            "fox", "dog dog dog", "brown paper bag", "running"};
    const fs::path dir = fs::path(m_dir.path().toStdString()) / "tiny";
    auto bert = writeTinyEmbedder(dir, texts, 7);
    QVERIFY2(bert.isOk(), bert.status().message().c_str());
    compareEmbedders(dir, texts, 3);
    compareEmbedders(dir, texts, 32);
  }

  void shippedEncoderGivesTheCpuVectors() {
    const char* env = std::getenv("RAGWB_EMBEDDER");
    const fs::path dir = env ? fs::path(env) : fs::path(RAGWB_SOURCE_DIR) / "datasets/models/rag-embedder";
    if (!fs::exists(dir / "model.safetensors")) QSKIP("no shipped embedder here (set RAGWB_EMBEDDER)");
    std::vector<std::string> texts;
    for (const char* q : {"What is a compiler?", "What is a dog a kind of?", "Which language did Dennis Ritchie design?",
                          "What does FOLDOC say about a linker?", "What is the opposite of hot?"})
      for (int i = 0; i < 8; ++i) texts.push_back(std::string(q) + std::string(size_t(i), '?'));
    texts.push_back(std::string(600, 'x'));  // cut at the encoder's positions
    compareEmbedders(dir, texts, 32);
  }

  void badTokensAreRefused() {
    const model::EncoderShape shape{.vocab = 10, .positions = 4, .hidden = 8, .heads = 2, .intermediate = 16};
    const std::vector<float> w(size_t(10 * 8 * 4), 0.1f);
    model::EncoderWeights weights{.word = w.data(), .position = w.data(), .tokenType = w.data(), .embedNorm = w.data(),
                                  .embedNormBias = w.data(), .layers = {}};
    auto e = cuda::CudaBertEncoder::create(shape, weights);
    QVERIFY2(e.isOk(), e.status().toString().c_str());
    std::vector<float> out(8);
    const std::vector<int32_t> outside = {3, 10}, tooLong = {1, 2, 3, 4, 5}, empty;
    for (const std::vector<int32_t>* ids : {&outside, &tooLong, &empty}) {
      const std::vector<const std::vector<int32_t>*> texts = {ids};
      const Status s = (*e)->encode(texts, out.data(), 8);
      QCOMPARE(s.code(), StatusCode::InvalidArgument);
    }
    const std::vector<int32_t> fine = {1, 2};
    const std::vector<const std::vector<int32_t>*> texts = {&fine};
    QVERIFY((*e)->encode(texts, out.data(), 8).isOk());
    double norm = 0;
    for (float x : out) norm += double(x) * x;
    QVERIFY(std::abs(norm - 1.0) < 1e-5 || norm == 0.0);
  }
};

RAGWB_GPU_TEST_MAIN(TestBertEncoderGpu)
#include "test_bert_encoder.moc"
