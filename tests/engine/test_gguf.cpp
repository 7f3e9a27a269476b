// GGUF export (model/gguf.h): the file is read back here with a reader of its own, written from
// the GGUF specification, so a layout slip on the writing side cannot hide in a shared helper.
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/fs.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::model;
namespace fs = std::filesystem;

namespace {

// For helpers that return a value (QVERIFY needs a void function): QtTest reports the throw.
void check(const Status& s) {
  if (!s.isOk()) throw std::runtime_error(s.message());
}

const fs::path kTokenizer = fs::path(RAGWB_FIXTURES_DIR) / "tokenizer/gpt2_style/tokenizer.json";

// A one-layer Llama small enough to check by hand: 2 query heads, 1 KV head, head dim 4, and a
// vocabulary (300) larger than the fixture tokenizer's 272 tokens. Every weight value is its
// flat index plus a per-tensor offset, so a moved row shows.
LlamaConfig tinyConfig() {
  LlamaConfig c;
  c.architectureName = "LlamaForCausalLM";
  c.hiddenSize = 8;
  c.intermediateSize = 12;
  c.numHiddenLayers = 1;
  c.numAttentionHeads = 2;
  c.numKeyValueHeads = 1;
  c.headDim = 4;
  c.maxPositionEmbeddings = 64;
  c.vocabSize = 300;
  c.bosTokenId = 268;
  c.eosTokenIds = {269};
  return c;
}

std::map<std::string, std::vector<float>> writeCheckpoint(const fs::path& dir, const LlamaConfig& c) {
  std::map<std::string, std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  float base = 0;
  for (const ExpectedTensor& e : expectedLlamaTensors(c)) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    std::vector<float>& v = values[e.name];
    for (int64_t i = 0; i < n; ++i) v.push_back(base + static_cast<float>(i));
    base += 10000;
  }
  for (const ExpectedTensor& e : expectedLlamaTensors(c))
    tensors.push_back({e.name, DType::F32, e.shape, std::as_bytes(std::span<const float>(values[e.name]))});
  check(writeSafetensors(dir / "model.safetensors", tensors));
  check(writeFileAtomic(dir / "config.json", llamaConfigJson(c)));
  return values;
}

// A GGUF v3 reader for the types the exporter writes.
struct Gguf {
  struct Tensor {
    std::vector<uint64_t> dims;
    uint32_t type = 0;
    uint64_t offset = 0;
  };
  std::map<std::string, std::string> strings;
  std::map<std::string, uint64_t> numbers;   // u32 and bool
  std::map<std::string, float> floats;
  std::map<std::string, std::vector<std::string>> stringArrays;
  std::map<std::string, std::vector<int32_t>> intArrays;
  std::map<std::string, Tensor> tensors;
  std::vector<std::string> tensorOrder;
  std::string bytes;
  size_t dataStart = 0;

  std::vector<float> data(const std::string& name) const {
    const Tensor& t = tensors.at(name);
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    std::vector<float> out(n);
    std::memcpy(out.data(), bytes.data() + dataStart + t.offset, n * sizeof(float));
    return out;
  }
};

Gguf readGguf(const fs::path& path) {
  Gguf g;
  Result<std::string> file = readFile(path);
  check(file.status());
  g.bytes = *file;
  size_t at = 0;
  auto take = [&](void* out, size_t n) {
    if (at + n > g.bytes.size()) throw std::runtime_error("GGUF ends early");
    std::memcpy(out, g.bytes.data() + at, n);
    at += n;
  };
  auto u32 = [&] { uint32_t v; take(&v, 4); return v; };
  auto u64 = [&] { uint64_t v; take(&v, 8); return v; };
  auto str = [&] { std::string s(u64(), '\0'); take(s.data(), s.size()); return s; };
  if (g.bytes.compare(0, 4, "GGUF") != 0) throw std::runtime_error("no GGUF magic");
  at = 4;
  if (u32() != 3) throw std::runtime_error("not version 3");
  const uint64_t nTensors = u64(), nKv = u64();
  for (uint64_t k = 0; k < nKv; ++k) {
    const std::string key = str();
    const uint32_t type = u32();
    if (type == 4) g.numbers[key] = u32();
    else if (type == 7) { uint8_t b; take(&b, 1); g.numbers[key] = b; }
    else if (type == 6) { float f; take(&f, 4); g.floats[key] = f; }
    else if (type == 8) g.strings[key] = str();
    else if (type == 9) {
      const uint32_t elem = u32();
      const uint64_t n = u64();
      for (uint64_t i = 0; i < n; ++i) {
        if (elem == 8) g.stringArrays[key].push_back(str());
        else if (elem == 5) g.intArrays[key].push_back(static_cast<int32_t>(u32()));
        else throw std::runtime_error("unexpected array type");
      }
    } else throw std::runtime_error("unexpected value type " + std::to_string(type));
  }
  for (uint64_t t = 0; t < nTensors; ++t) {
    const std::string name = str();
    Gguf::Tensor info;
    const uint32_t dims = u32();
    for (uint32_t d = 0; d < dims; ++d) info.dims.push_back(u64());
    info.type = u32();
    info.offset = u64();
    g.tensors[name] = info;
    g.tensorOrder.push_back(name);
  }
  const uint64_t align = g.numbers.count("general.alignment") ? g.numbers["general.alignment"] : 32;
  g.dataStart = (at + align - 1) / align * align;
  return g;
}

}  // namespace

class TestGguf : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void ropeRowsMoveFromRotateHalfToInterleaved() {
    // One head of dim 4 over 1 input: HF rows (r0 r1 | r2 r3) pair r0 with r2 and r1 with r3;
    // GGML's interleaved RoPE pairs adjacent rows, so the order becomes r0 r2 r1 r3.
    std::vector<float> rows = {0, 1, 2, 3, 10, 11, 12, 13};  // two heads
    permuteRopeRows(rows.data(), 2, 4, 1);
    QCOMPARE(rows, (std::vector<float>{0, 2, 1, 3, 10, 12, 11, 13}));
    // Rows of two inputs move whole.
    std::vector<float> wide = {0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5};
    permuteRopeRows(wide.data(), 1, 4, 2);
    QCOMPARE(wide, (std::vector<float>{0, 0.5, 2, 2.5, 1, 1.5, 3, 3.5}));
  }

  void exportsWhatLlamaCppReads() {
    QTemporaryDir tmp;
    const fs::path dir = tmp.path().toStdString();
    const LlamaConfig c = tinyConfig();
    const auto values = writeCheckpoint(dir / "m", c);
    Result<GgufExport> r = exportLlamaGguf({.modelDir = dir / "m", .tokenizer = kTokenizer, .out = dir / "m.gguf"});
    QVERIFY_OK(r);
    QCOMPARE(r->vocabTokens, int64_t{272});
    QCOMPARE(r->paddedTokens, int64_t{28});
    QCOMPARE(r->bytes, static_cast<int64_t>(fs::file_size(dir / "m.gguf")));

    const Gguf g = readGguf(dir / "m.gguf");
    QCOMPARE(g.strings.at("general.architecture"), std::string("llama"));
    QCOMPARE(g.strings.at("general.name"), std::string("m"));
    QCOMPARE(g.strings.at("tokenizer.ggml.model"), std::string("gpt2"));
    QCOMPARE(g.numbers.at("llama.block_count"), uint64_t{1});
    QCOMPARE(g.numbers.at("llama.embedding_length"), uint64_t{8});
    QCOMPARE(g.numbers.at("llama.feed_forward_length"), uint64_t{12});
    QCOMPARE(g.numbers.at("llama.attention.head_count"), uint64_t{2});
    QCOMPARE(g.numbers.at("llama.attention.head_count_kv"), uint64_t{1});
    QCOMPARE(g.numbers.at("llama.rope.dimension_count"), uint64_t{4});
    QCOMPARE(g.numbers.at("tokenizer.ggml.bos_token_id"), uint64_t{268});
    QCOMPARE(g.numbers.at("tokenizer.ggml.eos_token_id"), uint64_t{269});
    QCOMPARE(g.numbers.at("tokenizer.ggml.add_bos_token"), uint64_t{0});
    QCOMPARE(g.floats.at("llama.rope.freq_base"), 10000.0f);
    const std::vector<std::string>& tokens = g.stringArrays.at("tokenizer.ggml.tokens");
    const std::vector<int32_t>& types = g.intArrays.at("tokenizer.ggml.token_type");
    QCOMPARE(tokens.size(), size_t{300});
    QCOMPARE(types.size(), size_t{300});
    QCOMPARE(types[0], 1);            // normal
    QCOMPARE(types[268], 3);          // an added special token: control
    QCOMPARE(tokens[299], std::string("[PAD299]"));
    QCOMPARE(types[299], 5);          // unused
    QCOMPARE(g.stringArrays.at("tokenizer.ggml.merges").size(), size_t{12});

    // Every tensor, llama.cpp's names, dims innermost first, aligned, F32.
    QCOMPARE(g.tensorOrder.front(), std::string("token_embd.weight"));
    QVERIFY(!g.tensors.count("output.weight") == c.tieWordEmbeddings);
    QCOMPARE(g.tensors.size(), size_t{2 + 9} + (c.tieWordEmbeddings ? 0u : 1u));
    for (const auto& [name, t] : g.tensors) {
      QCOMPARE(t.type, uint32_t{0});
      QCOMPARE(t.offset % 32, uint64_t{0});
    }
    QCOMPARE(g.tensors.at("blk.0.attn_q.weight").dims, (std::vector<uint64_t>{8, 8}));
    QCOMPARE(g.tensors.at("blk.0.attn_k.weight").dims, (std::vector<uint64_t>{8, 4}));
    QCOMPARE(g.tensors.at("blk.0.ffn_down.weight").dims, (std::vector<uint64_t>{12, 8}));
    QCOMPARE(g.tensors.at("token_embd.weight").dims, (std::vector<uint64_t>{8, 300}));

    // Unpermuted tensors are bit-identical; q and k rows are reordered per head.
    QCOMPARE(g.data("blk.0.attn_v.weight"), values.at("model.layers.0.self_attn.v_proj.weight"));
    QCOMPARE(g.data("blk.0.ffn_down.weight"), values.at("model.layers.0.mlp.down_proj.weight"));
    QCOMPARE(g.data("output.weight"), values.at("lm_head.weight"));
    std::vector<float> q = values.at("model.layers.0.self_attn.q_proj.weight");
    permuteRopeRows(q.data(), 2, 4, 8);
    QCOMPARE(g.data("blk.0.attn_q.weight"), q);
    const std::vector<float> gq = g.data("blk.0.attn_q.weight");
    const std::vector<float>& hq = values.at("model.layers.0.self_attn.q_proj.weight");
    QCOMPARE(gq[1 * 8 + 3], hq[2 * 8 + 3]);  // head 0: GGUF row 1 is HF row 2
    QCOMPARE(gq[6 * 8 + 0], hq[(4 + 1) * 8 + 0]);  // head 1: GGUF row 2 (of 4) is HF row 1
    std::vector<float> k = values.at("model.layers.0.self_attn.k_proj.weight");
    permuteRopeRows(k.data(), 1, 4, 8);
    QCOMPARE(g.data("blk.0.attn_k.weight"), k);
  }

  void refusalsNameTheProblemAndKeepTheOldFile() {
    QTemporaryDir tmp;
    const fs::path dir = tmp.path().toStdString();
    LlamaConfig c = tinyConfig();
    writeCheckpoint(dir / "m", c);
    QVERIFY_OK(writeFileAtomic(dir / "old.gguf", "previous contents"));
    auto expectError = [&](const GgufExportOptions& o, StatusCode code, const char* words) {
      Result<GgufExport> r = exportLlamaGguf(o);
      QVERIFY(!r);
      QCOMPARE(r.status().code(), code);
      QVERIFY2(r.status().message().find(words) != std::string::npos, r.status().message().c_str());
      QCOMPARE(*readFile(dir / "old.gguf"), std::string("previous contents"));
    };
    // No tokenizer.json in the model directory and none given.
    expectError({.modelDir = dir / "m", .out = dir / "old.gguf"}, StatusCode::NotFound, "--tokenizer");
    // A tokenizer whose ids do not fit the model's vocabulary.
    c.vocabSize = 100;
    writeCheckpoint(dir / "small", c);
    expectError({.modelDir = dir / "small", .tokenizer = kTokenizer, .out = dir / "old.gguf"}, StatusCode::InvalidArgument,
                "outside the model's vocab_size 100");
    // A tokenizer that is not byte-level BPE.
    expectError({.modelDir = dir / "m", .tokenizer = fs::path(RAGWB_FIXTURES_DIR) / "tokenizer/wordpiece.json", .out = dir / "old.gguf"},
                StatusCode::InvalidArgument, "byte-level BPE");
    // Biases are not written.
    c = tinyConfig();
    c.attentionBias = true;
    c.architecture = ModelArchitecture::Qwen2;
    c.architectureName = "Qwen2ForCausalLM";
    writeCheckpoint(dir / "qwen", c);
    expectError({.modelDir = dir / "qwen", .tokenizer = kTokenizer, .out = dir / "old.gguf"}, StatusCode::InvalidArgument,
                "plain Llama checkpoints only");
  }
};

QTEST_GUILESS_MAIN(TestGguf)
#include "test_gguf.moc"
