// Hyper-parameters from a Hugging Face config.json, and the tensors a checkpoint must hold.
//
//   RAG_ASSIGN_OR_RETURN(LlamaConfig cfg, loadLlamaConfig(modelDir));  // reads config.json
//   RAG_ASSIGN_OR_RETURN(SafetensorsWeights w, SafetensorsWeights::open(modelDir));
//   RAG_RETURN_IF_ERROR(checkTensors(w, expectedLlamaTensors(cfg)));  // names the first problem
//
// Supported architectures: LlamaForCausalLM, Qwen2ForCausalLM (Llama with q/k/v biases), and
// the BERT encoder (BertModel, BertForMaskedLM). Size fields are required: a config.json that
// omits hidden_size is an error rather than a silent 4096. Optional fields take HF's defaults,
// noted on each member.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/safetensors.h"
#include "rag/status.h"

namespace rag::model {

enum class ModelArchitecture { Llama, Qwen2, Bert };

// The architecture config.json declares: its "architectures"[0], or else its "model_type".
// InvalidArgument for anything else: "config.json architecture 'MistralForCausalLM' is not
// supported; supported: LlamaForCausalLM, Qwen2ForCausalLM, BertModel, BertForMaskedLM".
Result<ModelArchitecture> detectArchitecture(std::string_view configJson,
                                             std::string_view origin = "config.json");

// HF rope_scaling, recorded for the model to apply (nullopt when absent or null).
struct RopeScaling {
  std::string type;                           // "rope_type" (or legacy "type"): llama3, linear, ...
  double factor = 1.0;
  double lowFreqFactor = 1.0;                 // llama3 only
  double highFreqFactor = 4.0;                // llama3 only
  int64_t originalMaxPositionEmbeddings = 0;  // llama3 only; 0 when absent
};

struct LlamaConfig {
  ModelArchitecture architecture = ModelArchitecture::Llama;
  std::string architectureName;        // as config.json spells it
  int64_t hiddenSize = 0;              // required
  int64_t intermediateSize = 0;        // required
  int64_t numHiddenLayers = 0;         // required
  int64_t numAttentionHeads = 0;       // required
  int64_t numKeyValueHeads = 0;        // default numAttentionHeads; divides it
  int64_t headDim = 0;                 // default hiddenSize / numAttentionHeads; even
  int64_t maxPositionEmbeddings = 0;   // default 2048 (Llama), 32768 (Qwen2)
  int64_t vocabSize = 0;               // required
  double rmsNormEps = 1e-6;
  double ropeTheta = 10000.0;
  std::optional<RopeScaling> ropeScaling;
  bool tieWordEmbeddings = false;
  bool attentionBias = false;          // q/k/v projections have biases (always for Qwen2)
  bool attentionOutputBias = false;    // o_proj has a bias (Llama's attention_bias)
  bool mlpBias = false;                // gate/up/down have biases (Llama's mlp_bias)
  std::optional<int64_t> bosTokenId;
  std::vector<int64_t> eosTokenIds;    // eos_token_id may be one id or a list
  std::string torchDtype = "float32";  // "bfloat16", "float16", "float32"
};

struct BertConfig {
  std::string architectureName;
  int64_t hiddenSize = 0;              // required
  int64_t numHiddenLayers = 0;         // required
  int64_t numAttentionHeads = 0;       // required; divides hiddenSize
  int64_t intermediateSize = 0;        // required
  int64_t maxPositionEmbeddings = 512;
  int64_t typeVocabSize = 2;
  int64_t vocabSize = 0;               // required
  int64_t padTokenId = 0;
  double layerNormEps = 1e-12;
  std::string hiddenAct = "gelu";      // gelu, gelu_new, relu, silu
  std::string torchDtype = "float32";
  // The lexical branch (model/lexical_words.h; not HF's): a text's words weighted as BM25 weighs
  // them, in lexical_dim components after the pooled embedding's hidden_size. lexical_buckets in
  // config.json (0: none, a plain BERT), lexical_dim, and lexical_avg_words (BM25's mean text
  // length, in words, of the collection the branch was made for).
  int64_t lexicalBuckets = 0;
  int64_t lexicalDim = 0;
  double lexicalAvgWords = 0;
  // Components of an embedding: the pooled ones and the lexical branch's.
  int64_t embeddingDim() const { return hiddenSize + (lexicalBuckets > 0 ? lexicalDim : 0); }
};

// Parse config.json text (`origin` names it in errors). Errors: Corrupt for bad JSON or a
// missing/invalid field (naming it), InvalidArgument for an unsupported architecture, a Llama
// hidden_act other than silu, or Qwen2's sliding-window attention.
Result<LlamaConfig> parseLlamaConfig(std::string_view json,
                                     std::string_view origin = "config.json");
Result<BertConfig> parseBertConfig(std::string_view json, std::string_view origin = "config.json");

// Read config.json from a file or a model directory.
Result<LlamaConfig> loadLlamaConfig(const std::filesystem::path& path);
// "llama-<16 hex digits>": FNV-1a over a model directory's config.json, model.safetensors and
// tokenizer.json and the dtype it is served in: everything a token's KV depends on, so a
// cache kept across runs (memory/block_store.h) is never read by another model.
Result<std::string> llamaFingerprint(const std::filesystem::path& dir, std::string_view dtype);

// config.json text for a Llama or Qwen2 config (what LlamaModel::save writes); parseLlamaConfig
// reads it back to an equal config. rope_scaling is not written (the runtime refuses it).
std::string llamaConfigJson(const LlamaConfig& config);
Result<BertConfig> loadBertConfig(const std::filesystem::path& path);
// config.json text for a BERT encoder (what BertModel::save writes, architecture BertModel);
// parseBertConfig reads it back to an equal config.
std::string bertConfigJson(const BertConfig& config);

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// The tensors of a Llama-family checkpoint in HF naming and [out, in] Linear layout:
// model.embed_tokens.weight [vocab, hidden]; per layer i: model.layers.{i}.self_attn.
// {q,k,v,o}_proj.weight (+ .bias when configured), mlp.{gate,up,down}_proj.weight,
// {input,post_attention}_layernorm.weight [hidden]; model.norm.weight; lm_head.weight unless
// tie_word_embeddings.
std::vector<ExpectedTensor> expectedLlamaTensors(const LlamaConfig& config);

// The tensors of a BERT encoder in HF naming, each name prefixed by `prefix` ("" for BertModel
// checkpoints, "bert." for BertForMaskedLM): embeddings.{word,position,token_type}_embeddings.
// weight, embeddings.LayerNorm.{weight,bias}; per layer i: encoder.layer.{i}.attention.self.
// {query,key,value}.{weight,bias}, attention.output.dense.{weight,bias}, attention.output.
// LayerNorm.{weight,bias}, intermediate.dense.{weight,bias}, output.dense.{weight,bias},
// output.LayerNorm.{weight,bias}. A pooler, if present, is not used.
std::vector<ExpectedTensor> expectedBertTensors(const BertConfig& config, std::string_view prefix = "");

// Checks every expected tensor is present with its shape and a floating dtype (F32, F16,
// BF16); Corrupt naming the first tensor that is missing, misshapen or of another dtype, and
// the file it was looked for in. Extra tensors are allowed.
Status checkTensors(const SafetensorsWeights& weights, std::span<const ExpectedTensor> expected);

}  // namespace rag::model
