// `ragraph bench depcache`: DepCache's two system tables on this machine, over GraphRAG prompts
// built the serving way (knowledge/kg_retriever.h over the corpus's knowledge graph, the
// graphrag workflow's prompt template, the serving tokenizer).
//
// A pool of `--questions` single-hop and two-hop test questions (the paper's synthetic set has
// 500) is retrieved once each; traces of `--requests` requests draw their topic entities from
// it by popularity (`ragraph trace make`'s uniform, zipf:1.1 and temporal), as DepCache §6.1.
//
// Hit rate (Fig. 13's shape): the requests of each trace go through a real RadixCache over a
// real KvPool holding 5, 10 and 20 % of the trace's distinct subgraph blocks, in batches of 4
// (the paper's batch size) chosen from a pending window of 16 by the scheduler, each segment
// matched (the token hit rate is averaged over requests, as the paper's), its missing blocks
// allocated (evicting) and inserted. Rows: eviction lru, lfu, pgdsf, lacr under FIFO order;
// lpm (longest cached prefix first) and lsp (requests sharing a subgraph root together), each
// with LRU and with LACR. LACR reads the window as its pending queue.
//
// TTFT and throughput (Fig. 10/11's shape): one zipf:1.1 trace, Poisson arrivals at `--rps`,
// through a real ModelRunner (4 sequences at once) four ways: flat causal prompts with no
// cache (the vLLM row), with the radix cache (SGLang), dependency prompts (the ancestor mask,
// pre-order trees) without a cache, and DepCache (its KV path, sched/segment_kv.h, with LACR).
// TTFT runs from a request's arrival to its first token.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "knowledge/kg_retriever.h"
#include "memory/eviction_policy.h"
#include "memory/radix_cache.h"
#include "model/dep_prompt.h"
#include "model/prompt.h"
#include "model/runner.h"
#include "model/text_embedder.h"
#include "model/tokenizer.h"
#include "rag/arrivals.h"
#include "sched/segment_kv.h"
#include "sched/serving_assets.h"
#include "retriever.h"
#include "sched/step_device.h"
#include "serve_run.h"
#include "workload/workload_trace.h"

namespace rag::cli {

namespace {

constexpr int32_t kBlock = 16;  // the runner's KV block



struct GraphPrompt {
  model::SegmentedPrompt dep;
  std::vector<std::vector<int32_t>> keys;  // each segment's structural keys
  std::vector<int32_t> flat;               // the causal rendering's tokens
  int64_t root = 0;                        // the first subgraph's entity (LSP groups by it)
};

struct Scheduling {
  std::string name;    // the row's key
  std::string policy;  // eviction
  enum class Order { Fifo, Lpm, Lsp } order = Order::Fifo;
};

struct HitRow {
  double hitRate = 0;
  int64_t evictedBlocks = 0;
};

// One trace through a RadixCache of `blocks` blocks, batches of 4 from a window of 16.
Result<HitRow> simulate(const std::vector<const GraphPrompt*>& trace, int32_t blocks, const Scheduling& s,
                        const memory::RecomputeCost& cost, size_t kWindow) {
  RAG_ASSIGN_OR_RETURN(auto pool, memory::KvPool::create({.layers = 1, .kvHeads = 1, .headDim = 1,
                                                          .blockSize = kBlock, .computeBlocks = blocks}));
  RAG_ASSIGN_OR_RETURN(auto policy, memory::makeEvictionPolicy(s.policy));
  memory::RadixCache cache(*pool, std::move(policy));
  cache.setRecomputeCost([&cost](int64_t prefix, int64_t n) { return cost.seconds(prefix, n); });
  pool->setReclaimer([&cache](int32_t n) { return cache.evict(n); });
  constexpr size_t kBatch = 4;
  std::deque<const GraphPrompt*> queue(trace.begin(), trace.end());
  cache.setPendingQueue([&] {
    std::vector<memory::PendingPrompt> out;
    for (size_t i = 0; i < queue.size() && i < kWindow; ++i)
      for (const std::vector<int32_t>& k : queue[i]->keys) out.push_back({sched::kDepCacheNamespace, k});
    return out;
  });
  double hitSum = 0;
  int64_t served = 0;
  while (!queue.empty()) {
    const size_t w = std::min(kWindow, queue.size());
    std::vector<size_t> pick(w);
    for (size_t i = 0; i < w; ++i) pick[i] = i;
    if (s.order == Scheduling::Order::Lpm) {
      std::vector<int64_t> cached(w, 0);
      for (size_t i = 0; i < w; ++i)
        for (const std::vector<int32_t>& k : queue[i]->keys) cached[i] += cache.peek(k, sched::kDepCacheNamespace);
      std::stable_sort(pick.begin(), pick.end(), [&](size_t a, size_t b) { return cached[a] > cached[b]; });
    } else if (s.order == Scheduling::Order::Lsp) {
      // The head's group first: requests whose first subgraph shares the head's root, then FIFO.
      const int64_t head = queue[0]->root;
      std::stable_partition(pick.begin(), pick.end(), [&](size_t i) { return queue[i]->root == head; });
    }
    pick.resize(std::min(kBatch, w));
    std::vector<const GraphPrompt*> batch;
    for (size_t i : pick) batch.push_back(queue[i]);
    std::sort(pick.begin(), pick.end(), std::greater<>());
    for (size_t i : pick) queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(i));
    // Serve the batch: match every segment, then compute and insert the missing blocks. What the
    // batch uses stays locked (and its blocks held) until the batch ends, as a running batch's.
    std::vector<std::vector<int32_t>> held;
    std::vector<memory::PrefixNodeId> locked;
    for (const GraphPrompt* p : batch) {
      int64_t total = 0, hit = 0;
      for (const std::vector<int32_t>& k : p->keys) {
        const auto n = static_cast<int64_t>(k.size());
        memory::PrefixMatch m = cache.match(k, {.ns = sched::kDepCacheNamespace, .maxTokens = n});
        total += n;
        hit += m.tokens;
        const int32_t need = static_cast<int32_t>((n + kBlock - 1) / kBlock) - static_cast<int32_t>(m.blocks.size());
        std::optional<std::vector<int32_t>> fresh = pool->allocate(need);
        if (fresh) {
          std::vector<int32_t> table = m.blocks;
          table.insert(table.end(), fresh->begin(), fresh->end());
          const memory::PrefixNodeId node = cache.insert(k, table, {.ns = sched::kDepCacheNamespace});
          if (node != memory::kNoPrefixNode) {
            cache.lock(node);
            locked.push_back(node);
          }
          held.push_back(std::move(*fresh));
        }
        if (m.node != memory::kNoPrefixNode) locked.push_back(m.node);  // match() locked it
      }
      hitSum += total > 0 ? static_cast<double>(hit) / static_cast<double>(total) : 0.0;
      ++served;
    }
    for (memory::PrefixNodeId n : locked) cache.unlock(n);
    for (const std::vector<int32_t>& h : held) pool->release(h);
  }
  return HitRow{served > 0 ? hitSum / static_cast<double>(served) : 0.0, cache.stats().evictedBlocks};
}

// Blocks a cache holding every segment of the trace would hold (serve_run.h's distinctBlocks).
int64_t distinctSegmentBlocks(const std::vector<const GraphPrompt*>& trace) {
  std::vector<const std::vector<int32_t>*> segments;
  for (const GraphPrompt* p : trace)
    for (const std::vector<int32_t>& k : p->keys) segments.push_back(&k);
  return distinctBlocks(segments, kBlock);
}

struct TtftRow {
  std::vector<double> ttft;
  double seconds = 0;
  int64_t completed = 0;
  int64_t promptTokens = 0;  // tokens given to the runner per request, mean
  double hitRate = 0;
  double meanTtft() const {
    return ttft.empty() ? 0.0 : std::accumulate(ttft.begin(), ttft.end(), 0.0) / static_cast<double>(ttft.size());
  }
};

// The trace through one runner; `mode`: none | radix | depattn | depcache.
Result<TtftRow> serveRow(const ServingAssets& assets, const std::vector<const GraphPrompt*>& trace,
                         const std::vector<double>& arrivals, const std::string& mode, int64_t kvBytes,
                         const model::StepBackendFactory& backend) {
  model::RunnerParams rp;
  rp.backend = backend;
  rp.maxRunning = 4;
  rp.kvBudgetBytes = kvBytes;
  rp.prefixCache = mode == "radix" || mode == "depcache";
  rp.evictionPolicy = mode == "depcache" ? "lacr" : "lru";
  RAG_ASSIGN_OR_RETURN(auto runner, model::ModelRunner::create(assets.model, rp, assets.tokenizer));
  std::unique_ptr<sched::SegmentKvBuilder> builder;
  if (mode == "depcache") builder = std::make_unique<sched::SegmentKvBuilder>(*runner);
  std::map<model::SeqId, size_t> live;                       // sequence -> request
  std::vector<std::pair<sched::SegmentKvBuilder::Ticket, size_t>> building;
  std::vector<size_t> waiting;                               // arrived, not yet given to the runner
  if (builder)
    runner->prefixCache()->setPendingQueue([&] {
      std::vector<memory::PendingPrompt> out;
      for (size_t i : waiting)
        for (const std::vector<int32_t>& k : trace[i]->keys) out.push_back({sched::kDepCacheNamespace, k});
      builder->appendPending(out);
      return out;
    });
  TtftRow row;
  ArrivalPacer pacer(arrivals);
  const Stopwatch wall;
  int64_t hitTokens = 0, queriedTokens = 0;
  auto add = [&](size_t i, model::SequenceRequest q) -> Status {
    q.sampling.maxTokens = 8;
    q.sampling.ignoreEos = true;
    RAG_ASSIGN_OR_RETURN(model::SeqId id, runner->add(std::move(q)));
    live[id] = i;
    return Status::ok();
  };
  size_t done = 0;
  while (done < trace.size()) {
    while (pacer.due()) {
      waiting.push_back(pacer.next());
      pacer.advance();
    }
    // Admit while fewer than 4 requests are in the runner (batch 4), so the queue is visible.
    while (!waiting.empty() && live.size() + building.size() < 4) {
      const size_t i = waiting.front();
      waiting.erase(waiting.begin());
      const GraphPrompt& p = *trace[i];
      model::SequenceRequest q;
      if (mode == "none" || mode == "radix") {
        q.prompt = p.flat;
      } else if (mode == "depattn") {
        q.prompt = p.dep.tokens();
        q.mask = p.dep.mask();
      } else {
        RAG_ASSIGN_OR_RETURN(sched::SegmentKvBuilder::Ticket t, builder->begin(p.dep));
        building.push_back({t, i});
        continue;
      }
      row.promptTokens += static_cast<int64_t>(q.prompt.size());
      RAG_RETURN_IF_ERROR(add(i, std::move(q)));
    }
    if (!runner->hasWork()) {
      if (pacer.finished() && waiting.empty() && building.empty() && live.empty()) break;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(pacer.nsUntilDue(), 1'000'000)));
      continue;
    }
    model::StepResult r = runner->step();
    if (builder) {
      builder->absorb(r.events);
      for (auto it = building.begin(); it != building.end();) {
        if (!builder->ready(it->first)) {
          ++it;
          continue;
        }
        RAG_ASSIGN_OR_RETURN(model::SequenceRequest q, builder->request(it->first));
        hitTokens += builder->hitTokens(it->first);
        queriedTokens += trace[it->second]->dep.contextTokens();
        row.promptTokens += static_cast<int64_t>(q.prompt.size());
        const size_t i = it->second;
        Status st = add(i, std::move(q));
        builder->finish(it->first);
        RAG_RETURN_IF_ERROR(st);
        it = building.erase(it);
      }
    }
    const double now = wall.elapsedSeconds();
    for (const model::SeqEvent& e : r.events) {
      auto it = live.find(e.id);
      if (it == live.end()) continue;
      if (e.promptCachedTokens >= 0) {
        row.ttft.push_back(now - arrivals[it->second]);
        if (mode == "radix") {
          hitTokens += e.promptCachedTokens;
          queriedTokens += static_cast<int64_t>(trace[it->second]->flat.size());
        }
      }
      if (e.finished) {
        if (e.reason == model::FinishReason::Error || e.reason == model::FinishReason::ContextFull)
          return Status::internal("request " + std::to_string(it->second) + " failed: " +
                                  std::string(model::finishReasonName(e.reason)));
        live.erase(it);
        ++done;
        ++row.completed;
      }
    }
  }
  row.seconds = wall.elapsedSeconds();
  row.promptTokens /= std::max<int64_t>(1, row.completed);
  row.hitRate = queriedTokens > 0 ? static_cast<double>(hitTokens) / static_cast<double>(queriedTokens) : 0.0;
  return row;
}

}  // namespace

int cmdBenchDepcache(Args& args) {
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const bool quick = args.flag("quick");
  auto questions = args.getInt("questions", quick ? 120 : 500);
  auto simRequests = args.getInt("requests", quick ? 600 : 2000);
  auto serveRequests = args.getInt("serve-requests", quick ? 80 : 300);
  auto rate = args.getDouble("rps", 8.0);
  auto seed = args.getInt("seed", 1);
  auto paths = args.getInt("paths", 30);
  auto window = args.getInt("window", 16);
  const std::string jsonPath = args.getOr("json", "");
  const std::string tables = args.getOr("tables", "ttft,hit");
  const bool doTtft = tables.find("ttft") != std::string::npos, doHit = tables.find("hit") != std::string::npos;
  auto serving = readServingParams(args, "hedra");
  if (!serving) return fail(serving.status());
  auto backend = stepBackendFor(serving->device);  // checked in readServingParams: cannot fail here
  if (!backend) return fail(backend.status());
  for (auto* r : {&questions, &simRequests, &serveRequests, &seed, &paths, &window})
    if (!*r) return fail(r->status());
  if (!rate) return fail(rate.status());
  if (Status st = args.finish(); !st) return fail(st);
  if (*questions < 4 || *simRequests < 1 || *serveRequests < 1)
    return fail(Status::invalidArgument("--questions must be at least 4, --requests and --serve-requests at least 1"));
  if (!(*rate > 0)) return fail(Status::invalidArgument("--rps must be a positive request rate"));
  if (*window < 4) return fail(Status::invalidArgument("--window (the pending requests a scheduler sees) must be at least the batch of 4"));
  const Stopwatch wall;

  auto all = workload::loadQaItems(corpusPath, "test");
  if (!all) return fail(all.status());
  std::vector<workload::QaItem> items;
  for (const workload::QaItem& q : *all)
    if ((q.type == "single_hop" || q.type == "two_hop") && static_cast<int64_t>(items.size()) < *questions) items.push_back(q);
  if (items.empty()) return fail(Status::notFound("the corpus has no single-hop or two-hop test questions; rebuild it"));
  std::fprintf(stderr, "loading the model, the embedder and the passage index...\n");
  auto assets = loadServingAssets(*serving, corpusPath);
  if (!assets) return fail(assets.status());
  const ServingAssets& a = **assets;
  auto kg = KgSetup::open(corpusPath, *a.embedder);
  if (!kg) return fail(kg.status());
  const WorkflowGraph graphrag = *builtinWorkflow(Workflow::GraphRag);
  const WorkflowNode* gen = nullptr;
  for (const WorkflowNode& n : graphrag.nodes())
    if (n.kind == NodeKind::Generation) gen = &n;
  model::ElementTokens elements(*a.tokenizer);
  const int32_t vocab = static_cast<int32_t>(model::modelFacts(*a.model).config.vocabSize);
  const int64_t maxPositions = model::modelFacts(*a.model).config.maxPositionEmbeddings;

  // ---- one KG retrieval and prompt per question ----
  std::map<int64_t, GraphPrompt> prompts;  // by qa id
  int64_t linked = 0, topicLinked = 0, tooLong = 0, embedded = 0;
  double retrievalSeconds = 0;
  for (const workload::QaItem& q : items) {
    const Stopwatch sw;
    auto res = kg->retriever->retrieve(q.question, {.topK = static_cast<int32_t>(*paths)});
    if (!res) return fail(res.status().withContext("question " + std::to_string(q.id)));
    retrievalSeconds += sw.elapsedSeconds();
    embedded += res->embeddedTexts;
    if (!res->subgraphs.empty()) ++linked;
    for (const knowledge::Subgraph& g : res->subgraphs)
      if (g.link.entity == q.topicEntity) ++topicLinked;
    model::GraphVariables graphs{{"graph", knowledge::subgraphTexts(*kg->graph, res->subgraphs)}};
    Variables vars{{"question", q.question}, {"graph", model::flatGraphText(graphs["graph"])}};
    auto dep = model::dependencyPrompt(elements, gen->promptTemplate, vars, graphs);
    if (!dep || !dep->has_value()) return fail(dep ? Status::internal("graphrag's prompt lost its graph") : dep.status());
    auto pieces = model::promptPieces(gen->promptTemplate, vars, {});
    if (!pieces) return fail(pieces.status());
    GraphPrompt p;
    p.flat = model::tokenizePieces(*a.tokenizer, *pieces).tokens;
    if (static_cast<int64_t>(p.flat.size()) + 16 >= maxPositions) {
      ++tooLong;  // the flat rendering would not fit the context window: left out of every row
      continue;
    }
    p.dep = std::move(**dep);
    for (const model::ContextSegment& s : p.dep.segments) p.keys.push_back(model::structuralKeys(s.tree, vocab));
    p.root = res->subgraphs.empty() ? 0 : res->subgraphs.front().link.entity;
    prompts.emplace(q.id, std::move(p));
    if (prompts.size() % 50 == 0)
      std::fprintf(stderr, "[kg] %zu/%zu questions retrieved (%.1f s)\n", prompts.size(), items.size(), wall.elapsedSeconds());
  }
  std::vector<workload::QaItem> usable;
  for (const workload::QaItem& q : items)
    if (prompts.count(q.id)) usable.push_back(q);
  double flatMean = 0, depMean = 0;
  for (const auto& [id, p] : prompts) {
    flatMean += static_cast<double>(p.flat.size());
    depMean += static_cast<double>(p.dep.contextTokens() + static_cast<int64_t>(p.dep.tail.size()));
  }
  flatMean /= static_cast<double>(std::max<size_t>(1, prompts.size()));
  depMean /= static_cast<double>(std::max<size_t>(1, prompts.size()));
  std::fprintf(stderr, "[kg] %zu questions: %.0f flat tokens, %.0f dependency tokens per prompt; %.1f ms per retrieval\n",
               prompts.size(), flatMean, depMean, 1e3 * retrievalSeconds / static_cast<double>(items.size()));

  auto traceOf = [&](const std::string& pop, int64_t n, double rps) -> Result<std::vector<workload::TraceRequest>> {
    RAG_ASSIGN_OR_RETURN(workload::PopularitySpec spec, workload::parsePopularity(pop));
    workload::TraceParams tp{.rate = rps, .requests = n, .popularity = spec, .seed = static_cast<uint64_t>(*seed)};
    return workload::makeWorkloadTrace(tp, usable);
  };
  auto promptsOf = [&](const std::vector<workload::TraceRequest>& t) {
    std::vector<const GraphPrompt*> out;
    for (const workload::TraceRequest& r : t) out.push_back(&prompts.at(r.qaId));
    return out;
  };

  // ---- TTFT and throughput ----
  auto serveTrace = traceOf("zipf:1.1", *serveRequests, *rate);
  if (!serveTrace) return fail(serveTrace.status());
  const std::vector<const GraphPrompt*> served = promptsOf(*serveTrace);
  std::vector<double> arrivals;
  for (const workload::TraceRequest& r : *serveTrace) arrivals.push_back(r.arrivalS);
  const std::vector<std::string> modes = {"none", "radix", "depattn", "depcache"};
  std::map<std::string, TtftRow> ttft;
  for (const std::string& m : modes) {
    if (!doTtft) break;
    auto row = serveRow(a, served, arrivals, m, serving->kvBudgetBytes, *backend);
    if (!row) return fail(row.status().withContext("row " + m));
    std::fprintf(stderr, "[ttft] %-8s mean %.1f ms p50 %.1f ms p99 %.1f ms  %.2f req/s  %lld tokens/request  hit %.3f\n",
                 m.c_str(), 1e3 * row->meanTtft(),
                 1e3 * percentile(row->ttft, 0.5), 1e3 * percentile(row->ttft, 0.99),
                 static_cast<double>(row->completed) / row->seconds, static_cast<long long>(row->promptTokens), row->hitRate);
    ttft[m] = std::move(*row);
  }

  // ---- hit rates ----
  const memory::RecomputeCost cost(1.0 / 38000.0, 1e-9);  // about rag-llama's prefill here (bench llm): the simulation's fixed price
  const std::vector<Scheduling> rows = {
      {"lru", "lru", Scheduling::Order::Fifo},       {"lfu", "lfu", Scheduling::Order::Fifo},
      {"pgdsf", "pgdsf", Scheduling::Order::Fifo},   {"lacr", "lacr", Scheduling::Order::Fifo},
      {"lpm", "lru", Scheduling::Order::Lpm},        {"lsp", "lru", Scheduling::Order::Lsp},
      {"lpm+lacr", "lacr", Scheduling::Order::Lpm},  {"lsp+lacr", "lacr", Scheduling::Order::Lsp}};
  const double sizes[] = {0.05, 0.10, 0.20};
  struct PopRow {
    std::string name;
    int64_t distinctBlocks = 0;
    std::map<double, std::map<std::string, HitRow>> bySize;
  };
  std::vector<PopRow> hit;
  for (const char* pop : {"uniform", "zipf:1.1", "temporal"}) {
    if (!doHit) break;
    auto t = traceOf(pop, *simRequests, 1.0);
    if (!t) return fail(t.status());
    const std::vector<const GraphPrompt*> trace = promptsOf(*t);
    PopRow pr{pop, distinctSegmentBlocks(trace), {}};
    for (double size : sizes) {
      const auto blocks = static_cast<int32_t>(std::max<double>(64.0, std::ceil(size * static_cast<double>(pr.distinctBlocks))));
      for (const Scheduling& s : rows) {
        auto r = simulate(trace, blocks, s, cost, static_cast<size_t>(*window));
        if (!r) return fail(r.status());
        pr.bySize[size][s.name] = *r;
      }
      std::fprintf(stderr, "[hit] %-9s %2.0f%% (%d blocks):", pop, size * 100, blocks);
      for (const Scheduling& s : rows) std::fprintf(stderr, " %s %.3f", s.name.c_str(), pr.bySize[size][s.name].hitRate);
      std::fprintf(stderr, "\n");
    }
    hit.push_back(std::move(pr));
  }

  std::ostringstream out;
  JsonWriter w(out);
  w.beginObject();
  w.key("bench").value("depcache");
  w.key("questions").value(static_cast<int64_t>(prompts.size()));
  w.key("window").value(*window);
  w.key("questions_too_long").value(tooLong);
  w.key("linked_share").value(static_cast<double>(linked) / static_cast<double>(items.size()));
  w.key("topic_entity_in_subgraphs").value(static_cast<double>(topicLinked) / static_cast<double>(items.size()));
  w.key("kg_retrieval_ms").value(1e3 * retrievalSeconds / static_cast<double>(items.size()));
  w.key("embedded_texts").value(embedded);
  w.key("prompt_tokens").beginObject().key("flat").value(flatMean).key("dependency").value(depMean).endObject();
  w.key("ttft_ms").beginObject();
  for (const std::string& m : modes) {
    if (!doTtft) break;
    const TtftRow& r = ttft[m];
    w.key(m).value(1e3 * r.meanTtft());
  }
  w.endObject();
  w.key("serve").beginObject();
  w.key("rps").value(*rate).key("requests").value(*serveRequests).key("popularity").value("zipf:1.1");
  for (const std::string& m : modes) {
    if (!doTtft) break;
    const TtftRow& r = ttft[m];
    w.key(m).beginObject();
    w.key("ttft_p50_ms").value(1e3 * percentile(r.ttft, 0.5)).key("ttft_p99_ms").value(1e3 * percentile(r.ttft, 0.99));
    w.key("throughput_rps").value(static_cast<double>(r.completed) / r.seconds);
    w.key("prompt_tokens_per_request").value(r.promptTokens);
    w.key("hit_rate").value(r.hitRate);
    w.endObject();
  }
  w.endObject();
  w.key("ttft_ratio").beginObject();
  const double dc = ttft["depcache"].meanTtft();
  for (const std::string& m : {std::string("none"), std::string("radix"), std::string("depattn")})
    w.key(m + "_over_depcache").value(dc > 0 ? ttft[m].meanTtft() / dc : 0.0);
  w.endObject();
  w.key("hit_rate").beginObject();
  for (const PopRow& pr : hit) {
    w.key(pr.name == "zipf:1.1" ? "zipf" : pr.name).beginObject();
    for (const Scheduling& s : rows) w.key(s.name).value(pr.bySize.at(0.10).at(s.name).hitRate);  // at 10 %
    w.endObject();
  }
  w.endObject();
  w.key("hit_rate_by_size").beginObject();
  for (const PopRow& pr : hit) {
    w.key(pr.name).beginObject();
    w.key("distinct_blocks").value(pr.distinctBlocks);
    for (double size : sizes) {
      std::ostringstream k;
      k << size * 100 << "%";
      w.key(k.str()).beginObject();
      for (const Scheduling& s : rows) w.key(s.name).value(pr.bySize.at(size).at(s.name).hitRate);
      w.endObject();
    }
    w.endObject();
  }
  w.endObject();
  w.key("seconds").value(wall.elapsedSeconds());
  w.endObject();
  out << "\n";
  return emitJson(out.str(), jsonPath);
}

}  // namespace rag::cli
