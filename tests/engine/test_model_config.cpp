#include <QtTest>

#include <fstream>
#include <string>
#include <vector>

#include "status_checks.h"
#include "model/model_config.h"

using namespace rag;
using namespace rag::model;

namespace {

// TinyLlama-1.1B's config.json, trimmed to the fields HF writes.
const char* kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
  "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": null,
  "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "torch_dtype": "bfloat16", "vocab_size": 32000})";

// Qwen2-0.5B-Instruct's config.json, trimmed.
const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
  "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
  "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
  "use_sliding_window": false, "tie_word_embeddings": true, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "torch_dtype": "bfloat16", "vocab_size": 151936})";

const char* kBert = R"({
  "architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 384,
  "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536,
  "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
  "vocab_size": 30522, "hidden_act": "gelu", "pad_token_id": 0})";

// A small Llama config and a checkpoint with exactly its tensors (zeros, F32).
const char* kTiny = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8,
  "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "vocab_size": 10, "tie_word_embeddings": false})";

Status writeCheckpoint(const std::string& path, const std::vector<ExpectedTensor>& tensors,
                       DType dtype = DType::F32) {
  std::vector<std::vector<std::byte>> storage;
  std::vector<TensorToWrite> out;
  for (const ExpectedTensor& e : tensors) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    storage.emplace_back(static_cast<size_t>(n) * dtypeSize(dtype));
    out.push_back({e.name, dtype, e.shape, storage.back()});
  }
  return writeSafetensors(path, out);
}

}  // namespace

class TestModelConfig : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void parsesLlama() {
    Result<LlamaConfig> c = parseLlamaConfig(kTinyLlama);
    QVERIFY2(c.isOk(), c.status().toString().c_str());
    QCOMPARE(c->architecture, ModelArchitecture::Llama);
    QCOMPARE(c->hiddenSize, int64_t{2048});
    QCOMPARE(c->intermediateSize, int64_t{5632});
    QCOMPARE(c->numHiddenLayers, int64_t{22});
    QCOMPARE(c->numAttentionHeads, int64_t{32});
    QCOMPARE(c->numKeyValueHeads, int64_t{4});
    QCOMPARE(c->headDim, int64_t{64});
    QCOMPARE(c->rmsNormEps, 1e-5);
    QCOMPARE(c->ropeTheta, 10000.0);
    QVERIFY(!c->ropeScaling);
    QCOMPARE(c->vocabSize, int64_t{32000});
    QCOMPARE(c->bosTokenId, std::optional<int64_t>(1));
    QCOMPARE(c->eosTokenIds, (std::vector<int64_t>{2}));
    QCOMPARE(c->torchDtype, std::string("bfloat16"));
    QVERIFY(!c->tieWordEmbeddings);
    QVERIFY(!c->attentionBias);
  }

  void llamaDefaults() {
    Result<LlamaConfig> c = parseLlamaConfig(R"({"model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
        "vocab_size": 100, "eos_token_id": [7, 8, 9],
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})");
    QVERIFY2(c.isOk(), c.status().toString().c_str());
    QCOMPARE(c->architectureName, std::string("LlamaForCausalLM"));
    QCOMPARE(c->numKeyValueHeads, int64_t{4});   // = heads
    QCOMPARE(c->headDim, int64_t{16});           // = hidden / heads
    QCOMPARE(c->ropeTheta, 10000.0);
    QCOMPARE(c->rmsNormEps, 1e-6);
    QCOMPARE(c->maxPositionEmbeddings, int64_t{2048});
    QCOMPARE(c->eosTokenIds, (std::vector<int64_t>{7, 8, 9}));
    QVERIFY(c->ropeScaling);
    QCOMPARE(c->ropeScaling->type, std::string("llama3"));
    QCOMPARE(c->ropeScaling->factor, 8.0);
    QCOMPARE(c->ropeScaling->originalMaxPositionEmbeddings, int64_t{8192});
    // An explicit head_dim wins over hidden / heads.
    Result<LlamaConfig> h = parseLlamaConfig(R"({"model_type": "llama", "hidden_size": 60,
        "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
        "head_dim": 32, "vocab_size": 100})");
    QVERIFY2(h.isOk(), h.status().toString().c_str());
    QCOMPARE(h->headDim, int64_t{32});
  }

  void parsesQwen2() {
    Result<LlamaConfig> c = parseLlamaConfig(kQwen2);
    QVERIFY2(c.isOk(), c.status().toString().c_str());
    QCOMPARE(c->architecture, ModelArchitecture::Qwen2);
    QVERIFY(c->attentionBias);
    QVERIFY(!c->attentionOutputBias);
    QVERIFY(c->tieWordEmbeddings);
    QCOMPARE(c->headDim, int64_t{64});
    QCOMPARE(c->ropeTheta, 1000000.0);
    QCOMPARE(c->numKeyValueHeads, int64_t{2});
  }

  void parsesBert() {
    Result<BertConfig> c = parseBertConfig(kBert);
    QVERIFY2(c.isOk(), c.status().toString().c_str());
    QCOMPARE(c->hiddenSize, int64_t{384});
    QCOMPARE(c->numHiddenLayers, int64_t{6});
    QCOMPARE(c->numAttentionHeads, int64_t{12});
    QCOMPARE(c->intermediateSize, int64_t{1536});
    QCOMPARE(c->maxPositionEmbeddings, int64_t{512});
    QCOMPARE(c->typeVocabSize, int64_t{2});
    QCOMPARE(c->layerNormEps, 1e-12);
    QCOMPARE(c->vocabSize, int64_t{30522});
    QCOMPARE(c->hiddenAct, std::string("gelu"));
    QCOMPARE(*detectArchitecture(kBert), ModelArchitecture::Bert);
    QVERIFY(!parseLlamaConfig(kBert));  // an encoder is not a decoder
    QVERIFY(!parseBertConfig(kTinyLlama));
    QCOMPARE(c->lexicalBuckets, int64_t{0});  // a plain BERT
    QCOMPARE(expectedBertTensors(*c).size(), size_t{5 + 6 * 16});
  }

  // The lexical branch's size round-trips through config.json, adds one tensor and widens the
  // embedding; a branch without its dim or mean length is refused.
  void bertLexicalBranch() {
    BertConfig c = *parseBertConfig(kBert);
    QCOMPARE(c.embeddingDim(), int64_t{384});
    c.lexicalBuckets = 1 << 19;
    c.lexicalDim = 512;
    c.lexicalAvgWords = 41.25;
    Result<BertConfig> back = parseBertConfig(bertConfigJson(c));
    QVERIFY2(back.isOk(), back.status().toString().c_str());
    QCOMPARE(back->lexicalBuckets, int64_t{1} << 19);
    QCOMPARE(back->lexicalDim, int64_t{512});
    QCOMPARE(back->lexicalAvgWords, 41.25);
    QCOMPARE(back->embeddingDim(), int64_t{384 + 512});
    const std::vector<ExpectedTensor> t = expectedBertTensors(*back, "bert.");
    QCOMPARE(t.size(), size_t{5 + 6 * 16 + 1});
    QCOMPARE(t.back().name, std::string("bert.lexical.word_weight"));
    QCOMPARE(t.back().shape, (std::vector<int64_t>{1 << 19}));
    const std::string base = R"({"architectures": ["BertModel"], "hidden_size": 8, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10, )";
    QVERIFY(!parseBertConfig(base + R"("lexical_buckets": -3})"));
    Result<BertConfig> noDim = parseBertConfig(base + R"("lexical_buckets": 8, "lexical_avg_words": 3})");
    QVERIFY(!noDim && noDim.status().message().find("lexical_dim") != std::string::npos);
    Result<BertConfig> noAvg = parseBertConfig(base + R"("lexical_buckets": 8, "lexical_dim": 4})");
    QVERIFY(!noAvg && noAvg.status().message().find("lexical_avg_words") != std::string::npos);
  }

  void unsupportedArchitecture() {
    Result<LlamaConfig> c = parseLlamaConfig(
        R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 8})");
    QVERIFY(!c);
    QCOMPARE(c.status().code(), StatusCode::InvalidArgument);
    QVERIFY2(c.status().message().starts_with(
                 "config.json architecture 'MistralForCausalLM' is not supported; supported: "
                 "LlamaForCausalLM, Qwen2ForCausalLM, BertModel"),
             c.status().message().c_str());
    Result<ModelArchitecture> t5 = detectArchitecture(R"({"model_type": "t5"})");
    QVERIFY(!t5);
    QVERIFY(mentions(t5.status(), {"'t5'"}));
    QVERIFY(!detectArchitecture(R"({"hidden_size": 8})"));
  }

  void badFields() {
    Result<LlamaConfig> missing = parseLlamaConfig(
        R"({"architectures": ["LlamaForCausalLM"], "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10})", "my/config.json");
    QVERIFY(!missing);
    QCOMPARE(missing.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(missing.status(), {"my/config.json", "hidden_size", "missing"}));

    Result<LlamaConfig> gqa = parseLlamaConfig(
        R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 12, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 6, "num_key_value_heads": 4,
            "vocab_size": 10})");
    QVERIFY(!gqa);
    QVERIFY(mentions(gqa.status(), {"num_key_value_heads 4"}));

    Result<LlamaConfig> act = parseLlamaConfig(
        R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10,
            "hidden_act": "gelu"})");
    QVERIFY(!act);
    QVERIFY(mentions(act.status(), {"hidden_act 'gelu'"}));

    Result<LlamaConfig> negative = parseLlamaConfig(
        R"({"architectures": ["LlamaForCausalLM"], "hidden_size": -8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10})");
    QVERIFY(!negative);
    QVERIFY(mentions(negative.status(), {"hidden_size", "positive"}));

    Result<LlamaConfig> sliding = parseLlamaConfig(
        R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 10,
            "use_sliding_window": true})");
    QVERIFY(!sliding);

    QVERIFY(!parseLlamaConfig("{not json"));
  }

  void expectedTensorNamesAndShapes() {
    LlamaConfig c = *parseLlamaConfig(kTinyLlama);
    std::vector<ExpectedTensor> t = expectedLlamaTensors(c);
    QCOMPARE(t.size(), size_t{1 + 22 * 9 + 1 + 1});
    QCOMPARE(t.front().name, std::string("model.embed_tokens.weight"));
    QCOMPARE(t.front().shape, (std::vector<int64_t>{32000, 2048}));
    QCOMPARE(t.back().name, std::string("lm_head.weight"));
    auto find = [&](const std::string& name) -> std::vector<int64_t> {
      for (const ExpectedTensor& e : t)
        if (e.name == name) return e.shape;
      return {};
    };
    // Grouped-query attention: k/v project to 4 heads x 64.
    QCOMPARE(find("model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{2048, 2048}));
    QCOMPARE(find("model.layers.21.self_attn.k_proj.weight"), (std::vector<int64_t>{256, 2048}));
    QCOMPARE(find("model.layers.3.self_attn.v_proj.weight"), (std::vector<int64_t>{256, 2048}));
    QCOMPARE(find("model.layers.3.self_attn.o_proj.weight"), (std::vector<int64_t>{2048, 2048}));
    QCOMPARE(find("model.layers.5.mlp.gate_proj.weight"), (std::vector<int64_t>{5632, 2048}));
    QCOMPARE(find("model.layers.5.mlp.down_proj.weight"), (std::vector<int64_t>{2048, 5632}));
    QCOMPARE(find("model.layers.5.post_attention_layernorm.weight"), (std::vector<int64_t>{2048}));
    QCOMPARE(find("model.norm.weight"), (std::vector<int64_t>{2048}));
    QVERIFY(find("model.layers.22.input_layernorm.weight").empty());

    LlamaConfig q = *parseLlamaConfig(kQwen2);
    std::vector<ExpectedTensor> qt = expectedLlamaTensors(q);
    // Tied embeddings drop lm_head; q/k/v biases add three per layer.
    QCOMPARE(qt.size(), size_t{1 + 24 * 12 + 1});
    bool hasKBias = false, hasOBias = false, hasLmHead = false;
    for (const ExpectedTensor& e : qt) {
      if (e.name == "model.layers.0.self_attn.k_proj.bias") {
        hasKBias = true;
        QCOMPARE(e.shape, (std::vector<int64_t>{128}));
      }
      hasOBias |= e.name.find("o_proj.bias") != std::string::npos;
      hasLmHead |= e.name == "lm_head.weight";
    }
    QVERIFY(hasKBias);
    QVERIFY(!hasOBias);
    QVERIFY(!hasLmHead);
  }

  void checkTensorsNamesTheFirstProblem() {
    QTemporaryDir dir;
    const std::string modelDir = dir.path().toStdString();
    {
      std::ofstream(modelDir + "/config.json") << kTiny;
    }
    Result<LlamaConfig> c = loadLlamaConfig(modelDir);
    QVERIFY2(c.isOk(), c.status().toString().c_str());
    std::vector<ExpectedTensor> expected = expectedLlamaTensors(*c);
    QVERIFY(writeCheckpoint(modelDir + "/model.safetensors", expected).isOk());
    Result<SafetensorsWeights> w = SafetensorsWeights::open(modelDir);
    QVERIFY(w.isOk());
    QVERIFY(checkTensors(*w, expected).isOk());

    // BF16 weights are accepted too.
    const std::string bf = modelDir + "/bf16.safetensors";
    QVERIFY(writeCheckpoint(bf, expected, DType::BF16).isOk());
    QVERIFY(checkTensors(*SafetensorsWeights::open(bf), expected).isOk());

    // Missing: drop layer 1's up_proj.
    std::vector<ExpectedTensor> partial;
    for (const ExpectedTensor& e : expected)
      if (e.name != "model.layers.1.mlp.up_proj.weight") partial.push_back(e);
    const std::string missingPath = modelDir + "/missing.safetensors";
    QVERIFY(writeCheckpoint(missingPath, partial).isOk());
    Status missing = checkTensors(*SafetensorsWeights::open(missingPath), expected);
    QCOMPARE(missing.code(), StatusCode::Corrupt);
    QVERIFY(mentions(missing, {"'model.layers.1.mlp.up_proj.weight'", "missing.safetensors",
                               "[16, 8]"}));

    // Shape mismatch: k_proj written for 4 kv heads instead of 2.
    std::vector<ExpectedTensor> misshapen = expected;
    for (ExpectedTensor& e : misshapen)
      if (e.name == "model.layers.0.self_attn.k_proj.weight") e.shape = {8, 8};
    const std::string shapePath = modelDir + "/shape.safetensors";
    QVERIFY(writeCheckpoint(shapePath, misshapen).isOk());
    Status shape = checkTensors(*SafetensorsWeights::open(shapePath), expected);
    QCOMPARE(shape.code(), StatusCode::Corrupt);
    QVERIFY(mentions(shape, {"'model.layers.0.self_attn.k_proj.weight'", "[8, 8]", "[4, 8]"}));

    // Integer weights.
    const std::string intPath = modelDir + "/int.safetensors";
    QVERIFY(writeCheckpoint(intPath, expected, DType::I32).isOk());
    Status dtype = checkTensors(*SafetensorsWeights::open(intPath), expected);
    QCOMPARE(dtype.code(), StatusCode::Corrupt);
    QVERIFY(mentions(dtype, {"'model.embed_tokens.weight'", "I32"}));
  }

  void loadFromMissingDirectory() {
    Result<LlamaConfig> c = loadLlamaConfig("/nonexistent/model");
    QVERIFY(!c);
    QCOMPARE(c.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(c.status(), {"/nonexistent/model", "config.json"}));
  }
};

QTEST_GUILESS_MAIN(TestModelConfig)
#include "test_model_config.moc"
