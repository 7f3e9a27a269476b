#include "model/gguf.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/fs.h"
#include "core/json.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace rag::model {

namespace fs = std::filesystem;

void permuteRopeRows(float* rows, int64_t heads, int64_t headDim, int64_t in) {
  const int64_t half = headDim / 2;
  std::vector<float> head(static_cast<size_t>(headDim * in));
  for (int64_t h = 0; h < heads; ++h) {
    float* base = rows + h * headDim * in;
    std::memcpy(head.data(), base, head.size() * sizeof(float));
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t i = 0; i < half; ++i)
        std::memcpy(base + (2 * i + t) * in, head.data() + (t * half + i) * in, static_cast<size_t>(in) * sizeof(float));
  }
}

namespace {

// GGUF value types and GGML tensor types, as gguf.h numbers them.
enum : uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };
enum : uint32_t { kTensorF32 = 0 };
enum : int32_t { kTokenNormal = 1, kTokenControl = 3, kTokenUnused = 5 };
constexpr uint64_t kAlignment = 32;

uint64_t alignUp(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// The metadata and tensor-info part of the file, little-endian.
class Header {
public:
  template <typename T>
  void raw(T v) {
    const char* p = reinterpret_cast<const char*>(&v);
    bytes.append(p, sizeof v);
  }
  void str(std::string_view s) {
    raw<uint64_t>(s.size());
    bytes.append(s);
  }
  void key(std::string_view k, uint32_t type) {
    str(k);
    raw<uint32_t>(type);
    ++kvCount;
  }
  void u32(std::string_view k, int64_t v) { key(k, kU32), raw<uint32_t>(static_cast<uint32_t>(v)); }
  void f32(std::string_view k, double v) { key(k, kF32), raw<float>(static_cast<float>(v)); }
  void boolean(std::string_view k, bool v) { key(k, kBool), raw<uint8_t>(v ? 1 : 0); }
  void string(std::string_view k, std::string_view v) { key(k, kString), str(v); }
  void strings(std::string_view k, const std::vector<std::string>& v) {
    key(k, kArray), raw<uint32_t>(kString), raw<uint64_t>(v.size());
    for (const std::string& s : v) str(s);
  }
  void i32s(std::string_view k, const std::vector<int32_t>& v) {
    key(k, kArray), raw<uint32_t>(kI32), raw<uint64_t>(v.size());
    for (int32_t x : v) raw<int32_t>(x);
  }

  std::string bytes;
  uint64_t kvCount = 0;
};

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  int64_t fromFile = 0;
};

Result<Vocabulary> readByteLevelBpe(const fs::path& path, int64_t vocabSize) {
  RAG_ASSIGN_OR_RETURN(std::string text, readFile(path));
  RAG_ASSIGN_OR_RETURN(JsonValue doc, parseJson(text));
  auto bad = [&](const std::string& what) {
    return Status::invalidArgument(path.string() + ": " + what +
                                   "; GGUF export takes a Hugging Face byte-level BPE tokenizer.json (what `ragraph train tokenizer` writes)");
  };
  const JsonValue* model = doc.find("model");
  const JsonValue* type = model ? model->find("type") : nullptr;
  if (!type || !type->isString() || type->asString() != "BPE") return bad("model.type is not \"BPE\"");
  const JsonValue* pre = doc.find("pre_tokenizer");
  const JsonValue* preType = pre ? pre->find("type") : nullptr;
  if (!preType || !preType->isString() || preType->asString() != "ByteLevel")
    return bad("pre_tokenizer is not ByteLevel");
  const JsonValue* vocab = model->find("vocab");
  const JsonValue* merges = model->find("merges");
  if (!vocab || !vocab->isObject() || !merges || !merges->isArray()) return bad("model.vocab or model.merges is missing");

  Vocabulary v;
  std::vector<bool> seen;
  auto place = [&](int64_t id, const std::string& token, int32_t tokenType) -> Status {
    if (id < 0 || id >= vocabSize)
      return bad("token id " + std::to_string(id) + " ('" + token + "') is outside the model's vocab_size " +
                 std::to_string(vocabSize));
    if (static_cast<size_t>(id) >= v.tokens.size()) v.tokens.resize(static_cast<size_t>(id) + 1), v.types.resize(v.tokens.size()), seen.resize(v.tokens.size());
    v.tokens[static_cast<size_t>(id)] = token;
    v.types[static_cast<size_t>(id)] = tokenType;
    seen[static_cast<size_t>(id)] = true;
    return Status::ok();
  };
  for (const auto& [token, id] : vocab->asObject()) {
    if (!id.asInt64()) return bad("model.vocab['" + token + "'] is not an integer id");
    RAG_RETURN_IF_ERROR(place(*id.asInt64(), token, kTokenNormal));
  }
  if (const JsonValue* added = doc.find("added_tokens"); added && added->isArray())
    for (const JsonValue& a : added->asArray()) {
      const JsonValue* id = a.find("id");
      const JsonValue* content = a.find("content");
      if (!id || !id->asInt64() || !content || !content->isString()) return bad("an added_tokens entry lacks id or content");
      const JsonValue* special = a.find("special");
      RAG_RETURN_IF_ERROR(place(*id->asInt64(), content->asString(),
                                special && special->isBool() && special->asBool() ? kTokenControl : kTokenNormal));
    }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) return bad("token id " + std::to_string(i) + " has no token (the ids must be 0 .. n-1)");
  v.fromFile = static_cast<int64_t>(v.tokens.size());
  for (int64_t id = v.fromFile; id < vocabSize; ++id) {
    v.tokens.push_back("[PAD" + std::to_string(id) + "]");
    v.types.push_back(kTokenUnused);
  }
  for (const JsonValue& m : merges->asArray()) {
    if (m.isString()) v.merges.push_back(m.asString());
    else if (m.isArray() && m.size() == 2 && m.asArray()[0].isString() && m.asArray()[1].isString())
      v.merges.push_back(m.asArray()[0].asString() + " " + m.asArray()[1].asString());
    else return bad("a merge is neither \"a b\" nor [\"a\", \"b\"]");
  }
  return v;
}

struct OutTensor {
  std::string name;       // llama.cpp's
  const TensorView* src;  // HF's
  int64_t permuteHeads;   // > 0: attn_q / attn_k rows to reorder for interleaved RoPE
  uint64_t offset = 0;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

Result<GgufExport> exportLlamaGguf(const GgufExportOptions& options) {
  RAG_ASSIGN_OR_RETURN(LlamaConfig c, loadLlamaConfig(options.modelDir));
  auto refuse = [&](const std::string& what) {
    return Status::invalidArgument(options.modelDir.string() + ": " + what + "; GGUF export writes plain Llama checkpoints only");
  };
  if (c.architecture != ModelArchitecture::Llama) return refuse("architecture " + c.architectureName + " is not LlamaForCausalLM");
  if (c.attentionBias || c.attentionOutputBias || c.mlpBias) return refuse("the checkpoint has biases");
  if (c.ropeScaling) return refuse("config.json sets rope_scaling");
  RAG_ASSIGN_OR_RETURN(SafetensorsWeights weights, SafetensorsWeights::open(options.modelDir));
  const std::vector<ExpectedTensor> expected = expectedLlamaTensors(c);
  RAG_RETURN_IF_ERROR(checkTensors(weights, expected));
  const fs::path tokenizerPath = options.tokenizer.empty() ? options.modelDir / "tokenizer.json" : options.tokenizer;
  if (!fs::exists(tokenizerPath))
    return Status::notFound(tokenizerPath.string() + " does not exist: GGUF needs the vocabulary; pass --tokenizer FILE (a tokenizer.json)");
  RAG_ASSIGN_OR_RETURN(Vocabulary vocab, readByteLevelBpe(tokenizerPath, c.vocabSize));

  Header h;
  const std::string name = options.name.empty() ? fs::absolute(options.modelDir).lexically_normal().filename().string() : options.name;
  h.string("general.architecture", "llama");
  h.string("general.name", name.empty() ? "model" : name);
  h.u32("general.file_type", 0);  // all F32
  h.u32("general.alignment", kAlignment);
  h.u32("llama.vocab_size", c.vocabSize);
  h.u32("llama.context_length", c.maxPositionEmbeddings);
  h.u32("llama.embedding_length", c.hiddenSize);
  h.u32("llama.block_count", c.numHiddenLayers);
  h.u32("llama.feed_forward_length", c.intermediateSize);
  h.u32("llama.attention.head_count", c.numAttentionHeads);
  h.u32("llama.attention.head_count_kv", c.numKeyValueHeads);
  h.u32("llama.attention.key_length", c.headDim);
  h.u32("llama.attention.value_length", c.headDim);
  h.u32("llama.rope.dimension_count", c.headDim);
  h.f32("llama.rope.freq_base", c.ropeTheta);
  h.f32("llama.attention.layer_norm_rms_epsilon", c.rmsNormEps);
  h.string("tokenizer.ggml.model", "gpt2");
  h.string("tokenizer.ggml.pre", "gpt-2");
  h.strings("tokenizer.ggml.tokens", vocab.tokens);
  h.i32s("tokenizer.ggml.token_type", vocab.types);
  h.strings("tokenizer.ggml.merges", vocab.merges);
  if (c.bosTokenId) h.u32("tokenizer.ggml.bos_token_id", *c.bosTokenId);
  if (!c.eosTokenIds.empty()) h.u32("tokenizer.ggml.eos_token_id", c.eosTokenIds.front());
  // The serving engine's prompts start without BOS (model/prompt.h): so do llama.cpp's.
  h.boolean("tokenizer.ggml.add_bos_token", false);
  h.boolean("tokenizer.ggml.add_eos_token", false);

  std::vector<OutTensor> tensors;
  auto add = [&](std::string ggufName, const std::string& hfName, int64_t permuteHeads = 0) {
    tensors.push_back({std::move(ggufName), weights.find(hfName), permuteHeads});
  };
  add("token_embd.weight", "model.embed_tokens.weight");
  for (int64_t l = 0; l < c.numHiddenLayers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    add(g + "attn_norm.weight", hf + "input_layernorm.weight");
    add(g + "attn_q.weight", hf + "self_attn.q_proj.weight", c.numAttentionHeads);
    add(g + "attn_k.weight", hf + "self_attn.k_proj.weight", c.numKeyValueHeads);
    add(g + "attn_v.weight", hf + "self_attn.v_proj.weight");
    add(g + "attn_output.weight", hf + "self_attn.o_proj.weight");
    add(g + "ffn_norm.weight", hf + "post_attention_layernorm.weight");
    add(g + "ffn_gate.weight", hf + "mlp.gate_proj.weight");
    add(g + "ffn_up.weight", hf + "mlp.up_proj.weight");
    add(g + "ffn_down.weight", hf + "mlp.down_proj.weight");
  }
  add("output_norm.weight", "model.norm.weight");
  if (!c.tieWordEmbeddings) add("output.weight", "lm_head.weight");

  uint64_t offset = 0;
  for (OutTensor& t : tensors) {
    t.offset = offset;
    offset = alignUp(offset + static_cast<uint64_t>(t.src->numel()) * sizeof(float));
    h.str(t.name);
    const std::vector<int64_t>& shape = t.src->shape;
    h.raw<uint32_t>(static_cast<uint32_t>(shape.size()));
    for (auto d = shape.rbegin(); d != shape.rend(); ++d) h.raw<uint64_t>(static_cast<uint64_t>(*d));  // GGML: innermost first
    h.raw<uint32_t>(kTensorF32);
    h.raw<uint64_t>(t.offset);
  }
  std::string head = "GGUF";
  head.append(4, '\0');
  const uint32_t version = 3;
  std::memcpy(head.data() + 4, &version, 4);
  const uint64_t counts[2] = {tensors.size(), h.kvCount};
  head.append(reinterpret_cast<const char*>(counts), sizeof counts);
  head += h.bytes;
  head.resize(alignUp(head.size()), '\0');

  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(options.out));
  auto fail = [&](const std::string& what) {
    discardStagedOutput(staged);
    return Status::ioError("writing " + options.out.string() + ": " + what + " (the old file, if any, is untouched)");
  };
  {
    std::unique_ptr<std::FILE, FileCloser> f(std::fopen(staged.temp.c_str(), "wb"));
    if (!f) return fail(std::strerror(errno));
    auto write = [&](const void* p, size_t n) { return std::fwrite(p, 1, n, f.get()) == n; };
    if (!write(head.data(), head.size())) return fail(std::strerror(errno));
    uint64_t at = 0;
    const char zeros[kAlignment] = {};
    for (const OutTensor& t : tensors) {
      if (!write(zeros, t.offset - at)) return fail(std::strerror(errno));
      Result<std::vector<float>> converted = toF32(*t.src);
      if (!converted) return fail(converted.status().message());
      std::vector<float>& values = *converted;
      if (t.permuteHeads > 0) permuteRopeRows(values.data(), t.permuteHeads, c.headDim, c.hiddenSize);
      if (!write(values.data(), values.size() * sizeof(float))) return fail(std::strerror(errno));
      at = t.offset + values.size() * sizeof(float);
    }
    if (!write(zeros, offset - at)) return fail(std::strerror(errno));
    if (std::fflush(f.get()) != 0) return fail(std::strerror(errno));
    if (std::fclose(f.release()) != 0) return fail(std::strerror(errno));
  }
  RAG_RETURN_IF_ERROR(commitStagedOutput(staged));
  GgufExport r;
  r.tensors = static_cast<int64_t>(tensors.size());
  r.bytes = static_cast<int64_t>(head.size() + offset);
  r.vocabTokens = vocab.fromFile;
  r.paddedTokens = c.vocabSize - vocab.fromFile;
  return r;
}

}  // namespace rag::model
