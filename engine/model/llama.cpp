#include "model/llama.h"

#include <cmath>

#include "model/safetensors.h"

namespace rag::model {

namespace {

// A safetensors view as a torch tensor of `dtype`: F16/BF16 go through the reader's exact F32
// conversion, then to the target type.
Result<torch::Tensor> toTensor(const TensorView& view, torch::ScalarType dtype) {
  RAG_ASSIGN_OR_RETURN(std::vector<float> f32, toF32(view));
  torch::Tensor t = torch::from_blob(f32.data(), view.shape, torch::kFloat32).clone();
  return dtype == torch::kFloat32 ? t : t.to(dtype);
}

}  // namespace

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

  auto get = [&](const std::string& name) -> Result<torch::Tensor> {
    const TensorView* v = st.find(name);
    if (!v) return Status::notFound("tensor " + name + " is missing from " + dir.string());
    return toTensor(*v, dtype);
  };
  auto getOptional = [&](const std::string& name) -> Result<torch::Tensor> {
    if (!st.find(name)) return torch::Tensor();
    return get(name);
  };
  LlamaWeights w;
  RAG_ASSIGN_OR_RETURN(w.embed, get("model.embed_tokens.weight"));
  RAG_ASSIGN_OR_RETURN(w.norm, get("model.norm.weight"));
  if (cfg.tieWordEmbeddings) {
    w.lmHead = w.embed;
  } else {
    RAG_ASSIGN_OR_RETURN(w.lmHead, get("lm_head.weight"));
  }
  for (int64_t i = 0; i < cfg.numHiddenLayers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LlamaLayerWeights l;
    RAG_ASSIGN_OR_RETURN(l.inputNorm, get(p + "input_layernorm.weight"));
    RAG_ASSIGN_OR_RETURN(l.postNorm, get(p + "post_attention_layernorm.weight"));
    RAG_ASSIGN_OR_RETURN(l.q, get(p + "self_attn.q_proj.weight"));
    RAG_ASSIGN_OR_RETURN(l.k, get(p + "self_attn.k_proj.weight"));
    RAG_ASSIGN_OR_RETURN(l.v, get(p + "self_attn.v_proj.weight"));
    RAG_ASSIGN_OR_RETURN(l.o, get(p + "self_attn.o_proj.weight"));
    RAG_ASSIGN_OR_RETURN(l.qBias, getOptional(p + "self_attn.q_proj.bias"));
    RAG_ASSIGN_OR_RETURN(l.kBias, getOptional(p + "self_attn.k_proj.bias"));
    RAG_ASSIGN_OR_RETURN(l.vBias, getOptional(p + "self_attn.v_proj.bias"));
    RAG_ASSIGN_OR_RETURN(l.oBias, getOptional(p + "self_attn.o_proj.bias"));
    RAG_ASSIGN_OR_RETURN(l.gateBias, getOptional(p + "mlp.gate_proj.bias"));
    RAG_ASSIGN_OR_RETURN(l.upBias, getOptional(p + "mlp.up_proj.bias"));
    RAG_ASSIGN_OR_RETURN(l.downBias, getOptional(p + "mlp.down_proj.bias"));
    RAG_ASSIGN_OR_RETURN(l.gate, get(p + "mlp.gate_proj.weight"));
    RAG_ASSIGN_OR_RETURN(l.up, get(p + "mlp.up_proj.weight"));
    RAG_ASSIGN_OR_RETURN(l.down, get(p + "mlp.down_proj.weight"));
    w.layers.push_back(std::move(l));
  }
  return LlamaModel(std::move(cfg), std::move(w));
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

torch::Tensor LlamaModel::forward(const torch::Tensor& tokens, int64_t startPos) const {
  torch::NoGradGuard noGrad;
  const LlamaConfig& c = m_config;
  const int64_t n = tokens.size(0);
  const int64_t nh = c.numAttentionHeads, nkv = c.numKeyValueHeads, d = c.headDim;
  torch::Tensor x = m_weights.embed.index_select(0, tokens);  // [n, hidden]
  auto [cos, sin] = ropeTables(torch::arange(startPos, startPos + n, torch::kLong), d, c.ropeTheta);
  torch::Tensor mask = torch::full({n, n}, -std::numeric_limits<float>::infinity()).triu(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (const LlamaLayerWeights& l : m_weights.layers) {
    torch::Tensor h = rmsNorm(x, l.inputNorm);
    torch::Tensor q = torch::nn::functional::linear(h, l.q, l.qBias);
    torch::Tensor k = torch::nn::functional::linear(h, l.k, l.kBias);
    torch::Tensor v = torch::nn::functional::linear(h, l.v, l.vBias);
    q = applyRope(q.view({n, nh, d}).transpose(0, 1), cos, sin);   // [nh, n, d]
    k = applyRope(k.view({n, nkv, d}).transpose(0, 1), cos, sin);  // [nkv, n, d]
    v = v.view({n, nkv, d}).transpose(0, 1);                       // [nkv, n, d]
    if (nkv != nh) {
      k = k.repeat_interleave(nh / nkv, 0);
      v = v.repeat_interleave(nh / nkv, 0);
    }
    torch::Tensor scores = torch::matmul(q, k.transpose(1, 2)).to(torch::kFloat32) * scale + mask;
    torch::Tensor att = torch::softmax(scores, -1).to(v.scalar_type());
    torch::Tensor o = torch::matmul(att, v).transpose(0, 1).reshape({n, nh * d});
    x = x + torch::nn::functional::linear(o, l.o, l.oBias);
    h = rmsNorm(x, l.postNorm);
    torch::Tensor g = torch::nn::functional::linear(h, l.gate, l.gateBias);
    torch::Tensor u = torch::nn::functional::linear(h, l.up, l.upBias);
    x = x + torch::nn::functional::linear(torch::silu(g) * u, l.down, l.downBias);
  }
  x = rmsNorm(x, m_weights.norm);
  return torch::nn::functional::linear(x, m_weights.lmHead).to(torch::kFloat32);
}

}  // namespace rag::model
