// A Llama-family decoder in libtorch (Llama 2/3, Qwen2): RMSNorm, rotate-half RoPE with a
// configurable theta, SwiGLU, grouped-query attention, optional q/k/v biases and tied
// embeddings; F32 or BF16 weights. Loaded from a Hugging Face directory (config.json +
// model.safetensors or a sharded index) through the torch-free readers in this folder.
//
//   RAG_ASSIGN_OR_RETURN(LlamaModel m, LlamaModel::load("datasets/models/rag-llama"));
//   torch::Tensor logits = m.forward(torch::tensor({1, 17, 42}, torch::kLong));  // F32 [3, vocab]
//
// This file is one of the few that include torch headers (compile time): keep it that way.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <vector>

#include "model/model_config.h"
#include "rag/status.h"

namespace rag::model {

struct LlamaLayerWeights {
  torch::Tensor inputNorm;        // [hidden]
  torch::Tensor q, k, v, o;       // [nh*d, hidden], [nkv*d, hidden], [nkv*d, hidden], [hidden, nh*d]
  torch::Tensor qBias, kBias, vBias;  // [nh*d], [nkv*d], [nkv*d]; undefined without attention_bias
  torch::Tensor postNorm;         // [hidden]
  torch::Tensor gate, up, down;   // [inter, hidden], [inter, hidden], [hidden, inter]
  torch::Tensor oBias;                    // [hidden]; undefined without attention_bias (Llama)
  torch::Tensor gateBias, upBias, downBias;  // undefined without mlp_bias
};

struct LlamaWeights {
  torch::Tensor embed;   // [vocab, hidden]
  std::vector<LlamaLayerWeights> layers;
  torch::Tensor norm;    // [hidden]
  torch::Tensor lmHead;  // [vocab, hidden]; the same storage as embed when tied
};

// cos and sin tables for positions (I64 [n]): F32 [n, head_dim] each, HF's rotate-half layout
// (the frequency vector repeated twice).
std::pair<torch::Tensor, torch::Tensor> ropeTables(const torch::Tensor& positions, int64_t headDim,
                                                   double theta);
// x: [..., n, head_dim] rotated by the tables of its n positions.
torch::Tensor applyRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// Keys cached at RoPE positions `from` (I64 [n]) re-encoded to positions `to` (I64 [n]):
// k: [n, heads, head_dim] in any float type, same type out. Rotations compose, so this equals
// the keys computed at `to` up to rounding. viaZero rotates back to 0 first, then forward.
torch::Tensor reencodeKeys(const torch::Tensor& k, const torch::Tensor& from, const torch::Tensor& to,
                           double theta, bool viaZero = false);

class LlamaModel {
public:
  // dtype: torch::kFloat32 or torch::kBFloat16 (weights are converted on load).
  static Result<LlamaModel> load(const std::filesystem::path& dir,
                                 torch::ScalarType dtype = torch::kFloat32);
  // A freshly initialised model (HF's Llama init: normal(0, 0.02) matrices, unit norms, zero
  // biases), reproducible from `seed`. For training from scratch and for tests.
  static Result<LlamaModel> initRandom(const LlamaConfig& config, uint64_t seed);
  LlamaModel(LlamaConfig config, LlamaWeights weights);

  const LlamaConfig& config() const { return m_config; }
  const LlamaWeights& weights() const { return m_weights; }
  torch::ScalarType dtype() const { return m_weights.embed.scalar_type(); }

  // This model with its weights converted to `dtype` (the same tensors when they already have
  // it; a tied lm_head stays tied). Differentiable: gradients reaching the copy flow back to
  // these weights, which is how BF16 training keeps F32 master weights.
  LlamaModel to(torch::ScalarType dtype) const;

  // Every distinct weight tensor (a tied lm_head is listed once), in checkpoint order: what an
  // optimizer updates. The tensors share storage with the model.
  std::vector<torch::Tensor> parameters() const;

  // Writes config.json and model.safetensors (F32, or BF16 for a BF16 model) into `dir` in HF
  // layout, each file atomically; `load` reads it back bit-exactly.
  Status save(const std::filesystem::path& dir) const;

  // Dense causal forward over one sequence starting at position `startPos` with no cache:
  // tokens I64 [n] -> logits F32 [n, vocab]. The reference the paged runner is checked against.
  torch::Tensor forward(const torch::Tensor& tokens, int64_t startPos = 0) const;

  // Dense forward over a batch: tokens I64 [B, T], positions I64 [B, T], `allowed` Bool
  // [B, T, T] (row i may attend to column j) or undefined for causal -> logits F32 [B, T, vocab].
  // Autograd follows the caller's grad mode: the training loop and the masked references use it.
  torch::Tensor forwardDense(const torch::Tensor& tokens, const torch::Tensor& positions,
                             const torch::Tensor& allowed = {}) const;
  // The same forward up to the residual stream after the last layer, before the final norm:
  // [B, T, hidden] in the model's dtype. logits() of any rows of it are forwardDense's rows, so
  // the training loss computes the vocabulary projection only where a target weighs.
  torch::Tensor hiddenDense(const torch::Tensor& tokens, const torch::Tensor& positions,
                            const torch::Tensor& allowed = {}) const;

  // Checks every id is in [0, vocab): the runner calls this before it touches a batch.
  Status checkTokens(const torch::Tensor& tokens) const;

  // The pieces of a layer, shared by the dense forward and the paged runner. Shapes are
  // [..., hidden] in and out.
  torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& g) const;
  torch::Tensor mlp(const LlamaLayerWeights& l, const torch::Tensor& h) const;  // SwiGLU
  torch::Tensor logits(const torch::Tensor& x) const;  // final norm + lm_head, F32

private:
  LlamaConfig m_config;
  LlamaWeights m_weights;
};

}  // namespace rag::model
