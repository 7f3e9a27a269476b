// The generation commands: `ragraph run` (answer one question), `ragraph eval qa` (accuracy
// on a QA split) and `ragraph bench llm` (the runtime's speed, as JSON).
//
// run and eval build prompts with corpus/qa_prompt.h, the same code training uses, and decode
// greedily through the ModelRunner, all questions of an evaluation batched together.
//
// bench llm:
// Prefill tokens/s (one long prompt), decode tokens/s at batch 1/8/32/64 (every sequence
// generating, prompts already computed; with the runner's fused F32 kernels and, for the
// ratio, on libtorch ops only), the share of a batch-32 decode step spent outside the
// model forward (scheduling, block tables, sampling), and the physical floor: the bytes of
// weights and KV one batch-1 decode step must read, over this machine's measured read bandwidth.
// With --llama-bench BIN, llama.cpp runs the same weights (exported to GGUF) in the same run,
// interleaved with this engine's own batch-1 decode and prefill, and the ratios are reported.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <thread>

#include "commands.h"
#include "corpus/qa_prompt.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "core/mem_bandwidth.h"
#include "core/blas_info.h"
#include "llama_cpp_bench.h"
#include "model/gguf.h"
#include "model/prompt.h"
#include "model/runner.h"
#include "model_choice.h"
#include "sched/step_device.h"
#include "retriever.h"

#if RAGWB_HAVE_CUDA
#include "device_buffer.h"
#endif

namespace rag::cli {

namespace {

std::vector<int32_t> syntheticPrompt(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> out;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    out.push_back(static_cast<int32_t>((x * 0x2545F4914F6CDD1Dull >> 33) % static_cast<uint64_t>(vocab)));
  }
  return out;
}

struct DecodeFigures {
  std::string device;  // the runner's: "cpu" or the backend's description
  double tokensPerSecond = 0;
  double overheadShare = 0;   // 1 - forward / step, over the timed steps
  double secondsPerStep = 0;
};

// Decode `batch` sequences whose prompts are computed first (untimed), then `steps` timed steps.
Result<DecodeFigures> measureDecode(std::shared_ptr<const model::LlamaModel> m, int64_t vocab, int32_t batch,
                                    int64_t promptLen, int32_t steps, bool kernels,
                                    const model::StepBackendFactory& backend = {}) {
  model::RunnerParams rp;
  rp.kernels = kernels;
  rp.backend = backend;
  rp.maxRunning = batch;
  rp.maxBatchTokens = static_cast<int32_t>(std::max<int64_t>(512, batch * promptLen));  // one prefill step
  RAG_ASSIGN_OR_RETURN(auto runner, model::ModelRunner::create(m, rp));
  for (int32_t b = 0; b < batch; ++b) {
    model::SequenceRequest q;
    q.prompt = syntheticPrompt(promptLen, vocab, static_cast<uint64_t>(b) + 1);
    q.sampling.maxTokens = steps + 4;
    q.sampling.stopTokenIds.clear();
    q.sampling.ignoreEos = true;  // a trained model may end early; every step must decode `batch` rows
    RAG_ASSIGN_OR_RETURN(model::SeqId id, runner->add(std::move(q)));
    (void)id;
  }
  // Warm-up: prefill everything and take two decode steps.
  for (int guard = 0; guard < 10000; ++guard) {
    model::StepResult r = runner->step();
    if (r.stats.prefillRows == 0 && r.stats.decodeRows == batch) break;
  }
  runner->step();
  double fwd = 0, total = 0;
  int64_t tokens = 0;
  Stopwatch wall;
  for (int32_t s = 0; s < steps; ++s) {
    model::StepResult r = runner->step();
    fwd += r.stats.forwardSeconds;
    total += r.stats.totalSeconds;
    tokens += r.stats.decodeRows;
  }
  const double secs = wall.elapsedSeconds();
  if (Status s = runner->deviceStatus(); !s) return s;
  return DecodeFigures{runner->device(), static_cast<double>(tokens) / secs, total > 0 ? 1.0 - fwd / total : 0.0,
                       secs / steps};
}

// Prefill: one prompt of `len` tokens computed in one step, best of three runs.
Result<double> measurePrefill(std::shared_ptr<const model::LlamaModel> m, int64_t vocab, int64_t len,
                              const model::StepBackendFactory& backend = {}) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    model::RunnerParams rp;
    rp.maxBatchTokens = static_cast<int32_t>(len);
    rp.backend = backend;
    RAG_ASSIGN_OR_RETURN(auto runner, model::ModelRunner::create(m, rp));
    model::SequenceRequest q;
    q.prompt = syntheticPrompt(len, vocab, 99);
    q.sampling.maxTokens = 0;
    RAG_RETURN_IF_ERROR(runner->add(std::move(q)).status());
    Stopwatch w;
    while (runner->hasWork()) runner->step();
    RAG_RETURN_IF_ERROR(runner->deviceStatus());
    best = std::max(best, static_cast<double>(len) / w.elapsedSeconds());
  }
  return best;
}

// ---- run / eval qa ------------------------------------------------------------------------------

struct GenerationSetup {
  LoadedModel loaded;
  model::StepBackendFactory backend;  // --device: empty on the CPU
  corpus::QaPromptOptions prompt;
  std::string contextName;             // gold | none | retrieved
  std::optional<Retriever> retriever;  // --context retrieved
  bool blockMask = false;
  bool extractive = false;  // --extractive: the answer is a span of the passages (copy-constrained)
  float copyFloor = model::SamplingParams::kDefaultCopyFloor;  // --copy-floor
  int32_t maxTokens = 16;
  // --rerank bm25: the prompt's passages ordered by their BM25 score for the question before
  // reading (what a retrieval node's `rerank` does), so that the likeliest one leads.
  std::optional<retrieval::Bm25Index> rerank;
};

// Options shared by run and eval: model, context, mask, max tokens, threads.
Result<GenerationSetup> readGenerationSetup(Args& args, corpus::QaContext defaultContext,
                                            const std::filesystem::path& corpus) {
  GenerationSetup g;
  RAG_ASSIGN_OR_RETURN(const std::optional<RetrievalRerank> rerank, retrievalRerankArg(args));
  RAG_ASSIGN_OR_RETURN(ModelChoice choice, readModelChoice(args, /*allowSynthetic=*/false));
  g.contextName = args.getOr("context", std::string(corpus::qaContextName(defaultContext)));
  if (g.contextName == "retrieved") {
    // The top passages the retriever finds for the question, in rank order.
    RAG_ASSIGN_OR_RETURN(Retriever r, Retriever::open(args, corpus));
    g.retriever.emplace(std::move(r));
    g.prompt.context = corpus::QaContext::None;
  } else {
    Result<corpus::QaContext> c = corpus::parseQaContext(g.contextName);
    if (!c) return Status::invalidArgument(c.status().message() + ", or retrieved (the passages the index finds)");
    g.prompt.context = *c;
  }
  const std::string mask = args.getOr("mask", "causal");
  if (mask != "causal" && mask != "block")
    return Status::invalidArgument("--mask must be causal or block, not '" + mask + "'");
  g.blockMask = mask == "block";
  if (rerank == RetrievalRerank::Bm25) {
    RAG_ASSIGN_OR_RETURN(retrieval::Bm25Index idx, retrieval::Bm25Index::openOrBuild(corpus, {}, [](const std::string& m) {
                           std::fprintf(stderr, "%s\n", m.c_str());
                         }));
    g.rerank.emplace(std::move(idx));
  }
  g.extractive = args.flag("extractive");
  RAG_ASSIGN_OR_RETURN(double copyFloor, args.getDouble("copy-floor", model::SamplingParams::kDefaultCopyFloor));
  if (!(copyFloor >= 0 && copyFloor <= 1)) return Status::invalidArgument("--copy-floor must be in [0, 1]");
  g.copyFloor = static_cast<float>(copyFloor);
  RAG_ASSIGN_OR_RETURN(int64_t maxTokens, args.getInt("max-tokens", 16));
  RAG_ASSIGN_OR_RETURN(int64_t threads, args.getInt("threads", static_cast<int64_t>(std::thread::hardware_concurrency())));
  if (maxTokens < 1 || maxTokens > 1024) return Status::invalidArgument("--max-tokens must be between 1 and 1024");
  g.maxTokens = static_cast<int32_t>(maxTokens);
  model::setComputeThreads(static_cast<int>(std::max<int64_t>(1, threads)));
  RAG_ASSIGN_OR_RETURN(g.loaded, loadChosenModel(choice));
  g.backend = choice.backend;
  if (!g.loaded.tokenizer)
    return Status::notFound("the model at " + g.loaded.description +
                            " has no tokenizer.json next to it; copy the tokenizer it was trained with there");
  return g;
}

// --rerank: `passages` in the order of their BM25 score for `question` (the rest unchanged).
Status rerankPassages(GenerationSetup& g, const std::string& question, std::vector<Passage>& passages) {
  if (!g.rerank) return Status::ok();
  std::vector<int64_t> ids;
  for (const Passage& p : passages) ids.push_back(p.id);
  RAG_ASSIGN_OR_RETURN(std::vector<size_t> order, g.rerank->rankAmong(question, ids));
  std::vector<Passage> sorted;
  for (size_t i : order) sorted.push_back(std::move(passages[i]));
  passages = std::move(sorted);
  return Status::ok();
}

// The passages of `ids` (retrieved, best first), read from the corpus.
Result<std::vector<Passage>> readPassages(corpus::QaPromptReader& reader, const std::vector<int64_t>& ids) {
  std::vector<Passage> out;
  for (int64_t id : ids) {
    if (id < 0) continue;
    RAG_ASSIGN_OR_RETURN(Passage p, reader.passage(id));
    out.push_back(std::move(p));
  }
  return out;
}

model::SequenceRequest requestFor(const GenerationSetup& g, const corpus::QaPrompt& p, const model::QaTokens& t) {
  model::SequenceRequest q;
  q.prompt.assign(t.tokens.begin(), t.tokens.begin() + t.promptLength);
  if (g.blockMask) q.mask = model::AttentionMask::blocks(t.blockStarts);
  q.sampling.maxTokens = g.maxTokens;
  q.sampling.stop = {"\n"};
  // The passages: every segment before the question's (none in a closed-book prompt).
  if (g.extractive) q.sampling.copyFrom = p.text.substr(0, p.segmentStarts.back());
  q.sampling.copyFloor = g.copyFloor;
  return q;
}

// The answer text: what was generated, trimmed.
std::string trimmed(std::string s) {
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// --orders: the answer whose readings are likeliest together. Candidates that give the same
// answer (trimmed, case aside) pool their probabilities (the product of their tokens'), and the
// pooled answer's likeliest reading stands for it; ties go to the earlier order. Measured on
// 2,000 test questions with the wide role model (README, "Reading in several orders"): pooled
// 0.6375, the single likeliest reading 0.6325, per token 0.637, a plain vote 0.6255.
struct OrderCandidate { std::string output; double logprob = 0; };
size_t mostProbableAnswer(const std::vector<OrderCandidate>& orders) {
  auto key = [](const std::string& s) {
    std::string k = trimmed(s);
    std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return k;
  };
  std::map<std::string, std::pair<double, size_t>> pooled;  // answer -> (probability, its likeliest order)
  for (size_t o = 0; o < orders.size(); ++o) {
    auto [it, added] = pooled.try_emplace(key(orders[o].output), 0.0, o);
    it->second.first += std::exp(orders[o].logprob);
    if (orders[o].logprob > orders[it->second.second].logprob) it->second.second = o;
  }
  size_t best = 0;
  double bestP = -1;
  for (const auto& [answer, pv] : pooled) {
    const size_t first = pv.second;
    if (pv.first > bestP || (pv.first == bestP && first < best)) bestP = pv.first, best = first;
  }
  return best;
}

}  // namespace

int cmdRun(Args& args) {
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  auto qaId = args.getInt("qa", 0);
  const bool json = args.flag("json");
  if (!qaId) return fail(qaId.status());
  std::string question = args.positionals().empty() ? std::string() : args.positionals()[0];
  if (args.positionals().size() > 1)
    return fail(Status::invalidArgument("give the question as one quoted argument"));
  if (question.empty() && *qaId == 0)
    return fail(Status::invalidArgument("no question: ragraph run \"What is a dog a kind of?\" or --qa ID"));

  // A corpus question (by id or exact text) can have gold passages; free text cannot.
  auto reader = corpus::QaPromptReader::open(corpusPath);
  if (!reader) return fail(reader.status());
  if (*qaId == 0) {
    auto st = reader->db().prepare("SELECT id FROM qa WHERE question = ?1 LIMIT 1");
    if (!st) return fail(st.status());
    st->bind(1, question);
    auto row = st->step();
    if (!row) return fail(row.status());
    if (*row) *qaId = st->columnInt64(0);
  }
  auto setup = readGenerationSetup(args, *qaId ? corpus::QaContext::Gold : corpus::QaContext::None,
                                   corpusPath);
  if (!setup) return fail(setup.status());
  if (Status s = args.finish(); !s) return fail(s);

  QaItem item;
  std::vector<Passage> context;
  if (setup->retriever) {
    if (*qaId) {
      auto found = reader->item(*qaId);
      if (!found) return fail(found.status());
      item = *found;
    } else {
      item.question = question;
    }
    auto hits = setup->retriever->search(std::vector<std::string>{item.question},
                                         static_cast<int32_t>(setup->prompt.passages));
    if (!hits) return fail(hits.status());
    auto passages = readPassages(*reader, hits->front());
    if (!passages) return fail(passages.status());
    context = std::move(*passages);
  } else if (*qaId) {
    auto found = reader->item(*qaId);
    if (!found) return fail(found.status());
    item = *found;
    auto ctx = reader->contextPassages(item, setup->prompt);
    if (!ctx) return fail(ctx.status());
    context = std::move(*ctx);
  } else if (setup->prompt.context == corpus::QaContext::Gold) {
    return fail(Status::invalidArgument("--context gold needs a corpus question (its gold passages); "
                                        "pass --qa ID, a question from the corpus, or --context none"));
  } else {
    item.question = question;
  }
  if (Status s = rerankPassages(*setup, item.question, context); !s) return fail(s);
  const corpus::QaPrompt prompt = corpus::buildQaPrompt(item, context, setup->prompt);
  const model::QaTokens tokens = model::tokenizeQaPrompt(*setup->loaded.tokenizer, prompt);

  model::RunnerParams rp;
  rp.backend = setup->backend;
  auto runner = model::ModelRunner::create(setup->loaded.model, rp, setup->loaded.tokenizer);
  if (!runner) return fail(runner.status());
  auto id = (*runner)->add(requestFor(*setup, prompt, tokens));
  if (!id) return fail(id.status());
  if (!json) std::printf("%s", prompt.text.c_str());
  std::string answer;
  model::FinishReason reason = model::FinishReason::None;
  Stopwatch wall;
  while ((*runner)->hasWork()) {
    for (const model::SeqEvent& e : (*runner)->step().events) {
      answer += e.text;
      if (!json) std::printf("%s", e.text.c_str()), std::fflush(stdout);
      if (e.finished) reason = e.reason;
    }
  }
  if (Status s = (*runner)->deviceStatus(); !s) return fail(s);
  const bool correct = !item.answers.empty() && corpus::answerMatches(answer, item.answers);
  if (json) {
    JsonWriter w(std::cout, true);
    w.beginObject();
    w.key("question").value(item.question);
    if (*qaId) w.key("qa_id").value(*qaId);
    w.key("context").value(setup->contextName);
    w.key("passages").beginArray();
    for (int64_t pid : prompt.passageIds) w.value(pid);
    w.endArray();
    w.key("prompt_tokens").value(static_cast<int64_t>(tokens.promptLength));
    w.key("answer").value(trimmed(answer));
    w.key("finish_reason").value(model::finishReasonName(reason));
    if (!item.answers.empty()) {
      w.key("gold_answers").beginArray();
      for (const std::string& a : item.answers) w.value(a);
      w.endArray();
      w.key("correct").value(correct);
    }
    w.key("seconds").value(wall.elapsedSeconds());
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("\n");
    if (!item.answers.empty())
      std::fprintf(stderr, "[%s; gold: %s]\n", correct ? "correct" : "wrong", item.answers[0].c_str());
  }
  return 0;
}

int cmdEvalQa(Args& args) {
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const std::string split = args.getOr("split", "test");
  auto limit = args.getInt("limit", 0);
  auto batch = args.getInt("batch", 32);
  auto examples = args.getInt("examples", 0);
  auto orders = args.getInt("orders", 1);
  const bool json = args.flag("json");
  for (auto* r : {&limit, &batch, &examples, &orders})
    if (!*r) return fail(r->status());
  if (*limit < 0 || *batch < 1 || *examples < 0)
    return fail(Status::invalidArgument("--limit and --examples must be >= 0 and --batch >= 1"));
  auto setup = readGenerationSetup(args, corpus::QaContext::Gold, corpusPath);
  if (!setup) return fail(setup.status());
  if (Status s = args.finish(); !s) return fail(s);
  // --orders N: each question read N times, its passages rotated so that a different one leads
  // each time, and the answer the readings make likeliest kept (mostProbableAnswer).
  const bool withPassages = setup->retriever || setup->prompt.context != corpus::QaContext::None;
  if (*orders < 1 || *orders > static_cast<int64_t>(setup->prompt.passages) || (*orders > 1 && !withPassages))
    return fail(Status::invalidArgument("--orders must be between 1 and the prompt's passages (" +
                                        std::to_string(setup->prompt.passages) +
                                        "), and 1 with --context none: it rotates the passages"));

  auto reader = corpus::QaPromptReader::open(corpusPath);
  if (!reader) return fail(reader.status());
  auto all = reader->splitIds(split);
  if (!all) return fail(all.status());
  const std::vector<int64_t> ids = spreadEvenly(*all, *limit);

  model::RunnerParams rp;
  rp.maxRunning = static_cast<int32_t>(*batch);
  rp.maxQueued = static_cast<int32_t>(ids.size() * static_cast<size_t>(*orders)) + 1;
  rp.backend = setup->backend;
  auto runner = model::ModelRunner::create(setup->loaded.model, rp, setup->loaded.tokenizer);
  if (!runner) return fail(runner.status());

  // `place`: where the first order's prompt shows the item's first gold passage (1 = first), 0
  // when it shows none. Each order is a sequence of its own; the item is scored once all are done.
  using Candidate = OrderCandidate;
  struct Pending { QaItem item; size_t place = 0; std::vector<Candidate> orders; int64_t running = 0; };
  struct Sequence { size_t item = 0; size_t order = 0; };
  std::vector<Pending> pending;
  std::map<model::SeqId, Sequence> sequences;
  ProgressPrinter progress(false);
  std::vector<std::vector<int64_t>> retrieved;  // --context retrieved: per item, best first
  if (setup->retriever) {
    std::vector<std::string> questions;
    for (int64_t id : ids) {
      auto item = reader->item(id);
      if (!item) return fail(item.status());
      questions.push_back(item->question);
    }
    progress("retrieving", 0, ids.size());
    auto hits = setup->retriever->search(questions, static_cast<int32_t>(setup->prompt.passages));
    if (!hits) return fail(hits.status());
    retrieved = std::move(*hits);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    auto item = reader->item(ids[i]);
    if (!item) return fail(item.status());
    auto ctx = setup->retriever ? readPassages(*reader, retrieved[i])
                                : reader->contextPassages(*item, setup->prompt);
    if (!ctx) return fail(ctx.status());
    if (Status s = rerankPassages(*setup, item->question, *ctx); !s) return fail(s);
    Pending p{.item = std::move(*item), .orders = std::vector<Candidate>(static_cast<size_t>(*orders))};
    for (size_t o = 0; o < p.orders.size(); ++o) {
      std::vector<Passage> passages = *ctx;
      std::rotate(passages.begin(), passages.begin() + static_cast<ptrdiff_t>(o * passages.size() / p.orders.size()),
                  passages.end());
      const corpus::QaPrompt prompt = corpus::buildQaPrompt(p.item, passages, setup->prompt);
      const model::QaTokens t = model::tokenizeQaPrompt(*setup->loaded.tokenizer, prompt);
      model::SequenceRequest request = requestFor(*setup, prompt, t);
      request.logprobs = p.orders.size() > 1;
      auto id = (*runner)->add(std::move(request));
      if (!id) return fail(Status(id.status().code(), "QA item " + std::to_string(ids[i]) + ": " + id.status().message()));
      if (o == 0) p.place = prompt.goldSlots.empty() ? 0 : prompt.goldSlots.front() + 1;  // slots in prompt order
      sequences.emplace(*id, Sequence{pending.size(), o});
      ++p.running;
    }
    pending.push_back(std::move(p));
    progress("preparing prompts", i + 1, ids.size());
  }
  struct Tally { int64_t items = 0, correct = 0; };
  std::map<std::string, Tally> byType;
  std::map<size_t, Tally> byPlace;  // by the first gold passage's place in the prompt (a reader's position bias)
  Tally overall, firstOrder, anyOrder;  // with --orders: the first order alone, and any order right
  int64_t generated = 0, shown = 0;
  Stopwatch wall;
  while ((*runner)->hasWork()) {
    model::StepResult r = (*runner)->step();
    generated += r.stats.decodeRows;
    for (const model::SeqEvent& e : r.events) {
      const Sequence seq = sequences.at(e.id);
      Pending& p = pending[seq.item];
      Candidate& c = p.orders[seq.order];
      c.output += e.text;
      c.logprob += e.logprob;
      if (!e.finished) continue;
      sequences.erase(e.id);
      if (--p.running > 0) continue;
      const size_t best = mostProbableAnswer(p.orders);
      const bool ok = corpus::answerMatches(p.orders[best].output, p.item.answers);
      bool any = false;
      for (const Candidate& o : p.orders) any = any || corpus::answerMatches(o.output, p.item.answers);
      ++firstOrder.items, ++anyOrder.items;
      firstOrder.correct += corpus::answerMatches(p.orders[0].output, p.item.answers);
      anyOrder.correct += any;
      Tally& t = byType[p.item.type];
      ++t.items, ++overall.items;
      t.correct += ok, overall.correct += ok;
      if (p.place > 0) ++byPlace[p.place].items, byPlace[p.place].correct += ok;
      if (shown < *examples) {
        ++shown;
        std::fprintf(stderr, "\n[%s] %s\n  output: %s\n  gold:   %s\n", ok ? "correct" : "wrong",
                     p.item.question.c_str(), trimmed(p.orders[best].output).c_str(),
                     p.item.answers.empty() ? "" : p.item.answers[0].c_str());
      }
      p.orders = {};
      progress("answering", static_cast<uint64_t>(overall.items), ids.size());
    }
  }
  progress.finish();
  if (Status s = (*runner)->deviceStatus(); !s) return fail(s);  // not an accuracy of 0
  const double secs = wall.elapsedSeconds();
  auto acc = [](const Tally& t) { return t.items ? static_cast<double>(t.correct) / static_cast<double>(t.items) : 0.0; };
  if (json) {
    JsonWriter w(std::cout, true);
    w.beginObject();
    w.key("model").value(setup->loaded.description);
    w.key("split").value(split);
    w.key("context").value(setup->contextName);
    w.key("mask").value(setup->blockMask ? "block" : "causal");
    w.key("decode").value(setup->extractive ? "extractive" : "free");
    w.key("rerank").value(setup->rerank ? "bm25" : "none");
    w.key("items").value(overall.items);
    w.key("accuracy").value(acc(overall));
    if (*orders > 1) {
      w.key("orders").beginObject();
      w.key("n").value(*orders);
      w.key("first_order_accuracy").value(acc(firstOrder));  // what --orders 1 would have given
      w.key("any_order_accuracy").value(acc(anyOrder));      // a perfect choice among the orders
      w.endObject();
    }
    w.key("by_type").beginObject();
    for (const auto& [type, t] : byType) {
      w.key(type).beginObject();
      w.key("items").value(t.items);
      w.key("correct").value(t.correct);
      w.key("accuracy").value(acc(t));
      w.endObject();
    }
    w.endObject();
    if (!byPlace.empty()) {
      w.key("by_gold_place").beginObject();
      for (const auto& [place, t] : byPlace) {
        w.key(std::to_string(place)).beginObject();
        w.key("items").value(t.items);
        w.key("accuracy").value(acc(t));
        w.endObject();
      }
      w.endObject();
    }
    w.key("seconds").value(secs);
    w.key("decode_tokens_per_s").value(static_cast<double>(generated) / secs);
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("%s split, %s context: accuracy %.4f over %lld items\n", split.c_str(),
                setup->contextName.c_str(), acc(overall),
                static_cast<long long>(overall.items));
    for (const auto& [type, t] : byType)
      std::printf("  %-12s %.4f (%lld/%lld)\n", type.c_str(), acc(t), static_cast<long long>(t.correct),
                  static_cast<long long>(t.items));
    for (const auto& [place, t] : byPlace)
      std::printf("  gold at place %zu  %.4f (%lld/%lld)\n", place, acc(t), static_cast<long long>(t.correct),
                  static_cast<long long>(t.items));
  }
  return 0;
}

int cmdBenchLlm(Args& args) {
  auto choice = readModelChoice(args, /*allowSynthetic=*/true);
  if (!choice) return fail(choice.status());
  auto promptLen = args.getInt("prompt", 128);
  auto prefillLen = args.getInt("prefill", 512);
  auto steps = args.getInt("steps", 16);
  auto threads = args.getInt("threads", static_cast<int64_t>(std::thread::hardware_concurrency()));
  const std::string saveDir = args.getOr("save", "");  // the benchmarked weights, for other programs to run
  const std::string llamaBench = args.getOr("llama-bench", "");
  args.flag("json");  // JSON is the only output; the flag is accepted for symmetry with other benches
  for (auto* r : {&promptLen, &prefillLen, &steps, &threads})
    if (!*r) return fail(r->status());
  if (*promptLen < 1 || *prefillLen < 1 || *steps < 1 || *threads < 1)
    return fail(Status::invalidArgument("--prompt, --prefill, --steps and --threads must be positive"));
  if (Status s = args.finish(); !s) return fail(s);
  // Before any measuring: a llama-bench that is not there is a mistake worth minutes.
  if (!llamaBench.empty() && llamaBench.find('/') != std::string::npos && ::access(llamaBench.c_str(), X_OK) != 0)
    return fail(Status::notFound("--llama-bench " + llamaBench +
                                 " is not an executable file; give the llama-bench binary of a llama.cpp build "
                                 "(cmake -B build && cmake --build build --target llama-bench)"));
  model::setComputeThreads(static_cast<int>(*threads));

  auto loaded = loadChosenModel(*choice);
  if (!loaded) return fail(loaded.status());
  if (!saveDir.empty()) {
    // The same weights as a Hugging Face directory: `ragraph model gguf` then gives llama.cpp them.
    if (Status s = model::saveModel(*loaded->model, saveDir); !s) return fail(s.withContext("--save " + saveDir));
    std::fprintf(stderr, "saved the benchmarked model to %s\n", saveDir.c_str());
  }
  const model::ModelFacts facts = model::modelFacts(*loaded->model);
  const int64_t vocab = facts.config.vocabSize;
  if (*prefillLen + 1 >= facts.config.maxPositionEmbeddings || *promptLen + *steps + 8 >= facts.config.maxPositionEmbeddings)
    return fail(Status::invalidArgument("--prompt/--prefill exceed the model's context window of " +
                                        std::to_string(facts.config.maxPositionEmbeddings)));

  auto prefill = measurePrefill(loaded->model, vocab, *prefillLen);
  if (!prefill) return fail(prefill.status());
  const double prefillTps = *prefill;

  // The runner as it serves (fused decode kernels for F32) and, side by side in the same run,
  // on libtorch ops only: the reference the kernels replace.
  std::map<int32_t, DecodeFigures> decode, decodeTorch;
  for (int32_t batch : {1, 8, 32, 64}) {
    std::fprintf(stderr, "decode at batch %d ...\n", batch);
    for (bool kernels : {true, false}) {
      auto d = measureDecode(loaded->model, vocab, batch, *promptLen, static_cast<int32_t>(*steps), kernels);
      if (!d) return fail(d.status());
      (kernels ? decode : decodeTorch)[batch] = *d;
    }
  }

  // The GPU backend (--device cuda), in the same run as the CPU figures above: decode at each
  // batch as it serves (decode steps replayed from CUDA graphs, products of 2 to 8 rows on our
  // kernel, greedy rows sent back as tokens), then with every kernel launched eagerly, with every
  // product on cuBLAS, and with every row's logits copied back, one after the other at each
  // batch; prefill; and the floor its memory bandwidth sets under a batch-1 step.
  enum GpuVariant { kServing, kEager, kCublas, kLogits };
  struct {
    std::string name;
    std::map<int32_t, DecodeFigures> decode[4];
    double prefill = 0, bandwidth = 0;
  } device;
  if (choice->backend) {
    model::StepBackendFactory variants[4] = {choice->backend};
    for (auto [v, options] : {std::pair{kEager, model::GpuStepOptions{.graphs = false}},
                              std::pair{kCublas, model::GpuStepOptions{.smallRowLinear = false}},
                              std::pair{kLogits, model::GpuStepOptions{.greedyTokens = false}}}) {
      auto factory = stepBackendFor(choice->device, options);
      if (!factory) return fail(factory.status());
      variants[v] = *factory;
    }
    for (int32_t batch : {1, 8, 32, 64}) {
      std::fprintf(stderr, "decode on %s at batch %d ...\n", choice->device.c_str(), batch);
      for (int v : {kServing, kEager, kCublas, kLogits}) {
        auto d = measureDecode(loaded->model, vocab, batch, *promptLen, static_cast<int32_t>(*steps), true, variants[v]);
        if (!d) return fail(d.status().withContext("--device " + choice->device));
        device.decode[v][batch] = *d;
      }
      device.name = device.decode[kServing][batch].device;
    }
    auto p = measurePrefill(loaded->model, vocab, *prefillLen, choice->backend);
    if (!p) return fail(p.status().withContext("--device " + choice->device));
    device.prefill = *p;
#if RAGWB_HAVE_CUDA
    auto bw = cuda::deviceCopyBandwidth(size_t{1} << 30);
    if (!bw) return fail(bw.status());
    device.bandwidth = *bw;
#endif
  }

  // llama.cpp on the same weights. Its decode (llama-bench -n 64: batch 1 from an empty context)
  // and prefill (-p, one batch) alternate with ours three times, so both see the same machine;
  // each side's best round is reported.
  struct {
    double decode = 0, prefill = 0, oursDecode = 0;
  } llamaCpp;
  if (!llamaBench.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ragraph-llama-bench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) return fail(Status::ioError("cannot make a temporary directory for the GGUF file"));
    const std::filesystem::path tmp = tmpl;
    struct Cleanup {
      std::filesystem::path dir;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
      }
    } cleanup{tmp};
    model::GgufExportOptions g;
    g.out = tmp / "model.gguf";
    g.modelDir = choice->dir;
    if (choice->dir.empty()) {
      // The synthetic model has no vocabulary of its own: the shipped model's tokenizer, padded.
      g.modelDir = tmp / "synthetic";
      g.tokenizer = defaultModelDir() / "tokenizer.json";
      if (Status s = model::saveModel(*loaded->model, g.modelDir); !s) return fail(s);
    }
    std::fprintf(stderr, "exporting the model to GGUF for llama.cpp ...\n");
    if (auto e = model::exportLlamaGguf(g); !e) return fail(e.status().withContext("--llama-bench"));
    llamaCpp.oursDecode = decode[1].tokensPerSecond;
    for (int round = 0; round < 3; ++round) {
      std::fprintf(stderr, "llama.cpp side by side, round %d of 3 ...\n", round + 1);
      auto theirs = runLlamaBench(llamaBench, g.out, {.generate = 64, .threads = *threads, .repetitions = 1});
      if (!theirs) return fail(theirs.status());
      llamaCpp.decode = std::max(llamaCpp.decode, *theirs);
      auto ours = measureDecode(loaded->model, vocab, 1, *promptLen, static_cast<int32_t>(*steps), true);
      if (!ours) return fail(ours.status());
      llamaCpp.oursDecode = std::max(llamaCpp.oursDecode, ours->tokensPerSecond);
      auto prefill = runLlamaBench(llamaBench, g.out, {.prompt = *prefillLen, .threads = *threads, .repetitions = 1});
      if (!prefill) return fail(prefill.status());
      llamaCpp.prefill = std::max(llamaCpp.prefill, *prefill);
    }
  }

  // Physical floor of one batch-1 decode step: every weight but the embedding table is read
  // (a tied head reads it once as lm_head), plus the KV of the context.
  const int64_t embedBytes = facts.config.tieWordEmbeddings ? 0 : facts.config.vocabSize * facts.config.hiddenSize * facts.bytesPerElement;
  const int64_t weightBytesRead = facts.weightBytes - embedBytes;
  const int64_t ctx = *promptLen + *steps / 2 + 3;
  const int64_t kvBytes = 2 * facts.config.numHiddenLayers * ctx * facts.config.numKeyValueHeads * facts.config.headDim * facts.bytesPerElement;
  auto measured = measureReadBandwidth(size_t{512} << 20, static_cast<int>(*threads));
  if (!measured) return fail(measured.status());
  const double bandwidth = *measured;
  const double floorSeconds = static_cast<double>(weightBytesRead + kvBytes) / bandwidth;

  JsonWriter w(std::cout, true);
  w.beginObject();
  w.key("model").value(loaded->description);
  w.key("parameters").value(facts.parameters);
  w.key("dtype").value(choice->dtype);
  w.key("threads").value(*threads);
  w.key("blas_kernels").value(blasKernelSet());  // core/blas_info.h
  w.key("prompt_tokens").value(*promptLen);
  w.key("prefill_tokens_per_s").value(prefillTps);
  w.key("decode_tokens_per_s").beginObject();
  for (const auto& [b, d] : decode) w.key(std::to_string(b)).value(d.tokensPerSecond);
  w.endObject();
  w.key("decode_step_ms").beginObject();
  for (const auto& [b, d] : decode) w.key(std::to_string(b)).value(d.secondsPerStep * 1e3);
  w.endObject();
  w.key("decode_tokens_per_s_libtorch").beginObject();
  for (const auto& [b, d] : decodeTorch) w.key(std::to_string(b)).value(d.tokensPerSecond);
  w.endObject();
  w.key("kernel_speedup").beginObject();
  for (const auto& [b, d] : decodeTorch) w.key(std::to_string(b)).value(decode[b].tokensPerSecond / d.tokensPerSecond);
  w.endObject();
  w.key("b32_over_b1").value(decode[32].tokensPerSecond / decode[1].tokensPerSecond);
  w.key("overhead_share_b32").value(decode[32].overheadShare);
  w.key("floor").beginObject();
  w.key("weight_bytes_per_step").value(weightBytesRead);
  w.key("kv_bytes_per_step_b1").value(kvBytes);
  w.key("read_bandwidth_bytes_per_s").value(bandwidth);
  w.key("seconds_per_token_b1").value(floorSeconds);
  w.key("tokens_per_s_b1").value(1.0 / floorSeconds);
  w.endObject();
  w.key("decode_b1_over_floor").value((1.0 / decode[1].tokensPerSecond) / floorSeconds);
  w.key("device").value(choice->backend ? device.name : std::string("cpu"));
  if (choice->backend) {
    // The same model's batch-1 step reads its weights and KV once from device memory too.
    const double deviceFloor = device.bandwidth > 0 ? static_cast<double>(weightBytesRead + kvBytes) / device.bandwidth : 0;
    w.key("gpu").beginObject();
    w.key("prefill_tokens_per_s").value(device.prefill);
    w.key("prefill_over_cpu").value(device.prefill / prefillTps);
    const std::map<int32_t, DecodeFigures>& serving = device.decode[kServing];
    auto perBatch = [&](const char* key, auto&& value) {
      w.key(key).beginObject();
      for (const auto& [b, d] : serving) w.key(std::to_string(b)).value(value(b, d));
      w.endObject();
    };
    perBatch("decode_tokens_per_s", [](int32_t, const DecodeFigures& d) { return d.tokensPerSecond; });
    perBatch("decode_over_cpu", [&](int32_t b, const DecodeFigures& d) { return d.tokensPerSecond / decode[b].tokensPerSecond; });
    perBatch("decode_step_ms", [](int32_t, const DecodeFigures& d) { return d.secondsPerStep * 1e3; });
    // The host's share of a step (the runner's planning and sampling, outside the forward).
    perBatch("overhead_share", [](int32_t, const DecodeFigures& d) { return d.overheadShare; });
    perBatch("decode_tokens_per_s_eager", [&](int32_t b, const DecodeFigures&) { return device.decode[kEager][b].tokensPerSecond; });
    perBatch("graph_speedup", [&](int32_t b, const DecodeFigures& d) {
      return d.tokensPerSecond / device.decode[kEager][b].tokensPerSecond;
    });
    perBatch("decode_tokens_per_s_logits", [&](int32_t b, const DecodeFigures&) { return device.decode[kLogits][b].tokensPerSecond; });
    // Greedy rows answered with their tokens, over every row's logits copied back and sampled here.
    perBatch("greedy_tokens_speedup", [&](int32_t b, const DecodeFigures& d) {
      return d.tokensPerSecond / device.decode[kLogits][b].tokensPerSecond;
    });
    perBatch("decode_tokens_per_s_cublas", [&](int32_t b, const DecodeFigures&) { return device.decode[kCublas][b].tokensPerSecond; });
    perBatch("small_row_kernel_speedup", [&](int32_t b, const DecodeFigures& d) {
      return d.tokensPerSecond / device.decode[kCublas][b].tokensPerSecond;
    });
    w.key("copy_bandwidth_bytes_per_s").value(device.bandwidth);
    w.key("floor_tokens_per_s_b1").value(deviceFloor > 0 ? 1.0 / deviceFloor : 0.0);
    w.key("decode_b1_over_floor").value(deviceFloor > 0 ? (1.0 / serving.at(1).tokensPerSecond) / deviceFloor : 0.0);
    w.endObject();
  }
  if (!llamaBench.empty()) {
    w.key("llama_cpp").beginObject();
    w.key("binary").value(llamaBench);
    w.key("decode_tokens_per_s_b1").value(llamaCpp.decode);
    w.key("prefill_tokens_per_s").value(llamaCpp.prefill);
    w.key("ours_decode_tokens_per_s_b1").value(llamaCpp.oursDecode);
    w.key("decode_b1_ours_over_llama_cpp").value(llamaCpp.oursDecode / llamaCpp.decode);
    w.key("prefill_ours_over_llama_cpp").value(prefillTps / llamaCpp.prefill);
    w.key("llama_cpp_decode_b1_over_floor").value((1.0 / llamaCpp.decode) / floorSeconds);
    w.endObject();
  }
  w.endObject();
  std::cout << std::endl;
  return 0;
}

}  // namespace rag::cli
