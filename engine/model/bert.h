// A BERT-style bidirectional encoder in libtorch (HF BertModel: learned absolute positions,
// token types, post-LayerNorm blocks, GELU MLP), with mean pooling and L2 normalisation for
// dense retrieval. Loads Hugging Face BERT checkpoints (bge-small, e5-small, ...: config.json +
// safetensors, with or without the "bert." prefix of BertForMaskedLM; a pooler is ignored) and
// the project's own trained embedder; F32 or BF16. An optional lexical branch (config
// lexical_buckets, model/lexical_words.h) appends a text's words, weighted as BM25 weighs them, in
// lexical_dim more components: embed() then takes each row's words.
//
//   RAG_ASSIGN_OR_RETURN(BertModel m, BertModel::load("datasets/models/rag-embedder"));
//   torch::Tensor e = m.embed(tokens, valid);   // F32 [B, hidden], unit rows (no lexical branch)
//
// One of the few files that include torch headers (compile time): keep it that way.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "model/lexical_words.h"
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
  // The lexical branch (config lexical_buckets > 0; else undefined): a weight per word bucket
  // [buckets].
  torch::Tensor lexicalWeight;
};

class BertModel {
public:
  // dtype: torch::kFloat32 or torch::kBFloat16. Errors: config.json's (another architecture,
  // a missing size), and Corrupt naming the first missing or misshapen tensor.
  static Result<BertModel> load(const std::filesystem::path& dir,
                                torch::ScalarType dtype = torch::kFloat32);
  // normal(0, 0.02) matrices and embeddings, unit LayerNorm weights, zero biases (HF's BERT
  // init), reproducible from `seed`.
  // A lexical branch, if configured, starts with every word weight sqrt(kLexicalWeight).
  static Result<BertModel> initRandom(const BertConfig& config, uint64_t seed);
  BertModel(BertConfig config, BertWeights weights);

  // This model with a new lexical branch of `dim` components for a collection of `stats`
  // (lexical_words.h's lexicalStatistics: one bucket per IDF entry), each word weight
  // sqrt(lambda * idf), so the inner product of two embeddings is their cosine plus lambda times
  // a BM25-like score of their shared words. Lambda 0 adds components that are always 0.
  // InvalidArgument when it has a branch already, no bucket, dim < 1, or lambda < 0.
  Result<BertModel> withLexical(const LexicalStatistics& stats, int64_t dim, double lambda) const;

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
  // Mean of the valid tokens' last hidden states, L2-normalised: F32 [B, hidden]. With a lexical
  // branch, F32 [B, hidden + lexical_dim]: [normalize(mean) ; bag(words[b])], words[b] row b's
  // words (lexical_words.h; one per row is required).
  torch::Tensor embed(const torch::Tensor& tokens, const torch::Tensor& valid,
                      std::span<const Words> words = {}) const;
  // The rows' bags of words (lexical_words.h's lexicalBag), F32 [B, lexical_dim], differentiable
  // in the bucket weights.
  torch::Tensor lexicalBags(std::span<const Words> words) const;

private:
  torch::Tensor layerNorm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const;
  torch::Tensor activation(const torch::Tensor& x) const;

  BertConfig m_config;
  BertWeights m_weights;
};

}  // namespace rag::model
