// The libtorch BERT encoder (model/bert.h) against a plain-loop reference of HF BertModel's
// forward written independently here, plus padding invariance, pooling, save/load and the
// checkpoint variants HF writes.
#include "model/bert.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way

#include <QtTest>

#include <cmath>
#include <filesystem>

#include "core/fs.h"
#include "model/safetensors.h"
#include "model/tensor_io.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::model;
namespace fs = std::filesystem;

namespace {

BertConfig tinyConfig() {
  BertConfig c;
  c.architectureName = "BertModel";
  c.hiddenSize = 8;
  c.numHiddenLayers = 2;
  c.numAttentionHeads = 2;
  c.intermediateSize = 16;
  c.vocabSize = 20;
  c.maxPositionEmbeddings = 16;
  c.layerNormEps = 1e-12;
  return c;
}

using Mat = std::vector<std::vector<double>>;  // [rows][cols]

Mat matrix(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  Mat m(static_cast<size_t>(c.size(0)), std::vector<double>(static_cast<size_t>(c.size(1))));
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = 0; j < m[i].size(); ++j) m[i][j] = c[static_cast<int64_t>(i)][static_cast<int64_t>(j)].item<double>();
  return m;
}
std::vector<double> vec(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}
// y = W x + b with W [out][in].
std::vector<double> linear(const std::vector<double>& x, const torch::Tensor& w, const torch::Tensor& b) {
  Mat m = matrix(w);
  std::vector<double> bias = vec(b), y(m.size());
  for (size_t o = 0; o < m.size(); ++o) {
    y[o] = bias[o];
    for (size_t i = 0; i < x.size(); ++i) y[o] += m[o][i] * x[i];
  }
  return y;
}
std::vector<double> layerNorm(std::vector<double> x, const torch::Tensor& w, const torch::Tensor& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  std::vector<double> g = vec(w), beta = vec(b);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - mean) / std::sqrt(var + eps) * g[i] + beta[i];
  return x;
}

// HF BertModel's last hidden state for one unpadded sequence, in double precision loops.
Mat reference(const BertModel& m, const std::vector<int64_t>& tokens) {
  const BertConfig& c = m.config();
  const BertWeights& w = m.weights();
  const size_t n = tokens.size(), h = static_cast<size_t>(c.hiddenSize);
  const size_t nh = static_cast<size_t>(c.numAttentionHeads), d = h / nh;
  Mat word = matrix(w.word), pos = matrix(w.position), type = matrix(w.tokenType);
  Mat x(n, std::vector<double>(h));
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < h; ++i) x[t][i] = word[static_cast<size_t>(tokens[t])][i] + pos[t][i] + type[0][i];
    x[t] = layerNorm(x[t], w.embedNorm, w.embedNormBias, c.layerNormEps);
  }
  for (const BertLayerWeights& l : w.layers) {
    Mat q(n), k(n), v(n);
    for (size_t t = 0; t < n; ++t) {
      q[t] = linear(x[t], l.q, l.qBias);
      k[t] = linear(x[t], l.k, l.kBias);
      v[t] = linear(x[t], l.v, l.vBias);
    }
    Mat next(n);
    for (size_t t = 0; t < n; ++t) {
      std::vector<double> att(h, 0.0);
      for (size_t hd = 0; hd < nh; ++hd) {
        std::vector<double> s(n);
        double mx = -1e300, sum = 0;
        for (size_t u = 0; u < n; ++u) {
          s[u] = 0;
          for (size_t j = 0; j < d; ++j) s[u] += q[t][hd * d + j] * k[u][hd * d + j];
          s[u] /= std::sqrt(static_cast<double>(d));
          mx = std::max(mx, s[u]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (size_t u = 0; u < n; ++u)
          for (size_t j = 0; j < d; ++j) att[hd * d + j] += s[u] / sum * v[u][hd * d + j];
      }
      std::vector<double> a = linear(att, l.attnOut, l.attnOutBias);
      for (size_t i = 0; i < h; ++i) a[i] += x[t][i];
      a = layerNorm(a, l.attnNorm, l.attnNormBias, c.layerNormEps);
      std::vector<double> mid = linear(a, l.inter, l.interBias);
      for (double& e : mid) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
      std::vector<double> o = linear(mid, l.out, l.outBias);
      for (size_t i = 0; i < h; ++i) o[i] += a[i];
      next[t] = layerNorm(o, l.outNorm, l.outNormBias, c.layerNormEps);
    }
    x = std::move(next);
  }
  return x;
}

// A model whose LayerNorm weights and biases are not the trivial 1 and 0, so a wrong slot shows.
BertModel randomModel(uint64_t seed) {
  BertModel m = *BertModel::initRandom(tinyConfig(), seed);
  torch::NoGradGuard noGrad;
  torch::manual_seed(static_cast<uint64_t>(seed));
  for (torch::Tensor& t : m.parameters()) t.add_(torch::randn_like(t) * 0.3);
  return m;
}

}  // namespace

class TestTorchBert : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path dir(const char* name) const { return fs::path(m_dir.path().toStdString()) / name; }

private Q_SLOTS:
  void encoderMatchesAnIndependentReference() {
    BertModel m = randomModel(3);
    const std::vector<int64_t> toks = {1, 7, 19, 4, 4, 0};
    torch::Tensor t = torch::tensor(toks, torch::kLong).unsqueeze(0);
    torch::Tensor out = m.encode(t, torch::ones({1, 6}, torch::kBool)).squeeze(0);
    Mat ref = reference(m, toks);
    double maxErr = 0;
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 8; ++j)
        maxErr = std::max(maxErr, std::abs(out[i][j].item<double>() - ref[static_cast<size_t>(i)][static_cast<size_t>(j)]));
    QVERIFY2(maxErr < 1e-4, qPrintable(QString("max error %1").arg(maxErr)));
  }

  void paddingChangesNothingAndEmbeddingsAreUnitMeans() {
    BertModel m = randomModel(5);
    torch::NoGradGuard noGrad;
    torch::Tensor alone = m.embed(torch::tensor({{3, 9, 2}}, torch::kLong), torch::ones({1, 3}, torch::kBool));
    torch::Tensor batch = torch::tensor({{3, 9, 2, 0, 0}, {5, 6, 7, 8, 11}}, torch::kLong);
    torch::Tensor valid = torch::tensor({{1, 1, 1, 0, 0}, {1, 1, 1, 1, 1}}, torch::kLong).to(torch::kBool);
    torch::Tensor both = m.embed(batch, valid);
    QVERIFY(torch::allclose(both[0], alone[0], 1e-5, 1e-6));
    QVERIFY(torch::allclose(both.norm(2, -1), torch::ones({2}), 1e-5, 1e-6));
    // The mean of the valid tokens' states, normalised.
    torch::Tensor h = m.encode(batch, valid)[0].narrow(0, 0, 3).mean(0);
    QVERIFY(torch::allclose(both[0], h / h.norm(), 1e-5, 1e-6));
    QVERIFY(!torch::allclose(both[0], both[1], 1e-2, 1e-2));
  }

  void saveLoadRoundTripsAndBf16StaysClose() {
    BertModel m = randomModel(7);
    QVERIFY(m.save(dir("plain")).isOk());
    auto back = BertModel::load(dir("plain"));
    QVERIFY2(back.isOk(), back.status().message().c_str());
    torch::NoGradGuard noGrad;
    torch::Tensor t = torch::tensor({{1, 2, 3, 4}}, torch::kLong);
    torch::Tensor v = torch::ones({1, 4}, torch::kBool);
    QVERIFY(torch::equal(back->embed(t, v), m.embed(t, v)));
    auto bf16 = BertModel::load(dir("plain"), torch::kBFloat16);
    QVERIFY(bf16.isOk());
    QCOMPARE(bf16->dtype(), torch::kBFloat16);
    const double cosine = (bf16->embed(t, v) * m.embed(t, v)).sum().item<double>();
    QVERIFY2(cosine > 0.99, qPrintable(QString("cosine %1").arg(cosine)));
  }

  void loadsMaskedLmCheckpointsWithAPrefixAndAPooler() {
    BertModel m = randomModel(9);
    std::vector<std::pair<std::string, torch::Tensor>> named;
    const std::vector<ExpectedTensor> names = expectedBertTensors(m.config(), "bert.");
    std::vector<torch::Tensor> params = m.parameters();
    for (size_t i = 0; i < names.size(); ++i) named.emplace_back(names[i].name, params[i]);
    named.emplace_back("bert.pooler.dense.weight", torch::zeros({8, 8}));
    named.emplace_back("cls.predictions.bias", torch::zeros({20}));
    fs::create_directories(dir("mlm"));
    QVERIFY(saveTensors(dir("mlm") / "model.safetensors", named).isOk());
    BertConfig cfg = m.config();
    std::string json = bertConfigJson(cfg);
    json.replace(json.find("\"BertModel\""), 11, "\"BertForMaskedLM\"");
    QVERIFY(writeFileAtomic(dir("mlm") / "config.json", json).isOk());
    auto loaded = BertModel::load(dir("mlm"));
    QVERIFY2(loaded.isOk(), loaded.status().message().c_str());
    torch::NoGradGuard noGrad;
    torch::Tensor t = torch::tensor({{4, 5}}, torch::kLong);
    QVERIFY(torch::equal(loaded->embed(t, torch::ones({1, 2}, torch::kBool)),
                         m.embed(t, torch::ones({1, 2}, torch::kBool))));
  }

  void badCheckpointsNameTheProblem() {
    BertModel m = randomModel(11);
    QVERIFY(m.save(dir("broken")).isOk());
    std::vector<std::pair<std::string, torch::Tensor>> named;
    const std::vector<ExpectedTensor> names = expectedBertTensors(m.config());
    std::vector<torch::Tensor> params = m.parameters();
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i].name != "encoder.layer.1.output.dense.bias") named.emplace_back(names[i].name, params[i]);
    QVERIFY(saveTensors(dir("broken") / "model.safetensors", named).isOk());
    QVERIFY(mentions(BertModel::load(dir("broken")).status(), {"encoder.layer.1.output.dense.bias"}));
    QVERIFY(mentions(BertModel::load(dir("absent")).status(), {"config.json"}));
    BertConfig odd = tinyConfig();
    odd.numAttentionHeads = 3;
    QCOMPARE(BertModel::initRandom(odd, 1).status().code(), StatusCode::InvalidArgument);
  }
};

QTEST_GUILESS_MAIN(TestTorchBert)
#include "test_torch_bert.moc"
