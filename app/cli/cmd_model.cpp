// `ragraph model gguf`: a Llama checkpoint as a GGUF file, for llama.cpp to run the same weights.
// `ragraph model lexical`: an embedder with a whole-word lexical branch (model/lexical_words.h)
// weighted by the corpus's passages, untrained: the dense part unchanged, BM25 carried beside it.
// `ragraph model grow`: a Llama checkpoint made deeper and/or wider without changing its outputs
// (model/model_grow.h), to be trained on with `train lm --init`.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "core/json_writer.h"
#include "core/fs.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/model_grow.h"
#include "model/text_embedder.h"
#include "model/training_data.h"

namespace rag::cli {

namespace fs = std::filesystem;

int cmdModelGguf(Args& args) {
  model::GgufExportOptions o;
  auto modelDir = args.get("model");
  auto out = args.get("out");
  o.tokenizer = args.getOr("tokenizer", "");
  o.name = args.getOr("name", "");
  const bool json = args.flag("json");
  if (Status s = args.finish(); !s) return fail(s);
  if (!modelDir || !out)
    return fail(Status::invalidArgument("--model DIR and --out FILE.gguf are required (e.g. --model datasets/models/rag-llama --out rag-llama.gguf)"));
  o.modelDir = *modelDir;
  o.out = *out;
  Result<model::GgufExport> r = model::exportLlamaGguf(o);
  if (!r) return fail(r.status());
  if (json) {
    JsonWriter w(std::cout, true);
    w.beginObject();
    w.key("out").value(o.out.string());
    w.key("tensors").value(r->tensors);
    w.key("bytes").value(r->bytes);
    w.key("vocab_tokens").value(r->vocabTokens);
    w.key("padded_tokens").value(r->paddedTokens);
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("wrote %s: %lld tensors (F32), %.1f MB, %lld tokens from the tokenizer", o.out.c_str(),
                static_cast<long long>(r->tensors), static_cast<double>(r->bytes) / 1e6,
                static_cast<long long>(r->vocabTokens));
    if (r->paddedTokens > 0) std::printf(" + %lld padding tokens", static_cast<long long>(r->paddedTokens));
    std::printf("\n");
  }
  return 0;
}

Status checkLexicalOptions(const std::string& flag, int64_t minBuckets, int64_t buckets, int64_t dim,
                           double weight) {
  constexpr int64_t kMaxBuckets = int64_t{1} << 24, kMaxDim = 8192;
  if (buckets < minBuckets || buckets > kMaxBuckets)
    return Status::invalidArgument(flag + "buckets must be at most " + std::to_string(kMaxBuckets) + " and at least " +
                                   std::to_string(minBuckets) + " (e.g. 524288: few words share a bucket's weight)");
  if (dim < 1 || dim > kMaxDim)
    return Status::invalidArgument(flag + "dim must be 1.." + std::to_string(kMaxDim) +
                                   " (e.g. 512: more components, less noise between words, a larger index)");
  if (!(weight >= 0 && weight <= 10))
    return Status::invalidArgument(flag + "weight must be between 0 and 10 (the BM25-like score's weight beside "
                                   "the dense cosine; e.g. 0.05)");
  return Status::ok();
}

int cmdModelLexical(Args& args) {
  const std::optional<std::string> embedder = args.get("embedder");
  const std::optional<std::string> out = args.get("out");
  const fs::path corpus = args.get("corpus") ? fs::path(*args.get("corpus")) : defaultCorpusPath();
  Result<int64_t> buckets = args.getInt("buckets", 524288);
  Result<int64_t> dim = args.getInt("dim", 512);
  Result<double> weight = args.getDouble("weight", model::kLexicalWeight);
  const bool json = args.flag("json");
  for (const Status& s : {buckets.status(), dim.status(), weight.status(), args.finish()})
    if (!s) return fail(s);
  if (!embedder || !out)
    return fail(Status::invalidArgument("--embedder DIR and --out DIR are required (e.g. --embedder "
                                        "datasets/models/rag-embedder --out runs/embedder-lexical)"));
  if (Status s = checkLexicalOptions("--", 1, *buckets, *dim, *weight); !s) return fail(s);
  Result<model::LexicalStatistics> stats = model::passageWordStatistics(corpus, *buckets);
  if (!stats) return fail(stats.status().withContext("weighing words by the corpus's passages"));
  if (Status s = model::saveEmbedderWithLexical(*embedder, *out, *stats, *dim, *weight); !s) return fail(s);
  if (json) {
    JsonWriter w(std::cout, true);
    w.beginObject();
    w.key("out").value(*out);
    w.key("buckets").value(*buckets);
    w.key("dim").value(*dim);
    w.key("weight").value(*weight);
    w.key("avg_words").value(stats->avgWords);
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("wrote %s: %s with a lexical branch of %lld word buckets in %lld components (weight %g; passages "
                "average %.1f words); build its index with `ragraph index build --embedder %s --index BASE`\n",
                out->c_str(), embedder->c_str(), static_cast<long long>(*buckets), static_cast<long long>(*dim),
                *weight, stats->avgWords, out->c_str());
  }
  return 0;
}

int cmdModelGrow(Args& args) {
  model::GrowOptions o;
  auto modelDir = args.get("model");
  auto out = args.get("out");
  Result<int64_t> layers = args.getInt("layers", 0);
  Result<int64_t> hidden = args.getInt("hidden", 0);
  Result<int64_t> ffn = args.getInt("ffn", 0);
  Result<int64_t> heads = args.getInt("heads", 0);
  Result<int64_t> kvHeads = args.getInt("kv-heads", 0);
  Result<int64_t> seed = args.getInt("seed", 1);
  const bool json = args.flag("json");
  if (Status s = args.finish(); !s) return fail(s);
  for (const Result<int64_t>* r : {&layers, &hidden, &ffn, &heads, &kvHeads, &seed})
    if (!*r) return fail(r->status());
  if (!modelDir || !out || (*layers == 0 && *hidden == 0 && *ffn == 0 && *heads == 0))
    return fail(Status::invalidArgument(
        "--model DIR, --out DIR and a size to grow are required: --layers N (deeper), --hidden N, --ffn N, --heads N "
        "(wider; e.g. --model datasets/models/rag-llama-roles --hidden 256 --ffn 704 --heads 8 --out grown)"));
  o.modelDir = *modelDir;
  o.out = *out;
  o.layers = *layers;
  o.hidden = *hidden;
  o.intermediate = *ffn;
  o.heads = *heads;
  o.kvHeads = *kvHeads;
  o.seed = static_cast<uint64_t>(*seed);
  Result<model::GrownModel> g = model::growLlama(o);
  if (!g) return fail(g.status());
  Result<model::LlamaConfig> c = model::loadLlamaConfig(o.out);
  if (!c) return fail(c.status());
  if (json) {
    JsonWriter w(std::cout, true);
    w.beginObject();
    w.key("out").value(o.out.string());
    w.key("old_layers").value(g->oldLayers);
    w.key("layers").value(g->layers);
    w.key("new_layers").beginArray();
    for (int64_t i : g->newLayerIndexes) w.value(i);
    w.endArray();
    w.key("hidden").value(c->hiddenSize);
    w.key("ffn").value(c->intermediateSize);
    w.key("heads").value(c->numAttentionHeads);
    w.key("kv_heads").value(c->numKeyValueHeads);
    w.key("old_parameters").value(g->oldParameters);
    w.key("parameters").value(g->parameters);
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("wrote %s: %lld layers, hidden %lld, ffn %lld, %lld heads (from %lld layers; the new weights add "
                "nothing until trained), %lld parameters (from %lld)\n",
                o.out.c_str(), static_cast<long long>(g->layers), static_cast<long long>(c->hiddenSize),
                static_cast<long long>(c->intermediateSize), static_cast<long long>(c->numAttentionHeads),
                static_cast<long long>(g->oldLayers), static_cast<long long>(g->parameters),
                static_cast<long long>(g->oldParameters));
  }
  return 0;
}

}  // namespace rag::cli
