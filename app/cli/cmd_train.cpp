// `ragraph train tokenizer`, `train lm` and `train embedder`: a byte-level BPE tokenizer for
// the corpus, a Llama-family model trained on its QA prompts and passages, and a BERT encoder
// trained for dense retrieval on question/title -> passage pairs.
//
//   ragraph train tokenizer --vocab 4096 --out runs/small
//   ragraph train lm --out runs/small --layers 2 --hidden 128 --heads 4 --steps 2000
//                    --context gold --mask block
//   ragraph train lm --out runs/small ... --resume      # after Ctrl-C or a crash
//
// `train lm` reads the tokenizer from --tokenizer, else from --init, else from --out (where
// `train tokenizer --out` put it), and writes the final model to --out in Hugging Face layout
// with the tokenizer next to it. Progress goes to stderr, the summary to stdout (JSON with
// --json). Ctrl-C writes a checkpoint and stops; --resume continues bit for bit.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "model/bpe_trainer.h"
#include "model/model_config.h"
#include "model/tokenizer.h"
#include "model/trainer.h"
#include "knowledge/graph_examples.h"
#include "knowledge/role_examples.h"
#include "model/training_data.h"
#include "core/fork_join.h"
#include "model/runner.h"
#include "retriever.h"

namespace fs = std::filesystem;

namespace rag::cli {

namespace {

using namespace rag::model;

std::atomic<bool> g_stop{false};
void onInterrupt(int) { g_stop = true; }

Result<int64_t> atLeast(Args& args, const std::string& key, int64_t fallback, int64_t min) {
  RAG_ASSIGN_OR_RETURN(int64_t v, args.getInt(key, fallback));
  if (v < min)
    return Status::invalidArgument("--" + key + " must be at least " + std::to_string(min) +
                                   " (got " + std::to_string(v) + ")");
  return v;
}

Result<fs::path> requiredOut(Args& args, std::string_view what) {
  std::optional<std::string> out = args.get("out");
  if (!out || out->empty())
    return Status::invalidArgument("--out DIR is required (where to write " + std::string(what) + ")");
  return fs::path(*out);
}

// The shortest text that reads back as the same double (run options compare as text).
std::string shortest(double v) {
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

fs::path corpusPath(Args& args) {
  std::optional<std::string> c = args.get("corpus");
  return c ? fs::path(*c) : defaultCorpusPath();
}

}  // namespace

int cmdTrainTokenizer(Args& args) {
  const fs::path corpus = corpusPath(args);
  Result<int64_t> vocab = atLeast(args, "vocab", 4096, 259);
  Result<fs::path> out = requiredOut(args, "tokenizer.json");
  const bool quiet = args.flag("quiet");
  if (Status s = args.finish(); !s) return fail(s);
  if (!vocab) return fail(vocab.status());
  if (!out) return fail(out.status());

  Stopwatch watch;
  Result<std::vector<std::string>> texts = tokenizerTrainingTexts(corpus);
  if (!texts) return fail(texts.status());
  ProgressPrinter printer(quiet);
  BpeTrainParams params;
  params.vocabSize = static_cast<int32_t>(*vocab);
  params.progress = [&printer](std::string_view phase, uint64_t done, uint64_t total) {
    printer(phase, done, total);
  };
  const fs::path file = *out / "tokenizer.json";
  Result<BpeTrainStats> stats = trainByteLevelBpeToFile(textsFrom(*texts), params, file);
  printer.finish();
  if (!stats) return fail(stats.status().withContext("training the tokenizer"));
  std::printf("tokenizer written to %s: %d tokens (%lld merges) from %lld texts (%.1f MiB) in %.1f s\n",
              file.c_str(), stats->vocabSize, static_cast<long long>(stats->merges),
              static_cast<long long>(stats->texts),
              static_cast<double>(stats->bytes) / (1024.0 * 1024.0), watch.elapsedSeconds());
  return 0;
}

namespace {

struct LmOptions {
  TrainSetup setup;
  fs::path corpus;
  CorpusExampleOptions data;
  std::optional<Tokenizer> tokenizer;
  bool json = false;
  int64_t showExamples = 0;  // print this many training examples and stop
  int32_t graphSubgraphs = 5;  // graph data: subgraphs per prompt and paths per subgraph
  int32_t graphPaths = 30;
  knowledge::RoleExampleOptions roles;  // --data roles: --roles, --completion-budget, --no-gold-share, --two-hop-share
};

// The model shape flags, read before the tokenizer is (its size is the vocabulary).
struct ShapeFlags {
  std::optional<std::string> init;
  bool given = false;  // any of --layers/--hidden/--heads/--kv-heads/--ffn
  int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, ffn = 0;
};

Result<ShapeFlags> readShapeFlags(Args& args) {
  ShapeFlags f;
  f.init = args.get("init");
  f.given = args.get("layers") || args.get("hidden") || args.get("heads") ||
            args.get("kv-heads") || args.get("ffn");
  if (f.init && f.given)
    return Status::invalidArgument("--init takes the model's shape from its config.json; drop "
                                   "--layers/--hidden/--heads/--kv-heads/--ffn, or drop --init");
  RAG_ASSIGN_OR_RETURN(f.layers, atLeast(args, "layers", 4, 1));
  RAG_ASSIGN_OR_RETURN(f.hidden, atLeast(args, "hidden", 256, 8));
  RAG_ASSIGN_OR_RETURN(f.heads, atLeast(args, "heads", 4, 1));
  RAG_ASSIGN_OR_RETURN(f.kvHeads, atLeast(args, "kv-heads", f.heads, 1));
  // SwiGLU's usual 8/3 x hidden, rounded up to a multiple of 64.
  RAG_ASSIGN_OR_RETURN(f.ffn, atLeast(args, "ffn", (8 * f.hidden / 3 + 63) / 64 * 64, 1));
  if (f.hidden % f.heads != 0 || (f.hidden / f.heads) % 2 != 0)
    return Status::invalidArgument("--hidden must be --heads times an even head size (got " +
                                   std::to_string(f.hidden) + " and " + std::to_string(f.heads) + ")");
  if (f.heads % f.kvHeads != 0)
    return Status::invalidArgument("--kv-heads must divide --heads (got " + std::to_string(f.kvHeads) +
                                   " and " + std::to_string(f.heads) + ")");
  return f;
}

// The model a fresh run starts from: --init, or a new model of the flags' shape.
Status setModelSpec(const ShapeFlags& f, LmOptions& o) {
  const Tokenizer& tokenizer = *o.tokenizer;
  if (f.init) {
    o.setup.model.initFrom = *f.init;
    RAG_ASSIGN_OR_RETURN(LlamaConfig cfg, loadLlamaConfig(o.setup.model.initFrom));
    if (cfg.vocabSize < tokenizer.vocabSize())
      return Status::invalidArgument("the model in " + *f.init + " has a vocabulary of " +
                                     std::to_string(cfg.vocabSize) + " but the tokenizer has " +
                                     std::to_string(tokenizer.vocabSize()) +
                                     " tokens; use the tokenizer the model was trained with (--tokenizer)");
    o.setup.runOptions.emplace_back("init", fs::absolute(o.setup.model.initFrom).string());
    return Status::ok();
  }
  LlamaConfig& c = o.setup.model.config;
  c.architecture = ModelArchitecture::Llama;
  c.architectureName = "LlamaForCausalLM";
  c.numHiddenLayers = f.layers;
  c.hiddenSize = f.hidden;
  c.numAttentionHeads = f.heads;
  c.numKeyValueHeads = f.kvHeads;
  c.headDim = f.hidden / f.heads;
  c.intermediateSize = f.ffn;
  c.vocabSize = tokenizer.vocabSize();
  c.maxPositionEmbeddings = std::max<int64_t>(2048, o.setup.params.seqLen);
  c.tieWordEmbeddings = true;
  if (auto bos = tokenizer.bosId()) c.bosTokenId = *bos;
  if (auto eos = tokenizer.eosId()) c.eosTokenIds = {*eos};
  for (auto [k, v] : {std::pair<const char*, int64_t>{"layers", f.layers}, {"hidden", f.hidden},
                      {"heads", f.heads}, {"kv-heads", f.kvHeads}, {"ffn", f.ffn}})
    o.setup.runOptions.emplace_back(k, std::to_string(v));
  return Status::ok();
}

// The flags every training command shares (schedule, optimizer, cadence, dtype, resume).
struct TrainDefaults {
  int64_t seqLen, batch;
  double lr;
};
Status readTrainParams(Args& args, TrainSetup& setup, const TrainDefaults& d) {
  TrainParams& p = setup.params;
  RAG_ASSIGN_OR_RETURN(p.steps, atLeast(args, "steps", 1000, 1));
  RAG_ASSIGN_OR_RETURN(p.batch, atLeast(args, "batch", d.batch, 1));
  RAG_ASSIGN_OR_RETURN(p.seqLen, atLeast(args, "seq-len", d.seqLen, 8));
  RAG_ASSIGN_OR_RETURN(p.lr, args.getDouble("lr", d.lr));
  RAG_ASSIGN_OR_RETURN(p.minLr, args.getDouble("min-lr", p.lr / 10));
  RAG_ASSIGN_OR_RETURN(p.warmupSteps, atLeast(args, "warmup", std::min<int64_t>(100, p.steps / 10), 0));
  RAG_ASSIGN_OR_RETURN(p.weightDecay, args.getDouble("weight-decay", 0.1));
  RAG_ASSIGN_OR_RETURN(p.clipNorm, args.getDouble("clip-norm", 1.0));
  RAG_ASSIGN_OR_RETURN(int64_t seed, atLeast(args, "seed", 1, 0));
  p.seed = static_cast<uint64_t>(seed);
  RAG_ASSIGN_OR_RETURN(p.checkpointEvery, atLeast(args, "checkpoint-every", 200, 0));
  RAG_ASSIGN_OR_RETURN(p.logEvery, atLeast(args, "log-every", 10, 1));
  RAG_ASSIGN_OR_RETURN(p.evalEvery, atLeast(args, "eval-every", 0, 0));
  RAG_ASSIGN_OR_RETURN(p.evalExamples, atLeast(args, "eval-examples", 64, 1));
  RAG_ASSIGN_OR_RETURN(int64_t threads, atLeast(args, "threads", 0, 0));
  p.threads = static_cast<int>(threads);
  const std::string dtype = args.getOr("dtype", "f32");
  if (dtype != "f32" && dtype != "bf16")
    return Status::invalidArgument("--dtype must be f32 or bf16 (got '" + dtype + "')");
  p.dtype = dtype == "bf16" ? TrainDType::BF16 : TrainDType::F32;
  setup.resume = args.flag("resume");
  return Status::ok();
}

// The tokenizer: --tokenizer, else the --init model's, else the one `train tokenizer --out`
// left in --out. Sets setup.tokenizerDir (copied next to the model).
Result<Tokenizer> findTokenizer(const std::optional<std::string>& tokenizerArg,
                                const std::optional<std::string>& init, TrainSetup& setup) {
  const fs::path tokDir = tokenizerArg ? fs::path(*tokenizerArg)
                          : init       ? fs::path(*init)
                                       : setup.outDir;
  std::error_code ec;
  const fs::path tokFile = fs::is_directory(tokDir, ec) ? tokDir / "tokenizer.json" : tokDir;
  if (!fs::exists(tokFile, ec))
    return Status::notFound("no tokenizer at " + tokFile.string() + "; make one with `ragraph train "
                            "tokenizer --out " + tokDir.string() + "` or pass --tokenizer DIR");
  RAG_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(tokFile));
  setup.tokenizerDir = tokFile.parent_path();
  return tokenizer;
}

Result<LmOptions> readLmOptions(Args& args) {
  LmOptions o;
  TrainParams& p = o.setup.params;
  RAG_ASSIGN_OR_RETURN(o.setup.outDir, requiredOut(args, "the model"));
  o.corpus = corpusPath(args);
  std::optional<std::string> tokenizerArg = args.get("tokenizer");
  RAG_ASSIGN_OR_RETURN(ShapeFlags shape, readShapeFlags(args));
  RAG_RETURN_IF_ERROR(readTrainParams(args, o.setup, {.seqLen = 256, .batch = 16, .lr = 1e-3}));
  o.json = args.flag("json");
  RAG_ASSIGN_OR_RETURN(o.showExamples, atLeast(args, "show-examples", 0, 0));

  const std::string data = args.getOr("data", "qa");
  const std::string context = args.getOr("context", "gold");
  const std::string mask = args.getOr("mask", "causal");
  RAG_ASSIGN_OR_RETURN(o.data.data, parseTrainData(data));
  RAG_ASSIGN_OR_RETURN(o.data.prompt.context, corpus::parseQaContext(context));
  RAG_ASSIGN_OR_RETURN(o.data.mask, parseTrainMask(mask));
  RAG_ASSIGN_OR_RETURN(int64_t passages, atLeast(args, "passages", 5, 1));
  o.data.prompt.passages = static_cast<size_t>(passages);
  RAG_ASSIGN_OR_RETURN(int64_t minPassages, atLeast(args, "min-passages", passages, 1));
  if (minPassages > passages)
    return Status::invalidArgument("--min-passages " + std::to_string(minPassages) +
                                   " is more than --passages " + std::to_string(passages));
  o.data.minPassages = static_cast<size_t>(minPassages);
  RAG_ASSIGN_OR_RETURN(int64_t questions, atLeast(args, "questions", 1, 1));
  o.data.questions = static_cast<size_t>(questions);
  RAG_ASSIGN_OR_RETURN(int64_t nameTokens, atLeast(args, "recall-name-tokens", 0, 0));
  RAG_ASSIGN_OR_RETURN(int64_t recallPairs, atLeast(args, "recall-pairs", 0, 0));
  o.data.recallNameTokens = static_cast<size_t>(nameTokens);
  o.data.recallPairs = static_cast<size_t>(recallPairs);
  RAG_ASSIGN_OR_RETURN(int64_t graphSubgraphs, atLeast(args, "subgraphs", 5, 1));
  RAG_ASSIGN_OR_RETURN(int64_t graphPaths, atLeast(args, "paths", 30, 1));
  o.graphSubgraphs = static_cast<int32_t>(graphSubgraphs);
  o.graphPaths = static_cast<int32_t>(graphPaths);
  for (const char* flag :
       {"roles", "completion-budget", "no-gold-share", "two-hop-share", "shuffle-passages", "irg-guess-share",
        "gold-questions", "question-types"})
    if (o.data.data != TrainData::Roles && args.get(flag))
      return Status::invalidArgument("--" + std::string(flag) + " is for --data roles");
  if (auto roles = args.get("roles")) {
    RAG_ASSIGN_OR_RETURN(o.roles.mix, knowledge::parseRoleMix(*roles));
  }
  const std::string questionTypes = args.get("question-types").value_or("");
  RAG_ASSIGN_OR_RETURN(o.roles.questionTypes, knowledge::parseQuestionTypes(questionTypes));
  RAG_ASSIGN_OR_RETURN(int64_t completionBudget, atLeast(args, "completion-budget", 0, 0));
  o.roles.completionBudget = static_cast<int32_t>(std::min<int64_t>(completionBudget, 1 << 20));
  RAG_ASSIGN_OR_RETURN(int64_t goldQuestions, atLeast(args, "gold-questions", 1, 1));
  if (goldQuestions > 8)
    return Status::invalidArgument("--gold-questions " + std::to_string(goldQuestions) +
                                   " is more than 8; a 384-token prompt holds about 5 passages and 3 questions");
  o.roles.goldQuestions = static_cast<int32_t>(goldQuestions);
  // A share in [0, 1], or InvalidArgument saying what it is the share of.
  auto share = [&](const char* flag, double fallback, const char* of) -> Result<double> {
    RAG_ASSIGN_OR_RETURN(double v, args.getDouble(flag, fallback));
    if (!(v >= 0 && v <= 1)) return Status::invalidArgument("--" + std::string(flag) + " must be between 0 and 1 (" + of + ")");
    return v;
  };
  RAG_ASSIGN_OR_RETURN(o.roles.noGoldShare, share("no-gold-share", o.roles.noGoldShare,
                                                  "the share of answer prompts without their gold passage"));
  RAG_ASSIGN_OR_RETURN(o.roles.twoHopShare, share("two-hop-share", o.roles.twoHopShare,
                                                  "the share of Multistep role examples drawn from two-hop questions"));
  RAG_ASSIGN_OR_RETURN(o.roles.shufflePassages,
                       share("shuffle-passages", o.roles.shufflePassages,
                             "the share of retrieved-passage prompts whose passages are shuffled"));
  RAG_ASSIGN_OR_RETURN(o.roles.irgGuessShare,
                       share("irg-guess-share", o.roles.irgGuessShare,
                             "the share of two-hop IRG examples whose previous round wrote the answer or the topic"));
  RAG_ASSIGN_OR_RETURN(double promptLoss, args.getDouble("prompt-loss", 0.1));
  if (!(promptLoss >= 0 && promptLoss <= 1))
    return Status::invalidArgument("--prompt-loss must be between 0 and 1");
  o.data.promptLossWeight = static_cast<float>(promptLoss);
  RAG_RETURN_IF_ERROR(args.finish());
  RAG_RETURN_IF_ERROR(validateTrainParams(p));

  RAG_ASSIGN_OR_RETURN(Tokenizer tokenizer, findTokenizer(tokenizerArg, shape.init, o.setup));
  o.tokenizer.emplace(std::move(tokenizer));
  RAG_RETURN_IF_ERROR(setModelSpec(shape, o));
  for (auto [k, v] : {std::pair<const char*, std::string>{"data", data}, {"context", context},
                      {"passages", std::to_string(passages)}, {"mask", mask},
                      {"min-passages", std::to_string(minPassages)},
                      {"questions", std::to_string(questions)},
                      {"recall-name-tokens", std::to_string(nameTokens)},
                      {"recall-pairs", std::to_string(recallPairs)},
                      {"prompt-loss", shortest(promptLoss)},
                      {"completion-budget", std::to_string(completionBudget)},
                      {"no-gold-share", shortest(o.roles.noGoldShare)},
                      {"two-hop-share", shortest(o.roles.twoHopShare)},
                      {"shuffle-passages", shortest(o.roles.shufflePassages)},
                      {"irg-guess-share", shortest(o.roles.irgGuessShare)},
                      {"gold-questions", std::to_string(goldQuestions)},
                      {"question-types", questionTypes},
                      {"tokenizer-vocab", std::to_string(o.tokenizer->vocabSize())}})
    o.setup.runOptions.emplace_back(k, v);
  return o;
}

void printSummaryJson(const TrainResult& r) {
  JsonWriter w(std::cout);
  w.beginObject();
  w.key("out").value(r.outDir.string());
  w.key("completed").value(r.completed);
  w.key("start_step").value(r.startStep);
  w.key("step").value(r.step);
  w.key("parameters").value(r.parameters);
  w.key("final_loss").value(r.finalLoss);
  w.key("tokens").value(r.tokens);
  w.key("seconds").value(r.seconds);
  w.key("tokens_per_second").value(r.tokensPerSecond);
  w.key("loss_history").beginArray();
  for (double l : r.lossHistory) w.value(l);
  w.endArray();
  w.key("eval_history").beginArray();
  for (const EvalPoint& e : r.evalHistory)
    w.beginObject().key("step").value(e.step).key("loss").value(e.loss).endObject();
  w.endArray();
  w.endObject();
  std::cout << std::endl;
}

// What the model would train on: the first examples of step 1, with the tokens that carry the
// full loss weight in [[...]].
int showExamples(ExampleSource& source, const Tokenizer& tokenizer, const LmOptions& o) {
  for (int64_t i = 0; i < o.showExamples; ++i) {
    Result<TrainingExample> e = source.example(o.setup.params.seed, 0, i, o.setup.params.seqLen);
    if (!e) return fail(e.status());
    std::string text;
    bool inAnswer = false;
    for (size_t t = 0; t < e->tokens.size(); ++t) {
      const bool answer = t > 0 && e->lossWeights[t] >= 1.0f && o.data.data != TrainData::Passages;
      if (answer != inAnswer) text += answer ? "[[" : "]]";
      inAnswer = answer;
      text += tokenizer.decode(std::span(&e->tokens[t], 1)).valueOr("\uFFFD");
    }
    if (inAnswer) text += "]]";
    std::printf("--- example %lld: %zu tokens, %zu blocks\n%s\n", static_cast<long long>(i + 1),
                e->tokens.size(), e->mask.kind == MaskKind::Block ? e->mask.blockStarts.size() : size_t{1},
                text.c_str());
  }
  return 0;
}

// Runs a training with progress on stderr, Ctrl-C as "checkpoint and stop", and the summary
// on stdout (JSON with --json). Exit 130 when stopped early, as a shell expects after Ctrl-C.
int runTraining(const TrainSetup& setup, bool json, const std::string& what,
                const std::function<Result<TrainResult>(const TrainCallbacks&)>& train) {
  const TrainParams& p = setup.params;
  TrainCallbacks cb;
  cb.started = [&](int64_t startStep, int64_t parameters) {
    if (startStep >= p.steps) {
      std::fprintf(stderr, "%s already has all %lld steps; writing the final model\n",
                   setup.outDir.c_str(), static_cast<long long>(p.steps));
      return;
    }
    std::fprintf(stderr, "%s %s (%lld parameters) on %s: steps %lld..%lld x %lld sequences x %lld tokens\n",
                 startStep > 0 ? "resuming" : "training", setup.outDir.c_str(),
                 static_cast<long long>(parameters), what.c_str(), static_cast<long long>(startStep + 1),
                 static_cast<long long>(p.steps), static_cast<long long>(p.batch),
                 static_cast<long long>(p.seqLen));
  };
  cb.progress = [](const TrainProgress& pr) {
    std::fprintf(stderr, "step %lld/%lld  loss %.4f  lr %.3g  grad %.3g  tok/s %.0f  %.1fs\n",
                 static_cast<long long>(pr.step), static_cast<long long>(pr.steps), pr.loss, pr.lr,
                 pr.gradNorm, pr.tokensPerSecond, pr.elapsedSeconds);
  };
  cb.evaluated = [](const EvalPoint& e) {
    std::fprintf(stderr, "eval step %lld  held-out loss %.4f\n", static_cast<long long>(e.step), e.loss);
  };
  cb.checkpointed = [](int64_t step, const fs::path& dir) {
    std::fprintf(stderr, "checkpoint at step %lld in %s\n", static_cast<long long>(step), dir.c_str());
  };
  g_stop = false;
  auto previous = std::signal(SIGINT, onInterrupt);
  cb.stopRequested = [] { return g_stop.load(); };
  Result<TrainResult> r = train(cb);
  std::signal(SIGINT, previous);
  if (!r) return fail(r.status());

  if (json) printSummaryJson(*r);
  if (!r->completed) {
    std::fprintf(stderr, "stopped at step %lld of %lld; continue with the same command and --resume\n",
                 static_cast<long long>(r->step), static_cast<long long>(p.steps));
    return 130;
  }
  if (!json)
    std::printf("model written to %s (config.json, model.safetensors, tokenizer.json): %lld "
                "parameters, %lld steps, final loss %.4f, %.0f tokens/s over %.1f s\n",
                setup.outDir.c_str(), static_cast<long long>(r->parameters),
                static_cast<long long>(r->step), r->finalLoss, r->tokensPerSecond, r->seconds);
  return 0;
}

// Trains on examples from `Source` (opened with `options`; with --eval-every the same over the
// dev split for held-out loss), or prints the first ones with --show-examples.
template <class Source, class Options>
int trainOn(const LmOptions& o, const Tokenizer& tokenizer, Options options, const std::string& what) {
  auto source = Source::open(o.corpus, tokenizer, options);
  if (!source) return fail(source.status());
  std::unique_ptr<Source> dev;
  if (o.setup.params.evalEvery > 0) {
    options.split = "dev";
    auto d = Source::open(o.corpus, tokenizer, options);
    if (!d) return fail(d.status().withContext("held-out evaluation (--eval-every)"));
    dev = std::move(*d);
  }
  if (o.showExamples > 0) return showExamples(**source, tokenizer, o);
  restartWithPassiveOpenMp();  // everything is checked: from here on libtorch computes
  return runTraining(o.setup, o.json, what, [&](const TrainCallbacks& cb) {
    return trainLanguageModel(o.setup, **source, dev.get(), cb);
  });
}

}  // namespace

int cmdTrainLm(Args& args) {
  Result<LmOptions> opts = readLmOptions(args);
  if (!opts) return fail(opts.status());
  const LmOptions& o = *opts;
  const Tokenizer& tokenizer = *o.tokenizer;
  const std::string from = ") from " + o.corpus.string();

  if (o.data.data == TrainData::Graph) {
    knowledge::GraphExampleOptions g{.mask = o.data.mask, .subgraphs = o.graphSubgraphs, .paths = o.graphPaths,
                                     .promptLossWeight = o.data.promptLossWeight};
    const std::string what = "graph data (" + std::to_string(g.subgraphs) + " subgraphs of up to " +
                             std::to_string(g.paths) + " paths, " +
                             (g.mask == MaskKind::Ancestor ? "ancestor mask over dependency trees" : "causal mask over flat paths") +
                             from;
    return trainOn<knowledge::GraphExampleSource>(o, tokenizer, g, what);
  }
  if (o.data.data == TrainData::Roles) {
    if (o.data.mask != MaskKind::Causal)
      return fail(Status::invalidArgument("--data roles trains under the causal mask the built-in workflows serve with; drop --mask"));
    std::string mix;
    for (const knowledge::RoleWeight& w : o.roles.mix) {
      if (w.weight <= 0) continue;
      char weight[32];
      std::snprintf(weight, sizeof weight, "%g", w.weight);
      mix += (mix.empty() ? "" : ",") + std::string(knowledge::roleName(w.role)) + ":" + weight;
    }
    std::string types;
    for (const knowledge::TypeWeight& t : o.roles.questionTypes) {
      char weight[32];
      std::snprintf(weight, sizeof weight, "%g", t.weight);
      types += (types.empty() ? ", questions weighted " : ",") + t.type + ":" + weight;
    }
    knowledge::RoleExampleOptions r = o.roles;
    r.promptLossWeight = o.data.promptLossWeight;
    return trainOn<knowledge::RoleExampleSource>(
        o, tokenizer, r, "workflow roles (" + mix + types + ", over BM25-retrieved passages" + from);
  }
  if (o.data.mask == MaskKind::Ancestor) return fail(Status::invalidArgument("--mask ancestor needs --data graph"));
  const std::string what = std::string(trainDataName(o.data.data)) + " data (" +
                           std::string(corpus::qaContextName(o.data.prompt.context)) + " context, " +
                           (o.data.mask == MaskKind::Block ? "block" : "causal") + " mask" + from;
  return trainOn<CorpusExampleSource>(o, tokenizer, o.data, what);
}

int cmdTrainEmbedder(Args& args) {
  TrainSetup setup;
  Result<fs::path> out = requiredOut(args, "the embedder");
  if (!out) return fail(out.status());
  setup.outDir = *out;
  const fs::path corpus = corpusPath(args);
  const std::optional<std::string> tokenizerArg = args.get("tokenizer");
  const std::optional<std::string> init = args.get("init");
  const bool shapeGiven = args.get("layers") || args.get("hidden") || args.get("heads") || args.get("ffn");
  if (init && shapeGiven)
    return fail(Status::invalidArgument("--init takes the model's shape from its config.json; drop "
                                        "--layers/--hidden/--heads/--ffn, or drop --init"));
  Result<int64_t> layers = atLeast(args, "layers", 4, 1);
  Result<int64_t> hidden = atLeast(args, "hidden", 256, 8);
  Result<int64_t> heads = atLeast(args, "heads", 4, 1);
  Result<int64_t> ffn = atLeast(args, "ffn", 4 * hidden.valueOr(256), 1);
  Result<double> temperature = args.getDouble("temperature", 0.05);
  Result<double> titles = args.getDouble("title-pairs", 0.3);
  Result<double> spans = args.getDouble("span-pairs", 0);
  Result<double> hardNegatives = args.getDouble("hard-negatives", 0);
  Result<double> selfNegatives = args.getDouble("self-negatives", 0);
  Result<int64_t> lexicalBuckets = atLeast(args, "lexical-buckets", 0, 0);
  Result<int64_t> lexicalDim = atLeast(args, "lexical-dim", 512, 1);
  Result<double> lexicalWeight = args.getDouble("lexical-weight", model::kLexicalWeight);
  const std::optional<std::string> indexBase = args.get("index");
  const bool json = args.flag("json");
  Status s = readTrainParams(args, setup, {.seqLen = 128, .batch = 64, .lr = 5e-4});
  for (const Status& st : {layers.status(), hidden.status(), heads.status(), ffn.status(), temperature.status(),
                           titles.status(), spans.status(), hardNegatives.status(), selfNegatives.status(),
                           lexicalBuckets.status(), lexicalDim.status(), lexicalWeight.status(), s})
    if (!st) return fail(st);
  if (Status f = args.finish(); !f) return fail(f);
  if (Status v = validateTrainParams(setup.params); !v) return fail(v);
  if (*hidden % *heads != 0)
    return fail(Status::invalidArgument("--hidden must be a multiple of --heads (got " +
                                        std::to_string(*hidden) + " and " + std::to_string(*heads) + ")"));
  if (!(*titles >= 0 && *spans >= 0 && *titles + *spans <= 1))
    return fail(Status::invalidArgument("--title-pairs and --span-pairs must be between 0 and 1 and sum to at most 1 "
                                        "(the rest are question pairs)"));
  if (!(*hardNegatives >= 0 && *hardNegatives <= 1))
    return fail(Status::invalidArgument("--hard-negatives must be between 0 and 1 (the share of pairs given a "
                                        "mined hard negative)"));
  if (!(*selfNegatives >= 0 && *selfNegatives <= 1))
    return fail(Status::invalidArgument("--self-negatives must be between 0 and 1 (the share of question pairs' hard "
                                        "negatives mined from the embedder's own index)"));
  const bool selfMining = *hardNegatives > 0 && *selfNegatives > 0;
  if (selfMining && !init)
    return fail(Status::invalidArgument("--self-negatives mines with the embedder training starts from: give --init DIR "
                                        "(its passage index must be built: `ragraph index build --embedder DIR`)"));
  if (Status l = checkLexicalOptions("--lexical-", 0, *lexicalBuckets, *lexicalDim, *lexicalWeight); !l) return fail(l);
  if (init && *lexicalBuckets > 0) {
    Result<BertConfig> initConfig = model::loadBertConfig(fs::path(*init) / "config.json");
    if (!initConfig) return fail(initConfig.status());
    if (initConfig->lexicalBuckets > 0)
      return fail(Status::invalidArgument(*init + " has a lexical branch already (" +
                                          std::to_string(initConfig->lexicalBuckets) +
                                          " buckets); drop --lexical-buckets to continue training it"));
  }
  Result<Tokenizer> tokenizer = findTokenizer(tokenizerArg, init, setup);
  if (!tokenizer) return fail(tokenizer.status());

  if (init) {
    setup.model.initFrom = *init;
    setup.runOptions.emplace_back("init", fs::absolute(*init).string());
  } else {
    BertConfig& c = setup.model.encoder;
    c.architectureName = "BertModel";
    c.numHiddenLayers = *layers;
    c.hiddenSize = *hidden;
    c.numAttentionHeads = *heads;
    c.intermediateSize = *ffn;
    c.vocabSize = tokenizer->vocabSize();
    c.maxPositionEmbeddings = std::max<int64_t>(512, setup.params.seqLen);
    c.padTokenId = tokenizer->padId().value_or(0);
    for (auto [k, v] : {std::pair<const char*, int64_t>{"layers", *layers}, {"hidden", *hidden},
                        {"heads", *heads}, {"ffn", *ffn}})
      setup.runOptions.emplace_back(k, std::to_string(v));
  }
  setup.runOptions.emplace_back("temperature", shortest(*temperature));
  setup.runOptions.emplace_back("title-pairs", shortest(*titles));
  setup.runOptions.emplace_back("span-pairs", shortest(*spans));
  setup.runOptions.emplace_back("hard-negatives", shortest(*hardNegatives));
  setup.runOptions.emplace_back("self-negatives", shortest(*selfNegatives));
  setup.runOptions.emplace_back("tokenizer-vocab", std::to_string(tokenizer->vocabSize()));
  if (*lexicalBuckets > 0) {
    setup.runOptions.emplace_back("lexical-buckets", std::to_string(*lexicalBuckets));
    setup.runOptions.emplace_back("lexical-dim", std::to_string(*lexicalDim));
    setup.runOptions.emplace_back("lexical-weight", shortest(*lexicalWeight));
  }
  if (*lexicalBuckets > 0 && !setup.resume) {  // a resumed run reads the branch from its checkpoint
    Result<model::LexicalStatistics> stats = model::passageWordStatistics(corpus, *lexicalBuckets);
    if (!stats) return fail(stats.status().withContext("--lexical-buckets weighs words by the corpus's passages"));
    setup.model.lexical = std::move(*stats);
    setup.model.lexicalDim = *lexicalDim;
    setup.model.lexicalWeight = *lexicalWeight;
  }

  CorpusPairOptions opts;
  opts.titleFraction = *titles;
  opts.spanFraction = *spans;
  opts.hardNegatives = *hardNegatives;
  opts.selfNegatives = *selfNegatives;
  // Mining reads the embedder and its index before training starts: restart first (a restart
  // after it would mine twice).
  if (selfMining) restartWithPassiveOpenMp();
  ProgressPrinter printer(json);
  if (selfMining) {
    // The embedder training starts from, over its own passage index, searched exactly: its
    // confusions, not the IVF's.
    auto mining = Retriever::load(*init, indexBase ? fs::path(*indexBase) : retrieval::defaultIndexBase(corpus), "f32");
    if (!mining)
      return fail(mining.status().withContext("--self-negatives mines from the passage index of the --init embedder; "
                                              "build it with `ragraph index build --embedder " + *init + "`"));
    auto r = std::make_shared<Retriever>(std::move(*mining));
    model::setComputeThreads(static_cast<int>(setup.params.threads > 0 ? setup.params.threads
                                                                      : std::max(1u, std::thread::hardware_concurrency())));
    opts.denseSearch = [r](std::span<const std::string> queries, int32_t depth)
        -> Result<std::vector<std::vector<int64_t>>> {
      RAG_ASSIGN_OR_RETURN(std::vector<float> q, r->embedder->embed(queries, 64, model::sharedComputeTeam().get()));
      return r->index->searchExact(q, depth);
    };
    opts.progress = [&printer](std::string_view phase, uint64_t done, uint64_t total) { printer(phase, done, total); };
  }
  Result<std::unique_ptr<CorpusPairSource>> train = CorpusPairSource::open(corpus, *tokenizer, opts);
  printer.finish();
  if (!train) return fail(train.status());
  std::unique_ptr<CorpusPairSource> heldOut;
  if (setup.params.evalEvery > 0) {
    CorpusPairOptions dev = opts;
    dev.split = "dev";
    dev.selfNegatives = 0;  // held-out loss: BM25 negatives, not a second mining pass
    dev.denseSearch = nullptr;
    dev.progress = nullptr;
    Result<std::unique_ptr<CorpusPairSource>> d = CorpusPairSource::open(corpus, *tokenizer, dev);
    if (!d) return fail(d.status().withContext("held-out evaluation (--eval-every)"));
    heldOut = std::move(*d);
  }
  restartWithPassiveOpenMp();  // everything is checked: from here on libtorch computes
  std::string negatives;
  if (*hardNegatives > 0)
    negatives = " (" + shortest(*hardNegatives * 100) + "% with a mined hard negative" +
                (selfMining ? ", of the questions' " + shortest(*selfNegatives * 100) + "% self-mined" : std::string()) + ")";
  if (*spans > 0) negatives += ", " + shortest(*spans * 100) + "% span pairs";
  if (*lexicalBuckets > 0)
    negatives += ", a lexical branch of " + std::to_string(*lexicalBuckets) + " word buckets in " +
                 std::to_string(*lexicalDim) + " components (weight " + shortest(*lexicalWeight) + ")";
  return runTraining(setup, json, "question/title -> passage pairs from " + corpus.string() + negatives,
                     [&](const TrainCallbacks& cb) {
                       return trainEmbedder(setup, **train, heldOut.get(), cb, *temperature);
                     });
}

}  // namespace rag::cli
