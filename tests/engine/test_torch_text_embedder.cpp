// TextEmbedder (model/text_embedder.h): the same vectors as the encoder it wraps whatever the
// batching, unit rows in the caller's order, and a fingerprint that follows the weights.
#include "model/bert.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way

#include <QtTest>

#include <filesystem>

#include "core/fork_join.h"
#include "core/fs.h"
#include "model/bpe_trainer.h"
#include "model/text_embedder.h"
#include "model/tokenizer.h"
#include "status_checks.h"
#include "tiny_embedder.h"

using namespace rag;
using namespace rag::model;
namespace fs = std::filesystem;

class TestTorchTextEmbedder : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path m_model;
  std::optional<Tokenizer> m_tok;
  std::optional<BertModel> m_bert;
  const std::vector<std::string> m_texts = {
      "the quick brown fox", "a", "jumps over the lazy dog and keeps running far away",
      "fox", "dog dog dog", "brown paper bag", "running"};

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_model = fs::path(m_dir.path().toStdString()) / "embedder";
    auto bert = writeTinyEmbedder(m_model, m_texts, 4);
    QVERIFY2(bert.isOk(), bert.status().message().c_str());
    m_bert.emplace(std::move(*bert));
    m_tok.emplace(*Tokenizer::load(m_model / "tokenizer.json"));
  }

  void vectorsEqualTheEncodersWhateverTheBatching() {
    auto e = TextEmbedder::load(m_model);
    QVERIFY2(e.isOk(), e.status().message().c_str());
    QCOMPARE((*e)->dim(), int64_t{16});
    auto all = (*e)->embed(m_texts, 3);
    QVERIFY2(all.isOk(), all.status().message().c_str());
    QCOMPARE(all->size(), m_texts.size() * 16);
    auto one = (*e)->embed(m_texts, 1);
    torch::NoGradGuard noGrad;
    for (size_t i = 0; i < m_texts.size(); ++i) {
      std::vector<int32_t> ids = m_tok->encode(m_texts[i], {.parseSpecial = false});
      std::vector<int64_t> ids64(ids.begin(), ids.begin() + std::min<std::ptrdiff_t>(32, std::ssize(ids)));
      const auto n = static_cast<int64_t>(ids64.size());
      torch::Tensor ref = m_bert->embed(torch::tensor(ids64).view({1, n}), torch::ones({1, n}, torch::kBool))[0];
      torch::Tensor got = torch::from_blob(all->data() + i * 16, {16}, torch::kFloat32);
      torch::Tensor alone = torch::from_blob(one->data() + i * 16, {16}, torch::kFloat32);
      QVERIFY2(torch::allclose(got, ref, 1e-5, 1e-6), m_texts[i].c_str());
      QVERIFY2(torch::allclose(alone, ref, 1e-5, 1e-6), m_texts[i].c_str());
      QVERIFY(std::abs(got.norm().item<double>() - 1.0) < 1e-5);
    }
  }

  // With a team, the F32 kernels split each product's output tiles, each text's attention and
  // the row-wise ops: the shipped embedder (256 wide: 12 tiles for q/k/v) gives the same vectors,
  // bit for bit, with a team of 3 as alone, in one batch and text by text.
  void aTeamGivesTheSameVectorsBitForBit() {
    auto e = TextEmbedder::load(RAGWB_SOURCE_DIR "/datasets/models/rag-embedder");
    QVERIFY2(e.isOk(), e.status().message().c_str());
    const std::vector<std::string> texts = {"What is a compiler?", "dog", "Which river flows through the capital of the country "
                                            "whose flag shows a maple leaf, and how long is it?", "a kind of tree", "x"};
    ForkJoin team(3);
    for (int64_t batch : {int64_t{32}, int64_t{1}}) {  // (a lone row takes the kernels' 1-row path)
      auto alone = (*e)->embed(texts, batch);
      auto split = (*e)->embed(texts, batch, &team);
      QVERIFY(alone.isOk());
      QVERIFY(split.isOk());
      QCOMPARE(split->size(), alone->size());
      QVERIFY2(std::equal(split->begin(), split->end(), alone->begin()), qPrintable(QString("batch %1").arg(batch)));
    }
    // And the tiny encoder against itself (one tile: the attention and row splits alone).
    auto tiny = TextEmbedder::load(m_model);
    QVERIFY(tiny.isOk());
    auto a = (*tiny)->embed(m_texts), b = (*tiny)->embed(m_texts, 32, &team);
    QVERIFY(a.isOk() && b.isOk());
    QVERIFY(*a == *b);
  }

  void longTextsAreCutAndBadInputIsRefused() {
    auto e = TextEmbedder::load(m_model, "f32", 2);
    QVERIFY(e.isOk());
    QCOMPARE((*e)->maxTokens(), int64_t{2});
    // Two texts that agree on their first two tokens embed alike once cut.
    std::vector<std::string> texts = {"the quick brown fox", "the quick"};
    std::vector<int32_t> a = m_tok->encode(texts[0], {.parseSpecial = false});
    std::vector<int32_t> b = m_tok->encode(texts[1], {.parseSpecial = false});
    QVERIFY(a.size() > 2 && b.size() >= 2 && a[0] == b[0] && a[1] == b[1]);
    auto v = (*e)->embed(texts);
    QVERIFY(v.isOk());
    for (int j = 0; j < 16; ++j) QCOMPARE((*v)[static_cast<size_t>(j)], (*v)[static_cast<size_t>(16 + j)]);
    QVERIFY(mentions((*e)->embed(std::vector<std::string>{"fox", ""}).status(), {"text 1 is empty"}));
    QVERIFY(mentions(TextEmbedder::load(m_model, "f16").status(), {"f32 or bf16"}));
    QVERIFY(!TextEmbedder::load(fs::path(m_dir.path().toStdString()) / "absent").isOk());
  }

  void theFingerprintFollowsTheWeights() {
    auto a = TextEmbedder::load(m_model);
    QVERIFY(a.isOk());
    QVERIFY((*a)->fingerprint().starts_with("bert-"));
    QCOMPARE((*TextEmbedder::load(m_model))->fingerprint(), (*a)->fingerprint());
    BertModel other = *BertModel::initRandom(m_bert->config(), 5);
    const fs::path copy = fs::path(m_dir.path().toStdString()) / "embedder2" / "embedder";
    QVERIFY(other.save(copy).isOk());
    fs::copy_file(m_model / "tokenizer.json", copy / "tokenizer.json");
    QVERIFY((*TextEmbedder::load(copy))->fingerprint() != (*a)->fingerprint());
  }
};

QTEST_GUILESS_MAIN(TestTorchTextEmbedder)
#include "test_torch_text_embedder.moc"
