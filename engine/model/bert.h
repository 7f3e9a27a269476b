// A BERT-style bidirectional encoder in libtorch (HF BertModel: learned absolute positions,
// token types, post-LayerNorm blocks, GELU MLP), with mean pooling and L2 normalisation for
// dense retrieval. Loads Hugging Face BERT checkpoints (bge-small, e5-small, ...: config.json +
// safetensors, with or without the "bert." prefix of BertForMaskedLM; a pooler is ignored) and
// the project's own trained embedder; F32 or BF16.
//
//   RAG_ASSIGN_OR_RETURN(BertModel m, BertModel::load("datasets/models/rag-embedder"));
//   torch::Tensor e = m.embed(tokens, valid);   // F32 [B, hidden], unit rows
//
// One of the few files that include torch headers (compile time): keep it that way.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <vector>

#include "model/model_config.h"
#include "rag/status.h"

namespace rag::model {

struct BertLayerWeights {
  torch::Tensor q, qBias, k, kBias, v, vBias;  // [hidden, hidden], [hidden]
  torch::Tensor attnOut, attnOutBias;          // [hidden, hidden], [hidden]
  torch::Tensor attnNorm, attnNormBias;        // [hidden]
  torch::Tensor inter, interBias;              // [inter, hidden], [inter]
  torch::Tensor out, outBias;                  // [hidden, inter], [hidden]
  torch::Tensor outNorm, outNormBias;          // [hidden]
};

struct BertWeights {
  torch::Tensor word, position, tokenType;  // [vocab|positions|types, hidden]
  torch::Tensor embedNorm, embedNormBias;   // [hidden]
  std::vector<BertLayerWeights> layers;
};

class BertModel {
public:
  // dtype: torch::kFloat32 or torch::kBFloat16. Errors: config.json's (another architecture,
  // a missing size), and Corrupt naming the first missing or misshapen tensor.
  static Result<BertModel> load(const std::filesystem::path& dir,
                                torch::ScalarType dtype = torch::kFloat32);
  // normal(0, 0.02) matrices and embeddings, unit LayerNorm weights, zero biases (HF's BERT
  // init), reproducible from `seed`.
  static Result<BertModel> initRandom(const BertConfig& config, uint64_t seed);
  BertModel(BertConfig config, BertWeights weights);

  // config.json + model.safetensors in BertModel naming (no prefix), the weights' dtype.
  Status save(const std::filesystem::path& dir) const;
  BertModel to(torch::ScalarType dtype) const;
  // Every weight, in checkpoint order (sharing storage with the model: for the optimizer).
  std::vector<torch::Tensor> parameters() const;

  const BertConfig& config() const { return m_config; }
  const BertWeights& weights() const { return m_weights; }
  torch::ScalarType dtype() const { return m_weights.word.scalar_type(); }

  // tokens: I64 [B, T] (at most max_position_embeddings), valid: Bool [B, T] (false marks
  // padding, which no token attends to). Token type 0 everywhere. Returns the last hidden
  // states [B, T, hidden] in the model's dtype. Differentiable unless under NoGradGuard.
  torch::Tensor encode(const torch::Tensor& tokens, const torch::Tensor& valid) const;
  // Mean of the valid tokens' last hidden states, L2-normalised: F32 [B, hidden].
  torch::Tensor embed(const torch::Tensor& tokens, const torch::Tensor& valid) const;

private:
  torch::Tensor layerNorm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const;
  torch::Tensor activation(const torch::Tensor& x) const;

  BertConfig m_config;
  BertWeights m_weights;
};

}  // namespace rag::model
