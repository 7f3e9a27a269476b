#include "model/model_config.h"

#include "core/fs.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/json_writer.h"

#include <cstdio>
#include <sstream>

namespace fs = std::filesystem;

namespace rag::model {

namespace {

constexpr std::string_view kSupported =
    "supported: LlamaForCausalLM, Qwen2ForCausalLM, BertModel, BertForMaskedLM";

// Typed access to config.json fields with errors that name the file and the field. A field
// that is absent or null takes the fallback.
class Fields {
public:
  Fields(const JsonValue& obj, std::string origin) : m_obj(obj), m_origin(std::move(origin)) {}

  Result<int64_t> positive(std::string_view key, std::optional<int64_t> fallback = {}) const {
    const JsonValue* v = get(key);
    if (!v) {
      if (fallback) return *fallback;
      return Status::corrupt(m_origin + ": \"" + std::string(key) + "\" is missing");
    }
    std::optional<int64_t> i = v->asInt64();
    if (!i || *i <= 0)
      return Status::corrupt(m_origin + ": \"" + std::string(key) +
                             "\" should be a positive integer");
    return *i;
  }
  Result<int64_t> nonNegative(std::string_view key, int64_t fallback) const {
    const JsonValue* v = get(key);
    if (!v) return fallback;
    std::optional<int64_t> i = v->asInt64();
    if (!i || *i < 0)
      return Status::corrupt(m_origin + ": \"" + std::string(key) +
                             "\" should be a non-negative integer");
    return *i;
  }
  Result<double> positiveNumber(std::string_view key, double fallback) const {
    const JsonValue* v = get(key);
    if (!v) return fallback;
    if (!v->isNumber() || !(v->asDouble() > 0))
      return Status::corrupt(m_origin + ": \"" + std::string(key) +
                             "\" should be a positive number");
    return v->asDouble();
  }
  Result<bool> flag(std::string_view key, bool fallback) const {
    const JsonValue* v = get(key);
    if (!v) return fallback;
    if (!v->isBool())
      return Status::corrupt(m_origin + ": \"" + std::string(key) + "\" should be true or false");
    return v->asBool();
  }
  Result<std::string> text(std::string_view key, std::string fallback) const {
    const JsonValue* v = get(key);
    if (!v) return fallback;
    if (!v->isString())
      return Status::corrupt(m_origin + ": \"" + std::string(key) + "\" should be a string");
    return v->asString();
  }
  const JsonValue* get(std::string_view key) const {
    const JsonValue* v = m_obj.find(key);
    return v && !v->isNull() ? v : nullptr;
  }
  const std::string& origin() const { return m_origin; }

private:
  const JsonValue& m_obj;
  std::string m_origin;
};

struct Declared {
  ModelArchitecture arch;
  std::string name;
};

Result<Declared> declaredArchitecture(const JsonValue& root, const std::string& origin) {
  std::string name;
  if (const JsonValue* archs = root.find("architectures");
      archs && archs->isArray() && archs->size() > 0 && archs->asArray()[0].isString()) {
    name = archs->asArray()[0].asString();
  } else if (const JsonValue* type = root.find("model_type"); type && type->isString()) {
    const std::string& t = type->asString();
    name = t == "llama" ? "LlamaForCausalLM" : t == "qwen2" ? "Qwen2ForCausalLM"
         : t == "bert"  ? "BertModel"
                        : t;
  } else {
    return Status::corrupt(origin + " names no architecture (neither \"architectures\" nor "
                           "\"model_type\"); is this a Hugging Face config.json?");
  }
  if (name == "LlamaForCausalLM") return Declared{ModelArchitecture::Llama, name};
  if (name == "Qwen2ForCausalLM") return Declared{ModelArchitecture::Qwen2, name};
  if (name == "BertModel" || name == "BertForMaskedLM")
    return Declared{ModelArchitecture::Bert, name};
  return Status::invalidArgument("config.json architecture '" + name + "' is not supported; " +
                                 std::string(kSupported) + " (in " + origin + ")");
}

Result<JsonValue> parseConfig(std::string_view json, const std::string& origin) {
  Result<JsonValue> doc = parseJson(json);
  if (!doc) return doc.status().withContext("reading " + origin);
  if (!doc->isObject()) return Status::corrupt(origin + " is not a JSON object");
  return doc;
}

Result<std::string> readConfig(const fs::path& path, fs::path& file) {
  std::error_code ec;
  file = fs::is_directory(path, ec) ? path / "config.json" : path;
  if (!fs::exists(file, ec))
    return Status::notFound("no config.json at " + file.string() +
                            "; give the model directory or its config.json");
  return readFile(file);
}

Result<std::optional<RopeScaling>> parseRopeScaling(const Fields& f) {
  const JsonValue* v = f.get("rope_scaling");
  if (!v) return std::optional<RopeScaling>{};
  if (!v->isObject()) return Status::corrupt(f.origin() + ": \"rope_scaling\" should be an object");
  Fields r(*v, f.origin() + " rope_scaling");
  RopeScaling s;
  RAG_ASSIGN_OR_RETURN(std::string legacyType, r.text("type", ""));
  RAG_ASSIGN_OR_RETURN(s.type, r.text("rope_type", legacyType));
  if (s.type.empty()) return Status::corrupt(f.origin() + ": rope_scaling names no rope_type");
  RAG_ASSIGN_OR_RETURN(s.factor, r.positiveNumber("factor", 1.0));
  RAG_ASSIGN_OR_RETURN(s.lowFreqFactor, r.positiveNumber("low_freq_factor", 1.0));
  RAG_ASSIGN_OR_RETURN(s.highFreqFactor, r.positiveNumber("high_freq_factor", 4.0));
  RAG_ASSIGN_OR_RETURN(s.originalMaxPositionEmbeddings,
                       r.nonNegative("original_max_position_embeddings", 0));
  return std::optional<RopeScaling>(s);
}

}  // namespace

Result<ModelArchitecture> detectArchitecture(std::string_view configJson, std::string_view origin) {
  const std::string where(origin);
  RAG_ASSIGN_OR_RETURN(JsonValue root, parseConfig(configJson, where));
  RAG_ASSIGN_OR_RETURN(Declared d, declaredArchitecture(root, where));
  return d.arch;
}

Result<LlamaConfig> parseLlamaConfig(std::string_view json, std::string_view origin) {
  const std::string where(origin);
  RAG_ASSIGN_OR_RETURN(JsonValue root, parseConfig(json, where));
  RAG_ASSIGN_OR_RETURN(Declared d, declaredArchitecture(root, where));
  if (d.arch == ModelArchitecture::Bert)
    return Status::invalidArgument(where + " describes a BERT encoder (" + d.name +
                                   "), not a Llama-family decoder");
  const bool qwen = d.arch == ModelArchitecture::Qwen2;
  Fields f(root, where);
  LlamaConfig c;
  c.architecture = d.arch;
  c.architectureName = d.name;
  RAG_ASSIGN_OR_RETURN(c.hiddenSize, f.positive("hidden_size"));
  RAG_ASSIGN_OR_RETURN(c.intermediateSize, f.positive("intermediate_size"));
  RAG_ASSIGN_OR_RETURN(c.numHiddenLayers, f.positive("num_hidden_layers"));
  RAG_ASSIGN_OR_RETURN(c.numAttentionHeads, f.positive("num_attention_heads"));
  RAG_ASSIGN_OR_RETURN(c.numKeyValueHeads, f.positive("num_key_value_heads", c.numAttentionHeads));
  RAG_ASSIGN_OR_RETURN(c.vocabSize, f.positive("vocab_size"));
  RAG_ASSIGN_OR_RETURN(c.maxPositionEmbeddings,
                       f.positive("max_position_embeddings", qwen ? 32768 : 2048));
  if (!f.get("head_dim") && c.hiddenSize % c.numAttentionHeads != 0)
    return Status::corrupt(where + ": hidden_size " + std::to_string(c.hiddenSize) +
                           " is not a multiple of num_attention_heads " +
                           std::to_string(c.numAttentionHeads) + " and no head_dim is given");
  RAG_ASSIGN_OR_RETURN(c.headDim, f.positive("head_dim", c.hiddenSize / c.numAttentionHeads));
  if (c.headDim % 2 != 0)
    return Status::corrupt(where + ": head_dim " + std::to_string(c.headDim) +
                           " is odd; rotary embeddings need an even head dimension");
  if (c.numAttentionHeads % c.numKeyValueHeads != 0)
    return Status::corrupt(where + ": num_attention_heads " + std::to_string(c.numAttentionHeads) +
                           " is not a multiple of num_key_value_heads " +
                           std::to_string(c.numKeyValueHeads));
  RAG_ASSIGN_OR_RETURN(c.rmsNormEps, f.positiveNumber("rms_norm_eps", 1e-6));
  RAG_ASSIGN_OR_RETURN(c.ropeTheta, f.positiveNumber("rope_theta", 10000.0));
  RAG_ASSIGN_OR_RETURN(c.ropeScaling, parseRopeScaling(f));
  RAG_ASSIGN_OR_RETURN(c.tieWordEmbeddings, f.flag("tie_word_embeddings", false));
  if (qwen) {
    // Qwen2 always has q/k/v biases and no o_proj bias; its config has no attention_bias key.
    c.attentionBias = true;
    RAG_ASSIGN_OR_RETURN(bool sliding, f.flag("use_sliding_window", false));
    if (sliding)
      return Status::invalidArgument(where + ": Qwen2 sliding-window attention "
                                     "(use_sliding_window: true) is not supported");
  } else {
    RAG_ASSIGN_OR_RETURN(c.attentionBias, f.flag("attention_bias", false));
    c.attentionOutputBias = c.attentionBias;
    RAG_ASSIGN_OR_RETURN(c.mlpBias, f.flag("mlp_bias", false));
  }
  RAG_ASSIGN_OR_RETURN(std::string act, f.text("hidden_act", "silu"));
  if (act != "silu")
    return Status::invalidArgument(where + ": hidden_act '" + act +
                                   "' is not supported for " + d.name + "; supported: silu");
  if (f.get("bos_token_id")) {
    RAG_ASSIGN_OR_RETURN(int64_t id, f.nonNegative("bos_token_id", 0));
    c.bosTokenId = id;
  }
  if (const JsonValue* eos = f.get("eos_token_id")) {
    std::vector<JsonValue> ids = eos->isArray() ? eos->asArray() : std::vector<JsonValue>{*eos};
    for (const JsonValue& id : ids) {
      std::optional<int64_t> i = id.asInt64();
      if (!i || *i < 0)
        return Status::corrupt(where + ": \"eos_token_id\" should be a token id or a list of them");
      c.eosTokenIds.push_back(*i);
    }
  }
  RAG_ASSIGN_OR_RETURN(c.torchDtype, f.text("torch_dtype", "float32"));
  return c;
}

Result<BertConfig> parseBertConfig(std::string_view json, std::string_view origin) {
  const std::string where(origin);
  RAG_ASSIGN_OR_RETURN(JsonValue root, parseConfig(json, where));
  RAG_ASSIGN_OR_RETURN(Declared d, declaredArchitecture(root, where));
  if (d.arch != ModelArchitecture::Bert)
    return Status::invalidArgument(where + " describes a decoder (" + d.name +
                                   "), not a BERT encoder");
  Fields f(root, where);
  BertConfig c;
  c.architectureName = d.name;
  RAG_ASSIGN_OR_RETURN(c.hiddenSize, f.positive("hidden_size"));
  RAG_ASSIGN_OR_RETURN(c.numHiddenLayers, f.positive("num_hidden_layers"));
  RAG_ASSIGN_OR_RETURN(c.numAttentionHeads, f.positive("num_attention_heads"));
  RAG_ASSIGN_OR_RETURN(c.intermediateSize, f.positive("intermediate_size"));
  RAG_ASSIGN_OR_RETURN(c.vocabSize, f.positive("vocab_size"));
  RAG_ASSIGN_OR_RETURN(c.maxPositionEmbeddings, f.positive("max_position_embeddings", 512));
  RAG_ASSIGN_OR_RETURN(c.typeVocabSize, f.positive("type_vocab_size", 2));
  RAG_ASSIGN_OR_RETURN(c.padTokenId, f.nonNegative("pad_token_id", 0));
  RAG_ASSIGN_OR_RETURN(c.layerNormEps, f.positiveNumber("layer_norm_eps", 1e-12));
  RAG_ASSIGN_OR_RETURN(c.hiddenAct, f.text("hidden_act", "gelu"));
  RAG_ASSIGN_OR_RETURN(c.torchDtype, f.text("torch_dtype", "float32"));
  RAG_ASSIGN_OR_RETURN(c.lexicalBuckets, f.nonNegative("lexical_buckets", 0));
  if (c.lexicalBuckets > 0) {
    RAG_ASSIGN_OR_RETURN(c.lexicalDim, f.positive("lexical_dim"));
    RAG_ASSIGN_OR_RETURN(c.lexicalAvgWords, f.positiveNumber("lexical_avg_words", 0));
    if (c.lexicalAvgWords == 0) return Status::corrupt(where + ": \"lexical_avg_words\" is missing");
  }
  if (c.hiddenSize % c.numAttentionHeads != 0)
    return Status::corrupt(where + ": hidden_size " + std::to_string(c.hiddenSize) +
                           " is not a multiple of num_attention_heads " +
                           std::to_string(c.numAttentionHeads));
  if (c.hiddenAct != "gelu" && c.hiddenAct != "gelu_new" && c.hiddenAct != "relu" &&
      c.hiddenAct != "silu")
    return Status::invalidArgument(where + ": hidden_act '" + c.hiddenAct +
                                   "' is not supported; supported: gelu, gelu_new, relu, silu");
  RAG_ASSIGN_OR_RETURN(std::string positions, f.text("position_embedding_type", "absolute"));
  if (positions != "absolute")
    return Status::invalidArgument(where + ": position_embedding_type '" + positions +
                                   "' is not supported; supported: absolute");
  return c;
}

Result<std::string> llamaFingerprint(const fs::path& dir, std::string_view dtype) {
  RAG_ASSIGN_OR_RETURN(uint64_t h, hashFiles(dir, {"config.json", "model.safetensors", "tokenizer.json"}));
  h = fnv1a(dtype, h);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("llama-") + hex;
}

Result<LlamaConfig> loadLlamaConfig(const fs::path& path) {
  fs::path file;
  RAG_ASSIGN_OR_RETURN(std::string json, readConfig(path, file));
  return parseLlamaConfig(json, file.string());
}

Result<BertConfig> loadBertConfig(const fs::path& path) {
  fs::path file;
  RAG_ASSIGN_OR_RETURN(std::string json, readConfig(path, file));
  return parseBertConfig(json, file.string());
}

std::vector<ExpectedTensor> expectedLlamaTensors(const LlamaConfig& c) {
  const int64_t h = c.hiddenSize, q = c.numAttentionHeads * c.headDim,
                kv = c.numKeyValueHeads * c.headDim, ff = c.intermediateSize;
  std::vector<ExpectedTensor> out;
  out.push_back({"model.embed_tokens.weight", {c.vocabSize, h}});
  for (int64_t i = 0; i < c.numHiddenLayers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    if (c.attentionBias) {
      out.push_back({p + "self_attn.q_proj.bias", {q}});
      out.push_back({p + "self_attn.k_proj.bias", {kv}});
      out.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    out.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (c.attentionOutputBias) out.push_back({p + "self_attn.o_proj.bias", {h}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    out.push_back({p + "mlp.gate_proj.weight", {ff, h}});
    out.push_back({p + "mlp.up_proj.weight", {ff, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, ff}});
    if (c.mlpBias) {
      out.push_back({p + "mlp.gate_proj.bias", {ff}});
      out.push_back({p + "mlp.up_proj.bias", {ff}});
      out.push_back({p + "mlp.down_proj.bias", {h}});
    }
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tieWordEmbeddings) out.push_back({"lm_head.weight", {c.vocabSize, h}});
  return out;
}

Status checkTensors(const SafetensorsWeights& weights, std::span<const ExpectedTensor> expected) {
  const std::string source = weights.source().string();
  for (const ExpectedTensor& e : expected) {
    const TensorView* t = weights.find(e.name);
    if (!t)
      return Status::corrupt("checkpoint " + source + " has no tensor '" + e.name +
                             "' (expected shape " + shapeToString(e.shape) + ")");
    if (t->shape != e.shape)
      return Status::corrupt("tensor '" + e.name + "' in " + weights.fileOf(e.name).string() +
                             " has shape " + shapeToString(t->shape) + ", expected " +
                             shapeToString(e.shape) + " from config.json");
    if (t->dtype != DType::F32 && t->dtype != DType::F16 && t->dtype != DType::BF16)
      return Status::corrupt("tensor '" + e.name + "' in " + weights.fileOf(e.name).string() +
                             " has dtype " + std::string(dtypeName(t->dtype)) +
                             "; model weights must be F32, F16 or BF16");
  }
  return Status::ok();
}

std::string llamaConfigJson(const LlamaConfig& c) {
  const bool qwen = c.architecture == ModelArchitecture::Qwen2;
  std::ostringstream os;
  JsonWriter w(os, /*pretty=*/true);
  w.beginObject();
  w.key("architectures").beginArray().value(qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM").endArray();
  w.key("model_type").value(qwen ? "qwen2" : "llama");
  w.key("hidden_size").value(c.hiddenSize);
  w.key("intermediate_size").value(c.intermediateSize);
  w.key("num_hidden_layers").value(c.numHiddenLayers);
  w.key("num_attention_heads").value(c.numAttentionHeads);
  w.key("num_key_value_heads").value(c.numKeyValueHeads);
  w.key("head_dim").value(c.headDim);
  w.key("max_position_embeddings").value(c.maxPositionEmbeddings);
  w.key("vocab_size").value(c.vocabSize);
  w.key("rms_norm_eps").value(c.rmsNormEps);
  w.key("rope_theta").value(c.ropeTheta);
  w.key("hidden_act").value("silu");
  w.key("tie_word_embeddings").value(c.tieWordEmbeddings);
  if (!qwen) {
    w.key("attention_bias").value(c.attentionBias);
    w.key("mlp_bias").value(c.mlpBias);
  }
  if (c.bosTokenId) w.key("bos_token_id").value(*c.bosTokenId);
  if (c.eosTokenIds.size() == 1) {
    w.key("eos_token_id").value(c.eosTokenIds[0]);
  } else if (!c.eosTokenIds.empty()) {
    w.key("eos_token_id").beginArray();
    for (int64_t id : c.eosTokenIds) w.value(id);
    w.endArray();
  }
  w.key("torch_dtype").value(c.torchDtype);
  w.endObject();
  os << "\n";
  return os.str();
}

std::string bertConfigJson(const BertConfig& c) {
  std::ostringstream os;
  JsonWriter w(os, /*pretty=*/true);
  w.beginObject();
  w.key("architectures").beginArray().value("BertModel").endArray();
  w.key("model_type").value("bert");
  w.key("hidden_size").value(c.hiddenSize);
  w.key("num_hidden_layers").value(c.numHiddenLayers);
  w.key("num_attention_heads").value(c.numAttentionHeads);
  w.key("intermediate_size").value(c.intermediateSize);
  w.key("max_position_embeddings").value(c.maxPositionEmbeddings);
  w.key("type_vocab_size").value(c.typeVocabSize);
  w.key("vocab_size").value(c.vocabSize);
  w.key("pad_token_id").value(c.padTokenId);
  w.key("layer_norm_eps").value(c.layerNormEps);
  w.key("hidden_act").value(c.hiddenAct);
  w.key("position_embedding_type").value("absolute");
  w.key("torch_dtype").value(c.torchDtype);
  if (c.lexicalBuckets > 0) {
    w.key("lexical_buckets").value(c.lexicalBuckets);
    w.key("lexical_dim").value(c.lexicalDim);
    w.key("lexical_avg_words").value(c.lexicalAvgWords);
  }
  w.endObject();
  os << "\n";
  return os.str();
}

std::vector<ExpectedTensor> expectedBertTensors(const BertConfig& c, std::string_view prefix) {
  const int64_t h = c.hiddenSize, ff = c.intermediateSize;
  const std::string p(prefix);
  std::vector<ExpectedTensor> out;
  out.push_back({p + "embeddings.word_embeddings.weight", {c.vocabSize, h}});
  out.push_back({p + "embeddings.position_embeddings.weight", {c.maxPositionEmbeddings, h}});
  out.push_back({p + "embeddings.token_type_embeddings.weight", {c.typeVocabSize, h}});
  out.push_back({p + "embeddings.LayerNorm.weight", {h}});
  out.push_back({p + "embeddings.LayerNorm.bias", {h}});
  for (int64_t i = 0; i < c.numHiddenLayers; ++i) {
    const std::string l = p + "encoder.layer." + std::to_string(i) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value",
                          "attention.output.dense"}) {
      out.push_back({l + m + ".weight", {h, h}});
      out.push_back({l + m + ".bias", {h}});
    }
    out.push_back({l + "attention.output.LayerNorm.weight", {h}});
    out.push_back({l + "attention.output.LayerNorm.bias", {h}});
    out.push_back({l + "intermediate.dense.weight", {ff, h}});
    out.push_back({l + "intermediate.dense.bias", {ff}});
    out.push_back({l + "output.dense.weight", {h, ff}});
    out.push_back({l + "output.dense.bias", {h}});
    out.push_back({l + "output.LayerNorm.weight", {h}});
    out.push_back({l + "output.LayerNorm.bias", {h}});
  }
  if (c.lexicalBuckets > 0) {
    out.push_back({p + "lexical.word_weight", {c.lexicalBuckets}});
  }
  return out;
}

}  // namespace rag::model
