// TextEmbedder (model/text_embedder.h): the same vectors as the encoder it wraps whatever the
// batching, unit rows in the caller's order, and a fingerprint that follows the weights.
#include "model/bert.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way

#include <QtTest>

#include <filesystem>

#include "core/fork_join.h"
#include "core/fs.h"
#include "model/bpe_trainer.h"
#include "model/lexical_words.h"
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

  // The lexical branch: its components follow the unit pooled ones (zero at weight 0, which keeps
  // the pooled part as it was); the kernels' vectors are BertModel::embed's over the texts'
  // words; a saved branch loads back; and the inner product of texts sharing a word grows.
  void aLexicalBranchAppendsWholeWords() {
    const fs::path root = fs::path(m_dir.path().toStdString()) / "lexical";
    const LexicalStatistics stats = lexicalStatistics(m_texts, 64);
    const int64_t lexDim = 256, dim = 16 + lexDim;
    auto plain = TextEmbedder::load(m_model);
    QVERIFY(plain.isOk());
    auto before = (*plain)->embed(m_texts);
    QVERIFY(before.isOk());
    auto write = [&](const BertModel& m, const std::string& name) {
      const fs::path dir = root / name;
      QVERIFY(m.save(dir).isOk());
      fs::copy_file(m_model / "tokenizer.json", dir / "tokenizer.json");
    };
    Result<BertModel> zero = m_bert->withLexical(stats, lexDim, 0.0);
    QVERIFY2(zero.isOk(), zero.status().message().c_str());
    QCOMPARE(zero->config().lexicalBuckets, int64_t{64});
    write(*zero, "zero");
    auto z = TextEmbedder::load(root / "zero");
    QVERIFY2(z.isOk(), z.status().message().c_str());
    QCOMPARE((*z)->dim(), dim);
    QVERIFY((*z)->fingerprint() != (*plain)->fingerprint());
    auto same = (*z)->embed(m_texts, 3);
    QVERIFY(same.isOk());
    for (size_t t = 0; t < m_texts.size(); ++t)
      for (int64_t i = 0; i < dim; ++i) {
        const float want = i < 16 ? (*before)[t * 16 + static_cast<size_t>(i)] : 0.0f;
        QVERIFY(std::abs((*same)[t * static_cast<size_t>(dim) + static_cast<size_t>(i)] - want) < 1e-6f);
      }
    QVERIFY(mentions(zero->withLexical(stats, lexDim, 0.03).status(), {"lexical branch already"}));
    QVERIFY(mentions(m_bert->withLexical(LexicalStatistics{}, lexDim, 0.03).status(), {"at least one word bucket"}));
    QVERIFY(mentions(m_bert->withLexical(stats, 0, 0.03).status(), {"at least one component"}));
    QVERIFY(mentions(m_bert->withLexical(stats, lexDim, -1).status(), {">= 0"}));

    // Weight 0.5: word weights sqrt(0.5 idf); saveEmbedderWithLexical writes the same model.
    const BertModel lexical = *m_bert->withLexical(stats, lexDim, 0.5);
    QVERIFY(std::abs(lexical.weights().lexicalWeight[0].item<float>() - std::sqrt(0.5f * stats.idf[0])) < 1e-6f);
    const fs::path saved = root / "saved";
    Status s = saveEmbedderWithLexical(m_model, saved, stats, lexDim, 0.5);
    QVERIFY2(s.isOk(), s.message().c_str());
    QVERIFY(mentions(saveEmbedderWithLexical(m_model, saved, stats, lexDim, 0.5), {"exists"}));
    QVERIFY(mentions(saveEmbedderWithLexical(saved, root / "twice", stats, lexDim, 0.5), {"lexical branch already"}));
    QVERIFY(!fs::exists(root / "twice"));
    auto back = BertModel::load(saved);
    QVERIFY2(back.isOk(), back.status().message().c_str());
    QVERIFY(torch::equal(back->weights().lexicalWeight, lexical.weights().lexicalWeight));
    QCOMPARE(back->config().lexicalAvgWords, stats.avgWords);
    auto e = TextEmbedder::load(saved);
    QVERIFY(e.isOk());
    auto got = (*e)->embed(m_texts, 3);
    QVERIFY(got.isOk());
    torch::NoGradGuard noGrad;
    for (size_t i = 0; i < m_texts.size(); ++i) {
      std::vector<int32_t> ids = m_tok->encode(m_texts[i], {.parseSpecial = false});
      ids.resize(std::min<size_t>(ids.size(), 32));
      const std::vector<int64_t> ids64(ids.begin(), ids.end());
      const auto n = static_cast<int64_t>(ids64.size());
      const std::vector<Words> rowWords = {textWords(m_texts[i])};
      torch::Tensor ref = lexical.embed(torch::tensor(ids64).view({1, n}), torch::ones({1, n}, torch::kBool), rowWords)[0];
      QCOMPARE(ref.size(0), dim);
      QVERIFY2(torch::allclose(torch::from_blob(got->data() + i * static_cast<size_t>(dim), {dim}, torch::kFloat32), ref,
                               1e-5, 1e-6),
               m_texts[i].c_str());
    }
    auto dot = [](const std::vector<float>& v, size_t stride, size_t a, size_t b) {
      double sum = 0;
      for (size_t j = 0; j < stride; ++j) sum += static_cast<double>(v[a * stride + j]) * v[b * stride + j];
      return sum;
    };
    // "fox" (3) shares its word with "the quick brown fox" (0), none with "running" (6) or
    // "brown paper bag" (5): the branch widens the margin of the text that shares it.
    for (size_t other : {size_t{5}, size_t{6}}) {
      const double with = dot(*got, static_cast<size_t>(dim), 3, 0) - dot(*got, static_cast<size_t>(dim), 3, other);
      const double without = dot(*before, 16, 3, 0) - dot(*before, 16, 3, other);
      qInfo("fox: margin over text %zu %.3f plain, %.3f with the branch", other, without, with);
      QVERIFY(with > without + 0.1);
    }
  }

  // useBackend (model/encoder_backend.h): the backend's pooled vectors come back in the caller's
  // order (embed() sorts texts by length inside), the lexical branch's components are still the
  // host's, the backend gets the weights the CPU kernels use, and its errors (and an encoder it
  // cannot run) surface with their messages. A host double stands in for the GPU
  // (tests/kernels/test_bert_encoder.cpp compares the CUDA one with the CPU kernels).
  void aDeviceBackendComputesThePooledPart() {
    struct Double final : EncoderBackend {
      int64_t hidden = 0;
      int* calls = nullptr;
      bool fail = false;
      std::string description() const override { return "double:0"; }
      Status encode(std::span<const std::vector<int32_t>* const> texts, float* out, int64_t stride) override {
        ++*calls;
        if (fail) return Status::internal("the device fell over");
        for (size_t t = 0; t < texts.size(); ++t) {  // [length, first token, 0, ...]
          std::fill(out + t * stride, out + t * stride + hidden, 0.0f);
          out[t * stride] = static_cast<float>(texts[t]->size());
          out[t * stride + 1] = static_cast<float>(texts[t]->front());
        }
        return Status::ok();
      }
    };
    int calls = 0;
    EncoderShape seen;
    const float* seenWord = nullptr;
    bool fail = false;
    auto factory = [&](const EncoderShape& shape, const EncoderWeights& w) -> Result<std::unique_ptr<EncoderBackend>> {
      seen = shape;
      seenWord = w.word;
      if (w.layers.size() != 2 || !w.layers[1].outNormBias || !w.tokenType) return Status::internal("weights missing");
      auto d = std::make_unique<Double>();
      d->hidden = shape.hidden;
      d->calls = &calls;
      d->fail = fail;
      return std::unique_ptr<EncoderBackend>(std::move(d));
    };
    const fs::path dir = fs::path(m_dir.path().toStdString()) / "backend-lexical";
    const int64_t lexDim = 64, dim = 16 + lexDim;
    QVERIFY(saveEmbedderWithLexical(m_model, dir, lexicalStatistics(m_texts, 32), lexDim, 0.5).isOk());
    auto host = TextEmbedder::load(dir);
    auto dev = TextEmbedder::load(dir);
    QVERIFY(host.isOk() && dev.isOk());
    QCOMPARE((*dev)->device(), std::string("cpu"));
    Status used = (*dev)->useBackend(factory);
    QVERIFY2(used.isOk(), used.message().c_str());
    QCOMPARE((*dev)->device(), std::string("double:0"));
    QCOMPARE(seen.hidden, int64_t{16});
    QCOMPARE(seen.heads, int64_t{2});
    QCOMPARE(seen.intermediate, int64_t{32});
    QVERIFY(seenWord != nullptr);
    auto want = (*host)->embed(m_texts, 3);
    auto got = (*dev)->embed(m_texts, 3);
    QVERIFY2(got.isOk(), got.status().message().c_str());
    QCOMPARE(calls, 3);  // 7 texts in batches of 3
    for (size_t t = 0; t < m_texts.size(); ++t) {
      const std::vector<int32_t> ids = m_tok->encode(m_texts[t], {.parseSpecial = false});
      const float* row = got->data() + t * static_cast<size_t>(dim);
      QCOMPARE(row[0], static_cast<float>(std::min<size_t>(ids.size(), 32)));
      QCOMPARE(row[1], static_cast<float>(ids.front()));
      for (int64_t i = 16; i < dim; ++i)
        QCOMPARE(row[i], (*want)[t * static_cast<size_t>(dim) + static_cast<size_t>(i)]);
    }
    // Batches of fewer than minTexts texts stay on the CPU kernels: of 7 texts in batches of 3,
    // the two full batches go to the device and the last text is the host's vector.
    auto split = TextEmbedder::load(dir);
    QVERIFY(mentions((*split)->useBackend(factory, 0), {"at least 1 text"}));
    QVERIFY((*split)->useBackend(factory, 3).isOk());
    QCOMPARE((*split)->device(), std::string("double:0, batches of 3+ texts (smaller on the cpu)"));
    calls = 0;
    auto mixed = (*split)->embed(m_texts, 3);
    QVERIFY(mixed.isOk());
    QCOMPARE(calls, 2);
    size_t onHost = 0;
    for (size_t t = 0; t < m_texts.size(); ++t)
      if (std::equal(mixed->begin() + static_cast<std::ptrdiff_t>(t * dim), mixed->begin() + static_cast<std::ptrdiff_t>((t + 1) * dim),
                     want->begin() + static_cast<std::ptrdiff_t>(t * dim)))
        ++onHost;
    QCOMPARE(onHost, size_t{1});
    auto two = (*split)->embed(std::span<const std::string>(m_texts.data(), 2), 3);
    QVERIFY(two.isOk());
    QCOMPARE(calls, 2);  // two texts: one batch below the device's minimum
    QVERIFY(std::equal(two->begin(), two->end(), want->begin()));

    fail = true;
    auto failing = TextEmbedder::load(dir);
    QVERIFY((*failing)->useBackend(factory).isOk());
    QVERIFY(mentions((*failing)->embed(m_texts).status(), {"the device fell over"}));
    QVERIFY(mentions((*failing)->useBackend([](const EncoderShape&, const EncoderWeights&) -> Result<std::unique_ptr<EncoderBackend>> {
              return Status::unavailable("no CUDA device for the query encoder");
            }),
                     {"no CUDA device"}));
    auto bf16 = TextEmbedder::load(dir, "bf16");
    QVERIFY(bf16.isOk());
    QVERIFY(mentions((*bf16)->useBackend(factory), {"load it with dtype f32"}));
  }
};

QTEST_GUILESS_MAIN(TestTorchTextEmbedder)
#include "test_torch_text_embedder.moc"
