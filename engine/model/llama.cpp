#include "model/llama.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <map>

#include "core/fs.h"
#include "model/safetensors.h"
#include "model/tensor_io.h"

namespace rag::model {

std::pair<torch::Tensor, torch::Tensor> ropeTables(const torch::Tensor& positions, int64_t headDim,
                                                   double theta) {
  torch::Tensor inv = torch::arange(0, headDim, 2, torch::kFloat64)
                          .div(static_cast<double>(headDim))
                          .mul(-std::log(theta))
                          .exp();                                        // F64 [d/2]
  torch::Tensor freqs = torch::outer(positions.to(torch::kFloat64), inv);  // F64 [n, d/2]
  torch::Tensor emb = torch::cat({freqs, freqs}, -1);                      // F64 [n, d]
  return {emb.cos().to(torch::kFloat32), emb.sin().to(torch::kFloat32)};
}

torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  torch::Tensor x1 = x.narrow(-1, 0, half);
  torch::Tensor x2 = x.narrow(-1, half, half);
  torch::Tensor rotated = torch::cat({-x2, x1}, -1);
  return x * cos.to(x.scalar_type()) + rotated * sin.to(x.scalar_type());
}

torch::Tensor reencodeKeys(const torch::Tensor& k, const torch::Tensor& from, const torch::Tensor& to,
                           double theta, bool viaZero) {
  const int64_t d = k.size(-1);
  torch::Tensor kf = k.to(torch::kFloat32);
  if (viaZero) {
    auto [c0, s0] = ropeTables(-from, d, theta);
    auto [c1, s1] = ropeTables(to, d, theta);
    kf = applyRope(applyRope(kf, c0.unsqueeze(1), s0.unsqueeze(1)), c1.unsqueeze(1), s1.unsqueeze(1));
  } else {
    auto [c, s] = ropeTables(to - from, d, theta);
    kf = applyRope(kf, c.unsqueeze(1), s.unsqueeze(1));
  }
  return kf.to(k.scalar_type());
}

// Every weight slot of a config, by its HF name, in checkpoint order (expectedLlamaTensors'
// order). A tied lm_head has no slot: it is the embedding. Load, init, save and parameters()
// all walk this one list.
template <typename W, typename Fn>
void forEachWeight(W& w, const LlamaConfig& c, Fn&& fn) {
  fn("model.embed_tokens.weight", w.embed);
  for (int64_t i = 0; i < c.numHiddenLayers; ++i) {
    auto& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    fn(p + "input_layernorm.weight", l.inputNorm);
    fn(p + "self_attn.q_proj.weight", l.q);
    fn(p + "self_attn.k_proj.weight", l.k);
    fn(p + "self_attn.v_proj.weight", l.v);
    if (c.attentionBias) {
      fn(p + "self_attn.q_proj.bias", l.qBias);
      fn(p + "self_attn.k_proj.bias", l.kBias);
      fn(p + "self_attn.v_proj.bias", l.vBias);
    }
    fn(p + "self_attn.o_proj.weight", l.o);
    if (c.attentionOutputBias) fn(p + "self_attn.o_proj.bias", l.oBias);
    fn(p + "post_attention_layernorm.weight", l.postNorm);
    fn(p + "mlp.gate_proj.weight", l.gate);
    fn(p + "mlp.up_proj.weight", l.up);
    fn(p + "mlp.down_proj.weight", l.down);
    if (c.mlpBias) {
      fn(p + "mlp.gate_proj.bias", l.gateBias);
      fn(p + "mlp.up_proj.bias", l.upBias);
      fn(p + "mlp.down_proj.bias", l.downBias);
    }
  }
  fn("model.norm.weight", w.norm);
  if (!c.tieWordEmbeddings) fn("lm_head.weight", w.lmHead);
}

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights)
    : m_config(std::move(config)), m_weights(std::move(weights)) {}

Result<LlamaModel> LlamaModel::load(const std::filesystem::path& dir, torch::ScalarType dtype) {
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16)
    return Status::invalidArgument("Llama weights load as F32 or BF16");
  RAG_ASSIGN_OR_RETURN(LlamaConfig cfg, loadLlamaConfig(dir / "config.json"));
  if (cfg.ropeScaling)
    return Status::unavailable("config.json asks for rope_scaling '" + cfg.ropeScaling->type +
                               "', which this runtime does not apply; remove it or use a model without it");
  RAG_ASSIGN_OR_RETURN(SafetensorsWeights st, SafetensorsWeights::open(dir));
  std::vector<ExpectedTensor> expected = expectedLlamaTensors(cfg);
  RAG_RETURN_IF_ERROR(checkTensors(st, expected));

  LlamaWeights w;
  w.layers.resize(static_cast<size_t>(cfg.numHiddenLayers));
  RAG_RETURN_IF_ERROR(loadWeightSlots(st, dtype, [&](auto&& fill) { forEachWeight(w, cfg, fill); }));
  if (cfg.tieWordEmbeddings) w.lmHead = w.embed;
  return LlamaModel(std::move(cfg), std::move(w));
}

Result<LlamaModel> LlamaModel::initRandom(const LlamaConfig& config, uint64_t seed) {
  if (config.hiddenSize <= 0 || config.numHiddenLayers <= 0 || config.vocabSize <= 0 ||
      config.numAttentionHeads <= 0 || config.numKeyValueHeads <= 0 || config.headDim <= 0 ||
      config.headDim % 2 != 0 || config.numAttentionHeads % config.numKeyValueHeads != 0)
    return Status::invalidArgument(
        "model config needs positive sizes, an even head_dim and num_key_value_heads dividing "
        "num_attention_heads");
  torch::NoGradGuard noGrad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  LlamaWeights w;
  w.layers.resize(static_cast<size_t>(config.numHiddenLayers));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ExpectedTensor& e : expectedLlamaTensors(config)) shapes[e.name] = e.shape;
  forEachWeight(w, config, [&](const std::string& name, torch::Tensor& slot) {
    // By name: with q/k/v biases, an order-based pairing once gave o_proj a bias's shape.
    const std::vector<int64_t>& shape = shapes.at(name);
    const bool norm = name.ends_with("norm.weight");
    const bool bias = name.ends_with(".bias");
    if (norm) slot = torch::ones(shape);
    else if (bias) slot = torch::zeros(shape);
    else slot = at::normal(0.0, 0.02, shape, gen);
  });
  if (config.tieWordEmbeddings) w.lmHead = w.embed;
  return LlamaModel(config, std::move(w));
}

LlamaModel LlamaModel::to(torch::ScalarType dtype) const {
  LlamaWeights w = m_weights;
  forEachWeight(w, m_config, [&](const std::string&, torch::Tensor& t) { t = t.to(dtype); });
  if (m_config.tieWordEmbeddings) w.lmHead = w.embed;  // forEachWeight skips a tied head
  return LlamaModel(m_config, std::move(w));
}

std::vector<torch::Tensor> LlamaModel::parameters() const {
  std::vector<torch::Tensor> out;
  forEachWeight(m_weights, m_config,
                [&](const std::string&, const torch::Tensor& t) { out.push_back(t); });
  return out;
}

Status LlamaModel::save(const std::filesystem::path& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::ioError("cannot create model directory " + dir.string() + ": " + ec.message());
  const bool bf16 = dtype() == torch::kBFloat16;
  std::vector<std::pair<std::string, torch::Tensor>> out;
  forEachWeight(m_weights, m_config,
                [&](const std::string& name, const torch::Tensor& t) { out.emplace_back(name, t); });
  LlamaConfig cfg = m_config;
  cfg.torchDtype = bf16 ? "bfloat16" : "float32";
  RAG_RETURN_IF_ERROR(saveTensors(dir / "model.safetensors", out));
  return writeFileAtomic(dir / "config.json", llamaConfigJson(cfg));
}

Status LlamaModel::checkTokens(const torch::Tensor& tokens) const {
  if (tokens.dim() != 1 || tokens.scalar_type() != torch::kLong)
    return Status::invalidArgument("tokens must be a 1-D int64 tensor");
  if (tokens.numel() == 0) return Status::invalidArgument("empty token sequence");
  const int64_t lo = tokens.min().item<int64_t>();
  const int64_t hi = tokens.max().item<int64_t>();
  if (lo < 0 || hi >= m_config.vocabSize)
    return Status::invalidArgument("token id " + std::to_string(lo < 0 ? lo : hi) +
                                   " is outside the vocabulary [0, " +
                                   std::to_string(m_config.vocabSize) + ")");
  return Status::ok();
}

torch::Tensor LlamaModel::rmsNorm(const torch::Tensor& x, const torch::Tensor& g) const {
  // Normalise in F32 whatever the weight type, as HF does.
  torch::Tensor xf = x.to(torch::kFloat32);
  torch::Tensor r = torch::rsqrt(xf.pow(2).mean(-1, true) + m_config.rmsNormEps);
  return (xf * r).to(x.scalar_type()) * g;
}

torch::Tensor LlamaModel::mlp(const LlamaLayerWeights& l, const torch::Tensor& h) const {
  namespace F = torch::nn::functional;
  return F::linear(torch::silu(F::linear(h, l.gate, l.gateBias)) * F::linear(h, l.up, l.upBias),
                   l.down, l.downBias);
}

torch::Tensor LlamaModel::logits(const torch::Tensor& x) const {
  return torch::nn::functional::linear(rmsNorm(x, m_weights.norm), m_weights.lmHead)
      .to(torch::kFloat32);
}

torch::Tensor LlamaModel::forward(const torch::Tensor& tokens, int64_t startPos) const {
  torch::NoGradGuard noGrad;
  const int64_t n = tokens.size(0);
  torch::Tensor pos = torch::arange(startPos, startPos + n, torch::kLong);
  return forwardDense(tokens.unsqueeze(0), pos.unsqueeze(0)).squeeze(0);
}

torch::Tensor LlamaModel::forwardDense(const torch::Tensor& tokens, const torch::Tensor& positions,
                                       const torch::Tensor& allowed) const {
  return logits(hiddenDense(tokens, positions, allowed));
}

torch::Tensor LlamaModel::hiddenDense(const torch::Tensor& tokens, const torch::Tensor& positions,
                                      const torch::Tensor& allowed) const {
  namespace F = torch::nn::functional;
  const LlamaConfig& c = m_config;
  const int64_t b = tokens.size(0), n = tokens.size(1);
  const int64_t nh = c.numAttentionHeads, nkv = c.numKeyValueHeads, d = c.headDim;
  torch::Tensor x = m_weights.embed.index_select(0, tokens.reshape({-1})).view({b, n, -1});
  auto [cos, sin] = ropeTables(positions.reshape({-1}), d, c.ropeTheta);
  cos = cos.view({b, 1, n, d});
  sin = sin.view({b, 1, n, d});
  const float inf = std::numeric_limits<float>::infinity();
  torch::Tensor mask = allowed.defined()
                           ? torch::zeros({b, 1, n, n}).masked_fill(allowed.logical_not().unsqueeze(1), -inf)
                           : torch::full({n, n}, -inf).triu(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (const LlamaLayerWeights& l : m_weights.layers) {
    torch::Tensor h = rmsNorm(x, l.inputNorm);
    torch::Tensor q = applyRope(F::linear(h, l.q, l.qBias).view({b, n, nh, d}).transpose(1, 2), cos, sin);
    torch::Tensor k = applyRope(F::linear(h, l.k, l.kBias).view({b, n, nkv, d}).transpose(1, 2), cos, sin);
    torch::Tensor v = F::linear(h, l.v, l.vBias).view({b, n, nkv, d}).transpose(1, 2);
    if (nkv != nh) {
      k = k.repeat_interleave(nh / nkv, 1);
      v = v.repeat_interleave(nh / nkv, 1);
    }
    torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)).to(torch::kFloat32) * scale + mask;
    torch::Tensor att = torch::softmax(scores, -1).to(v.scalar_type());
    torch::Tensor o = torch::matmul(att, v).transpose(1, 2).reshape({b, n, nh * d});
    x = x + F::linear(o, l.o, l.oBias);
    x = x + mlp(l, rmsNorm(x, l.postNorm));
  }
  return x;
}

}  // namespace rag::model
