#include "model/bert.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/fs.h"
#include "model/lexical_words.h"
#include "model/safetensors.h"
#include "model/tensor_io.h"

namespace rag::model {

namespace {

namespace F = torch::nn::functional;

// Every weight slot by its HF name, in expectedBertTensors' order: load, init, save and
// parameters() all walk this one list.
template <typename W, typename Fn>
void forEachWeight(W& w, const BertConfig& c, const std::string& prefix, Fn&& fn) {
  const std::string e = prefix + "embeddings.";
  fn(e + "word_embeddings.weight", w.word);
  fn(e + "position_embeddings.weight", w.position);
  fn(e + "token_type_embeddings.weight", w.tokenType);
  fn(e + "LayerNorm.weight", w.embedNorm);
  fn(e + "LayerNorm.bias", w.embedNormBias);
  for (int64_t i = 0; i < c.numHiddenLayers; ++i) {
    auto& l = w.layers[static_cast<size_t>(i)];
    const std::string p = prefix + "encoder.layer." + std::to_string(i) + ".";
    fn(p + "attention.self.query.weight", l.q);
    fn(p + "attention.self.query.bias", l.qBias);
    fn(p + "attention.self.key.weight", l.k);
    fn(p + "attention.self.key.bias", l.kBias);
    fn(p + "attention.self.value.weight", l.v);
    fn(p + "attention.self.value.bias", l.vBias);
    fn(p + "attention.output.dense.weight", l.attnOut);
    fn(p + "attention.output.dense.bias", l.attnOutBias);
    fn(p + "attention.output.LayerNorm.weight", l.attnNorm);
    fn(p + "attention.output.LayerNorm.bias", l.attnNormBias);
    fn(p + "intermediate.dense.weight", l.inter);
    fn(p + "intermediate.dense.bias", l.interBias);
    fn(p + "output.dense.weight", l.out);
    fn(p + "output.dense.bias", l.outBias);
    fn(p + "output.LayerNorm.weight", l.outNorm);
    fn(p + "output.LayerNorm.bias", l.outNormBias);
  }
  if (c.lexicalBuckets > 0) {
    fn(prefix + "lexical.word_weight", w.lexicalWeight);
  }
}

}  // namespace

BertModel::BertModel(BertConfig config, BertWeights weights)
    : m_config(std::move(config)), m_weights(std::move(weights)) {}

Result<BertModel> BertModel::load(const std::filesystem::path& dir, torch::ScalarType dtype) {
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16)
    return Status::invalidArgument("BERT weights load as F32 or BF16");
  RAG_ASSIGN_OR_RETURN(BertConfig cfg, loadBertConfig(dir / "config.json"));
  RAG_ASSIGN_OR_RETURN(SafetensorsWeights st, SafetensorsWeights::open(dir));
  // BertForMaskedLM and friends store the encoder under "bert.".
  const std::string prefix = st.find("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  RAG_RETURN_IF_ERROR(checkTensors(st, expectedBertTensors(cfg, prefix)));
  BertWeights w;
  w.layers.resize(static_cast<size_t>(cfg.numHiddenLayers));
  RAG_RETURN_IF_ERROR(
      loadWeightSlots(st, dtype, [&](auto&& fill) { forEachWeight(w, cfg, prefix, fill); }));
  return BertModel(std::move(cfg), std::move(w));
}

Result<BertModel> BertModel::initRandom(const BertConfig& config, uint64_t seed) {
  if (config.hiddenSize <= 0 || config.numHiddenLayers <= 0 || config.numAttentionHeads <= 0 ||
      config.intermediateSize <= 0 || config.vocabSize <= 0 || config.maxPositionEmbeddings <= 0 ||
      config.typeVocabSize <= 0 || config.hiddenSize % config.numAttentionHeads != 0)
    return Status::invalidArgument("BERT config needs positive sizes and num_attention_heads "
                                   "dividing hidden_size");
  torch::NoGradGuard noGrad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  BertWeights w;
  w.layers.resize(static_cast<size_t>(config.numHiddenLayers));
  const std::vector<ExpectedTensor> expected = expectedBertTensors(config);
  size_t next = 0;
  forEachWeight(w, config, "", [&](const std::string& name, torch::Tensor& slot) {
    const ExpectedTensor& e = expected[next++];  // the same order by construction
    if (name.ends_with("LayerNorm.weight")) slot = torch::ones(e.shape);
    else if (name.ends_with("word_weight")) slot = torch::full(e.shape, std::sqrt(kLexicalWeight));
    else if (name.ends_with(".bias")) slot = torch::zeros(e.shape);
    else slot = at::normal(0.0, 0.02, e.shape, gen);
  });
  return BertModel(config, std::move(w));
}

Result<BertModel> BertModel::withLexical(const LexicalStatistics& stats, int64_t dim, double lambda) const {
  if (m_config.lexicalBuckets > 0)
    return Status::invalidArgument("the embedder has a lexical branch already (" + std::to_string(m_config.lexicalBuckets) +
                                   " word buckets)");
  if (stats.idf.empty()) return Status::invalidArgument("a lexical branch needs at least one word bucket");
  if (dim < 1) return Status::invalidArgument("a lexical branch needs at least one component");
  if (!(lambda >= 0) || !std::isfinite(lambda))
    return Status::invalidArgument("a lexical branch's weight must be a number >= 0");
  if (!(stats.avgWords > 0)) return Status::invalidArgument("a lexical branch needs the collection's mean text length");
  BertConfig c = m_config;
  c.lexicalBuckets = std::ssize(stats.idf);
  c.lexicalDim = dim;
  c.lexicalAvgWords = stats.avgWords;
  BertWeights w = m_weights;
  std::vector<float> weights(stats.idf.size());
  for (size_t b = 0; b < weights.size(); ++b) weights[b] = static_cast<float>(std::sqrt(lambda * std::max(0.0f, stats.idf[b])));
  w.lexicalWeight = torch::tensor(weights, torch::kFloat32).to(dtype());
  return BertModel(std::move(c), std::move(w));
}

Status BertModel::save(const std::filesystem::path& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::ioError("cannot create model directory " + dir.string() + ": " + ec.message());
  std::vector<std::pair<std::string, torch::Tensor>> out;
  forEachWeight(m_weights, m_config, "",
                [&](const std::string& name, const torch::Tensor& t) { out.emplace_back(name, t); });
  RAG_RETURN_IF_ERROR(saveTensors(dir / "model.safetensors", out));
  BertConfig cfg = m_config;
  cfg.torchDtype = dtype() == torch::kBFloat16 ? "bfloat16" : "float32";
  return writeFileAtomic(dir / "config.json", bertConfigJson(cfg));
}

BertModel BertModel::to(torch::ScalarType dtype) const {
  BertWeights w = m_weights;
  forEachWeight(w, m_config, "", [&](const std::string&, torch::Tensor& t) { t = t.to(dtype); });
  return BertModel(m_config, std::move(w));
}

std::vector<torch::Tensor> BertModel::parameters() const {
  std::vector<torch::Tensor> out;
  forEachWeight(m_weights, m_config, "",
                [&](const std::string&, const torch::Tensor& t) { out.push_back(t); });
  return out;
}

torch::Tensor BertModel::layerNorm(const torch::Tensor& x, const torch::Tensor& w,
                                   const torch::Tensor& b) const {
  // In F32 whatever the weight type, as HF's mixed-precision inference does.
  return F::layer_norm(x.to(torch::kFloat32),
                       F::LayerNormFuncOptions({m_config.hiddenSize})
                           .weight(w.to(torch::kFloat32))
                           .bias(b.to(torch::kFloat32))
                           .eps(m_config.layerNormEps))
      .to(x.scalar_type());
}

torch::Tensor BertModel::activation(const torch::Tensor& x) const {
  const std::string& act = m_config.hiddenAct;
  if (act == "gelu_new") {  // the tanh approximation
    const double k = std::sqrt(2.0 / 3.141592653589793);
    return 0.5 * x * (1.0 + torch::tanh(k * (x + 0.044715 * x.pow(3))));
  }
  if (act == "relu") return torch::relu(x);
  if (act == "silu") return torch::silu(x);
  return torch::gelu(x);  // exact (erf), HF's "gelu"
}

torch::Tensor BertModel::encode(const torch::Tensor& tokens, const torch::Tensor& valid) const {
  const BertConfig& c = m_config;
  const int64_t b = tokens.size(0), n = tokens.size(1);
  const int64_t nh = c.numAttentionHeads, d = c.hiddenSize / nh;
  TORCH_CHECK(n <= c.maxPositionEmbeddings, "a sequence of ", n, " tokens is longer than the encoder's ",
              c.maxPositionEmbeddings, " positions; cut it first");
  torch::Tensor positions = torch::arange(n, tokens.options().dtype(torch::kLong));
  torch::Tensor x = F::embedding(tokens, m_weights.word) +
                    F::embedding(positions, m_weights.position).unsqueeze(0) +
                    m_weights.tokenType[0];
  x = layerNorm(x, m_weights.embedNorm, m_weights.embedNormBias);
  // Padding keys are masked out for every query: [B, 1, 1, T].
  const float inf = std::numeric_limits<float>::infinity();
  torch::Tensor mask = torch::zeros({b, 1, 1, n}, tokens.options().dtype(torch::kFloat32)).masked_fill(valid.logical_not().view({b, 1, 1, n}), -inf);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (const BertLayerWeights& l : m_weights.layers) {
    auto heads = [&](const torch::Tensor& t) { return t.view({b, n, nh, d}).transpose(1, 2); };
    torch::Tensor q = heads(F::linear(x, l.q, l.qBias));
    torch::Tensor k = heads(F::linear(x, l.k, l.kBias));
    torch::Tensor v = heads(F::linear(x, l.v, l.vBias));
    torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)).to(torch::kFloat32) * scale + mask;
    torch::Tensor att = torch::softmax(scores, -1).to(v.scalar_type());
    torch::Tensor o = torch::matmul(att, v).transpose(1, 2).reshape({b, n, nh * d});
    x = layerNorm(x + F::linear(o, l.attnOut, l.attnOutBias), l.attnNorm, l.attnNormBias);
    torch::Tensor h = activation(F::linear(x, l.inter, l.interBias));
    x = layerNorm(x + F::linear(h, l.out, l.outBias), l.outNorm, l.outNormBias);
  }
  return x;
}

torch::Tensor BertModel::lexicalBags(std::span<const Words> words) const {
  const int64_t dim = m_config.lexicalDim, rows = std::ssize(words);
  TORCH_CHECK(m_config.lexicalBuckets > 0, "the embedder has no lexical branch");
  // Each distinct word of the rows once: its ±1 vector and bucket, and its saturated count in
  // each row (lexical_words.h's saturatedCounts, as lexicalBag).
  std::unordered_map<uint64_t, int64_t> column;
  std::vector<std::vector<std::pair<uint64_t, float>>> counted;
  std::vector<float> signs, counts;
  std::vector<int64_t> buckets;
  for (const Words& row : words) {
    counted.push_back(saturatedCounts(row, m_config.lexicalAvgWords));
    for (const auto& [h, sat] : counted.back())
      if (column.emplace(h, std::ssize(buckets)).second) {
        buckets.push_back(lexicalBucket(h, m_config.lexicalBuckets));
        signs.resize(signs.size() + static_cast<size_t>(dim));
        lexicalVector(h, dim, signs.data() + signs.size() - static_cast<size_t>(dim));
      }
  }
  const auto distinct = std::ssize(buckets);
  counts.assign(static_cast<size_t>(rows * distinct), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (const auto& [h, sat] : counted[static_cast<size_t>(r)]) counts[static_cast<size_t>(r * distinct + column[h])] = sat;
  const torch::Device device = m_weights.lexicalWeight.device();
  if (distinct == 0) return torch::zeros({rows, dim}, torch::TensorOptions().device(device));
  torch::Tensor weight = m_weights.lexicalWeight.to(torch::kFloat32)
                             .index_select(0, torch::tensor(buckets, torch::kLong).to(device));  // [distinct]
  // Copies: autograd keeps both for the backward pass, after these vectors are gone.
  torch::Tensor c = torch::from_blob(counts.data(), {rows, distinct}, torch::kFloat32).clone().to(device);
  torch::Tensor u = torch::from_blob(signs.data(), {distinct, dim}, torch::kFloat32).clone().to(device);
  return torch::matmul(c * weight.unsqueeze(0), u) / std::sqrt(static_cast<double>(dim));  // [rows, dim]
}

torch::Tensor BertModel::embed(const torch::Tensor& tokens, const torch::Tensor& valid,
                               std::span<const Words> words) const {
  torch::Tensor h = encode(tokens, valid).to(torch::kFloat32);
  torch::Tensor w = valid.to(torch::kFloat32).unsqueeze(-1);  // [B, T, 1]
  torch::Tensor mean = (h * w).sum(1) / w.sum(1).clamp_min(1.0);
  torch::Tensor e = F::normalize(mean, F::NormalizeFuncOptions().p(2).dim(-1).eps(1e-12));
  if (m_config.lexicalBuckets == 0) return e;
  TORCH_CHECK(std::ssize(words) == tokens.size(0), "an embedder with a lexical branch needs the words of each of the ",
              tokens.size(0), " rows (got ", words.size(), ")");
  return torch::cat({e, lexicalBags(words)}, 1);
}

}  // namespace rag::model
