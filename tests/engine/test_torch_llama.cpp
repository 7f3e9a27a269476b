// The libtorch Llama decoder against logits computed by an independent Python reference over a
// checkpoint written by a different safetensors writer (tests/fixtures/llama/make_fixture.py).
#include "model/llama.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way

#include <QtTest>

#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "core/json.h"
#include "model/model_config.h"
#include "model/model_grow.h"

using namespace rag;
using namespace rag::model;
namespace fs = std::filesystem;

namespace {
const fs::path kFixture = fs::path(RAGWB_FIXTURES_DIR) / "llama";

struct Expected {
  std::vector<int64_t> tokens;
  torch::Tensor logits;  // F32 [n, vocab]
};

Expected loadExpected() {
  Expected e;
  auto text = readFile(kFixture / "expected.json");
  auto doc = parseJson(*text);
  for (const JsonValue& t : doc->find("tokens")->asArray()) e.tokens.push_back(*t.asInt64());
  std::vector<float> flat;
  int64_t rows = 0, cols = 0;
  for (const JsonValue& row : doc->find("logits")->asArray()) {
    ++rows;
    cols = static_cast<int64_t>(row.size());
    for (const JsonValue& v : row.asArray()) flat.push_back(static_cast<float>(v.asDouble()));
  }
  e.logits = torch::from_blob(flat.data(), {rows, cols}, torch::kFloat32).clone();
  return e;
}

double nmse(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).pow(2).sum() / b.pow(2).sum()).item<double>();
}
}  // namespace

class TestTorchLlama : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(2); }

  void f32LogitsMatchTheReference() {
    auto m = LlamaModel::load(kFixture);
    QVERIFY2(m.isOk(), m.status().message().c_str());
    QCOMPARE(m->config().numKeyValueHeads, int64_t{2});  // grouped-query attention is exercised
    Expected e = loadExpected();
    torch::Tensor logits = m->forward(torch::tensor(e.tokens, torch::kLong));
    QCOMPARE(logits.sizes().vec(), e.logits.sizes().vec());
    const double maxErr = (logits - e.logits).abs().max().item<double>();
    QVERIFY2(maxErr < 1e-4, qPrintable(QString("max abs error %1").arg(maxErr)));
  }

  void forwardIsCausal() {
    auto m = LlamaModel::load(kFixture);
    Expected e = loadExpected();
    torch::Tensor full = m->forward(torch::tensor(e.tokens, torch::kLong));
    std::vector<int64_t> prefix(e.tokens.begin(), e.tokens.begin() + 4);
    torch::Tensor part = m->forward(torch::tensor(prefix, torch::kLong));
    QVERIFY((part - full.narrow(0, 0, 4)).abs().max().item<double>() < 1e-5);
  }

  void bf16StaysCloseToF32() {
    auto m32 = LlamaModel::load(kFixture);
    auto m16 = LlamaModel::load(kFixture, torch::kBFloat16);
    QVERIFY(m16.isOk());
    QCOMPARE(m16->dtype(), torch::kBFloat16);
    Expected e = loadExpected();
    torch::Tensor t = torch::tensor(e.tokens, torch::kLong);
    const double err = nmse(m16->forward(t), m32->forward(t));
    QVERIFY2(err < 1e-3, qPrintable(QString("BF16 NMSE %1").arg(err)));
  }

  void ropeComposesAsRotations() {
    // Rotating keys at positions p and then by Δ equals rotating them at p + Δ: the identity
    // KV re-encoding (Block-Attention, DepCache) relies on.
    torch::manual_seed(1);
    torch::Tensor x = torch::randn({3, 5, 16});
    torch::Tensor p = torch::arange(0, 5, torch::kLong);
    auto [c0, s0] = ropeTables(p, 16, 10000.0);
    auto [cd, sd] = ropeTables(torch::full({5}, 37, torch::kLong), 16, 10000.0);
    auto [c1, s1] = ropeTables(p + 37, 16, 10000.0);
    torch::Tensor twice = applyRope(applyRope(x, c0, s0), cd, sd);
    torch::Tensor once = applyRope(x, c1, s1);
    QVERIFY(nmse(twice, once) < 1e-10);
    QVERIFY(nmse(applyRope(x, c0, s0), x) > 1e-3);  // it does rotate something
  }

  void saveThenLoadIsBitExact() {
    auto m = LlamaModel::load(kFixture);
    QTemporaryDir tmp;
    const fs::path dir = fs::path(tmp.path().toStdString()) / "copy";
    QVERIFY(m->save(dir).isOk());
    auto back = LlamaModel::load(dir);
    QVERIFY2(back.isOk(), back.status().message().c_str());
    QCOMPARE(back->config().numKeyValueHeads, m->config().numKeyValueHeads);
    QCOMPARE(back->config().tieWordEmbeddings, m->config().tieWordEmbeddings);
    const std::vector<torch::Tensor> a = m->parameters(), b = back->parameters();
    QCOMPARE(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) QVERIFY(torch::equal(a[i], b[i]));
  }

  void initRandomIsSeededAndTrainable() {
    LlamaConfig c;
    c.hiddenSize = 32; c.intermediateSize = 64; c.numHiddenLayers = 2;
    c.numAttentionHeads = 4; c.numKeyValueHeads = 2; c.headDim = 8;
    c.maxPositionEmbeddings = 64; c.vocabSize = 50; c.tieWordEmbeddings = true;
    auto a = LlamaModel::initRandom(c, 7), b = LlamaModel::initRandom(c, 7), other = LlamaModel::initRandom(c, 8);
    QVERIFY(a.isOk());
    QVERIFY(torch::equal(a->weights().layers[1].q, b->weights().layers[1].q));
    QVERIFY(!torch::equal(a->weights().layers[1].q, other->weights().layers[1].q));
    QCOMPARE(a->parameters().size(), size_t{1 + 2 * 9 + 1});  // tied head counted once

    // Gradients flow through the dense batched forward to every parameter.
    for (torch::Tensor p : a->parameters()) p.requires_grad_(true);
    torch::Tensor tokens = torch::randint(0, 50, {2, 6}, torch::kLong);
    torch::Tensor pos = torch::arange(6, torch::kLong).repeat({2, 1});
    torch::Tensor out = a->forwardDense(tokens, pos);
    QCOMPARE(out.sizes().vec(), (std::vector<int64_t>{2, 6, 50}));
    torch::nn::functional::cross_entropy(out.view({-1, 50}), tokens.view({-1})).backward();
    for (const torch::Tensor& p : a->parameters()) {
      QVERIFY(p.grad().defined());
      QVERIFY(p.grad().abs().sum().item<double>() > 0);
    }
    // The batched forward with an explicit causal mask equals the implicit causal one.
    torch::NoGradGuard noGrad;
    torch::Tensor causal = torch::ones({6, 6}, torch::kBool).tril().expand({2, 6, 6});
    QVERIFY((a->forwardDense(tokens, pos, causal) - a->forwardDense(tokens, pos)).abs().max().item<double>() < 1e-6);
  }

  // A model grown deeper (model/model_grow.h) computes the same logits: its new layers are copies
  // whose output projections are zero. The old layers keep their weights at their new places.
  void growingDeeperKeepsTheLogits() {
    auto m = LlamaModel::load(kFixture);
    QVERIFY(m.isOk());
    QTemporaryDir tmp;
    const fs::path dir(tmp.path().toStdString());
    const int64_t old = m->config().numHiddenLayers;
    auto g = growLlama({.modelDir = kFixture, .out = dir / "grown", .layers = old + 3});
    QVERIFY2(g.isOk(), g.status().message().c_str());
    QCOMPARE(g->layers, old + 3);
    QCOMPARE(g->newLayerIndexes.size(), size_t{3});
    auto grown = LlamaModel::load(dir / "grown");
    QVERIFY2(grown.isOk(), grown.status().message().c_str());
    QCOMPARE(grown->config().numHiddenLayers, old + 3);
    const Expected e = loadExpected();
    torch::NoGradGuard noGrad;
    const torch::Tensor tokens = torch::tensor(e.tokens, torch::kLong);
    const double diff = (grown->forward(tokens) - m->forward(tokens)).abs().max().item<double>();
    QVERIFY2(diff < 1e-5, qPrintable(QString("max logit difference %1").arg(diff)));
    const LlamaWeights& w = grown->weights();
    int64_t kept = 0;
    for (int64_t i = 0; i < old + 3; ++i) {
      const bool added = std::find(g->newLayerIndexes.begin(), g->newLayerIndexes.end(), i) != g->newLayerIndexes.end();
      if (added) {
        QCOMPARE(w.layers[i].o.abs().max().item<double>(), 0.0);
        QCOMPARE(w.layers[i].down.abs().max().item<double>(), 0.0);
        QVERIFY(torch::equal(w.layers[i].q, w.layers[i - 1].q));  // a copy of the layer before
      } else {
        QVERIFY(torch::equal(w.layers[i].o, m->weights().layers[kept].o));
        ++kept;
      }
    }
    QCOMPARE(kept, old);

    // Refusals: no deeper, an output in use, the model's own directory.
    auto shallow = growLlama({.modelDir = kFixture, .out = dir / "x", .layers = old});
    QVERIFY(!shallow.isOk());
    QVERIFY(shallow.status().message().find("--layers") != std::string::npos);
    auto used = growLlama({.modelDir = kFixture, .out = dir / "grown", .layers = old + 1});
    QVERIFY(!used.isOk());
    QVERIFY(used.status().message().find("not empty") != std::string::npos);
    auto self = growLlama({.modelDir = dir / "grown", .out = dir / "grown", .layers = old + 4});
    QVERIFY(!self.isOk());
    QVERIFY(!growLlama({.modelDir = dir / "nowhere", .out = dir / "y", .layers = 4}).isOk());
  }

  // A model grown wider (more channels, FFN units and heads of the same size) and deeper at once
  // computes the same logits: new readers are random, new writers zero, the norms rescaled.
  void growingWiderKeepsTheLogits() {
    auto m = LlamaModel::load(kFixture);
    QVERIFY(m.isOk());
    const LlamaConfig& c = m->config();  // hidden 32, ffn 48, 4 heads over 2 key/value heads
    QTemporaryDir tmp;
    const fs::path dir(tmp.path().toStdString());
    auto g = growLlama({.modelDir = kFixture, .out = dir / "wide", .layers = c.numHiddenLayers + 1,
                        .hidden = 48, .intermediate = 80, .heads = 6, .seed = 3});
    QVERIFY2(g.isOk(), g.status().message().c_str());
    auto wide = LlamaModel::load(dir / "wide");
    QVERIFY2(wide.isOk(), wide.status().message().c_str());
    const LlamaConfig& w = wide->config();
    QCOMPARE(w.hiddenSize, int64_t{48});
    QCOMPARE(w.intermediateSize, int64_t{80});
    QCOMPARE(w.numAttentionHeads, int64_t{6});
    QCOMPARE(w.numKeyValueHeads, int64_t{3});  // the model's two heads per key/value head
    QCOMPARE(w.headDim, c.headDim);
    QCOMPARE(w.numHiddenLayers, c.numHiddenLayers + 1);
    QVERIFY(g->parameters > g->oldParameters);
    const Expected e = loadExpected();
    torch::NoGradGuard noGrad;
    const torch::Tensor tokens = torch::tensor(e.tokens, torch::kLong);
    const double diff = (wide->forward(tokens) - m->forward(tokens)).abs().max().item<double>();
    QVERIFY2(diff < 1e-5, qPrintable(QString("max logit difference %1").arg(diff)));
    // The new units can learn: their reading weights are random, not zero.
    const LlamaLayerWeights& l0 = wide->weights().layers[0];
    QVERIFY(l0.q.narrow(0, c.numAttentionHeads * c.headDim, 2 * c.headDim).abs().max().item<double>() > 0);
    QVERIFY(l0.gate.narrow(0, c.intermediateSize, 32).abs().max().item<double>() > 0);
    QCOMPARE(l0.down.narrow(1, c.intermediateSize, 32).abs().max().item<double>(), 0.0);
    // The old heads and units read the new channels through zeros until trained.
    QCOMPARE(l0.q.narrow(0, 0, c.numAttentionHeads * c.headDim).narrow(1, c.hiddenSize, 16).abs().max().item<double>(), 0.0);
    QCOMPARE(l0.up.narrow(0, 0, c.intermediateSize).narrow(1, c.hiddenSize, 16).abs().max().item<double>(), 0.0);
    // The same seed gives the same model.
    auto again = growLlama({.modelDir = kFixture, .out = dir / "wide2", .layers = c.numHiddenLayers + 1,
                            .hidden = 48, .intermediate = 80, .heads = 6, .seed = 3});
    QVERIFY(again.isOk());
    QCOMPARE(*readFile(dir / "wide2" / "model.safetensors"), *readFile(dir / "wide" / "model.safetensors"));

    // Refusals: narrower, another group size, nothing to grow.
    auto narrow = growLlama({.modelDir = kFixture, .out = dir / "n", .hidden = 16});
    QVERIFY(!narrow.isOk());
    QVERIFY(narrow.status().message().find("--hidden 16") != std::string::npos);
    auto group = growLlama({.modelDir = kFixture, .out = dir / "q", .heads = 6, .kvHeads = 6});
    QVERIFY(!group.isOk());
    QVERIFY2(group.status().message().find("heads per key/value head") != std::string::npos,
             group.status().message().c_str());
    auto nothing = growLlama({.modelDir = kFixture, .out = dir / "z"});
    QVERIFY(!nothing.isOk());
    QVERIFY(nothing.status().message().find("nothing to grow") != std::string::npos);
  }

  void badInputIsAClearError() {
    auto m = LlamaModel::load(kFixture);
    Status s = m->checkTokens(torch::tensor(std::vector<int64_t>{1, 64}, torch::kLong));
    QCOMPARE(s.code(), StatusCode::InvalidArgument);
    QVERIFY(s.message().find("token id 64") != std::string::npos);
    QVERIFY(m->checkTokens(torch::tensor(std::vector<int64_t>{0, 63}, torch::kLong)).isOk());

    QTemporaryDir tmp;
    fs::path dir = tmp.path().toStdString();
    fs::copy_file(kFixture / "model.safetensors", dir / "model.safetensors");
    std::string cfg = *readFile(kFixture / "config.json");
    const std::string from = "\"num_hidden_layers\": 2", to = "\"num_hidden_layers\": 3";
    QVERIFY(cfg.find(from) != std::string::npos);
    QVERIFY(writeFileAtomic(dir / "config.json", std::string(cfg).replace(cfg.find(from), from.size(), to)).isOk());
    auto missing = LlamaModel::load(dir);
    QVERIFY(!missing.isOk());
    QVERIFY2(missing.status().message().find("model.layers.2.") != std::string::npos,
             missing.status().message().c_str());

    auto none = LlamaModel::load(dir / "nowhere");
    QVERIFY(!none.isOk());
    QVERIFY(none.status().message().find("config.json") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestTorchLlama)
#include "test_torch_llama.moc"
