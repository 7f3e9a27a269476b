// `ragraph bench prefix`: what automatic prefix caching (engine/memory/) buys, in two parts.
//
// Serving: one zipf:1.1 trace of One-shot requests (`ragraph trace make`'s generator) served
// twice over one set of loaded resources, the prefix cache off then on; per run the time to
// first token (a generation node's start to its first token, so retrieval does not hide it),
// p50 and p99, throughput, latency and the cache's token hit rate.
//
// Hit rates: the prompts One-shot would send for uniform, zipf:1.1 and temporal traces (the
// serving retriever's top-k, the serving prompt assembler, the serving tokenizer), offered in
// arrival order to a real RadixCache over a real KvPool sized at 5, 10 and 20 % of the trace's
// distinct prompt tokens, under each eviction policy. One prompt is live at a time: it matches,
// the pool makes room for its unmatched suffix (evicting), it is inserted and unlocked. PGDSF
// prices a node with the prefill speed the serving runs measured. (The table DepCache's
// Fig. 13 extends with LACR.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "corpus/qa_prompt.h"
#include "memory/eviction_policy.h"
#include "memory/radix_cache.h"
#include "memory/recompute_cost.h"
#include "model/prompt.h"
#include "model/text_embedder.h"
#include "model/tokenizer.h"
#include "retrieval/passage_index.h"
#include "sched/serving_assets.h"
#include "serve_run.h"
#include "workload/workload_trace.h"

namespace rag::cli {

namespace {

// One-shot's prompts for trace requests, computed once per QA item.
class OneShotPrompts {
public:
  OneShotPrompts(const ServingAssets& assets, corpus::QaPromptReader reader, const WorkflowGraph& graph, int64_t nprobe)
      : m_assets(assets), m_reader(std::move(reader)), m_nprobe(nprobe) {
    for (const WorkflowNode& n : graph.nodes()) {
      if (n.kind == NodeKind::Retrieval) m_retrieval = &n;
      if (n.kind == NodeKind::Generation) m_generation = &n;
    }
  }

  // The prompt tokens of every request of `trace`, in order (retrieval batched over new items).
  Result<std::vector<const std::vector<int32_t>*>> of(std::span<const workload::TraceRequest> trace) {
    if (!m_retrieval || !m_generation) return Status::internal("the one-shot workflow lost a node");
    std::vector<const workload::TraceRequest*> fresh;  // QA items not seen yet, once each
    std::unordered_set<int64_t> seen;
    for (const workload::TraceRequest& r : trace)
      if (!m_prompts.count(r.qaId) && seen.insert(r.qaId).second) fresh.push_back(&r);
    constexpr size_t kBatch = 64;
    for (size_t b = 0; b < fresh.size(); b += kBatch) {
      std::vector<std::string> questions;
      for (size_t i = b; i < std::min(fresh.size(), b + kBatch); ++i) questions.push_back(fresh[i]->question);
      RAG_ASSIGN_OR_RETURN(std::vector<float> q, m_assets.embedder->embed(questions));
      RAG_ASSIGN_OR_RETURN(auto hits, m_assets.index->searchIvf(q, static_cast<int32_t>(m_retrieval->topk),
                                                                 m_retrieval->retrieval.nprobe > 0 ? m_retrieval->retrieval.nprobe : m_nprobe));
      for (size_t i = 0; i < questions.size(); ++i) {
        Variables vars{{std::string(kQuestionVar), questions[i]}};
        model::PassageVariables passages;
        std::string& text = vars[m_retrieval->outputVar];
        for (int64_t id : hits[i]) {
          if (id < 0) continue;
          RAG_ASSIGN_OR_RETURN(Passage p, m_reader.passage(id));
          model::PassageText t = model::passageText(p);
          text += t.text;
          passages[m_retrieval->outputVar].push_back(std::move(t));
        }
        RAG_ASSIGN_OR_RETURN(std::vector<model::PromptPiece> pieces,
                             model::promptPieces(m_generation->promptTemplate, vars, passages));
        m_prompts[fresh[b + i]->qaId] = model::tokenizePieces(*m_assets.tokenizer, pieces).tokens;
      }
    }
    std::vector<const std::vector<int32_t>*> out;
    for (const workload::TraceRequest& r : trace) out.push_back(&m_prompts.at(r.qaId));
    return out;
  }

private:
  const ServingAssets& m_assets;
  corpus::QaPromptReader m_reader;
  int64_t m_nprobe;
  const WorkflowNode* m_retrieval = nullptr;
  const WorkflowNode* m_generation = nullptr;
  std::unordered_map<int64_t, std::vector<int32_t>> m_prompts;
};

constexpr int32_t kBlockSize = 16;  // the runner's KV block (RunnerParams::blockSize)

struct SimResult {
  double hitRate = 0;
  int64_t evictedBlocks = 0;
  int64_t skipped = 0;  // prompts longer than the whole cache: served without caching
};

// The prompts in order through a RadixCache of `blocks` compute blocks under `policy`.
Result<SimResult> simulate(std::span<const std::vector<int32_t>* const> prompts, int32_t blocks, const std::string& policy,
                           const memory::RecomputeCost& cost) {
  // The cache only keeps block ids; one layer of one head of width 1 keeps the storage small.
  RAG_ASSIGN_OR_RETURN(auto pool, memory::KvPool::create({.layers = 1, .kvHeads = 1, .headDim = 1,
                                                          .blockSize = kBlockSize, .computeBlocks = blocks}));
  RAG_ASSIGN_OR_RETURN(auto evictionPolicy, memory::makeEvictionPolicy(policy));
  memory::RadixCache cache(*pool, std::move(evictionPolicy));
  cache.setRecomputeCost([&cost](int64_t prefix, int64_t n) { return cost.seconds(prefix, n); });
  pool->setReclaimer([&cache](int32_t n) { return cache.evict(n); });
  SimResult r;
  for (const std::vector<int32_t>* p : prompts) {
    const int64_t len = static_cast<int64_t>(p->size());
    memory::PrefixMatch m = cache.match(*p, {.maxTokens = len - 1});
    const int32_t need = static_cast<int32_t>((len + kBlockSize - 1) / kBlockSize) - static_cast<int32_t>(m.blocks.size());
    std::optional<std::vector<int32_t>> fresh = pool->allocate(need);
    if (fresh) {
      std::vector<int32_t> table = m.blocks;
      table.insert(table.end(), fresh->begin(), fresh->end());
      cache.insert(*p, table);
      pool->release(*fresh);  // the cache retained what it keeps; the rest goes back
    } else {
      ++r.skipped;
    }
    if (m.node != memory::kNoPrefixNode) cache.unlock(m.node);  // the match's blocks are the cache's
  }
  const memory::PrefixCacheStats s = cache.stats();
  r.hitRate = s.hitRate();
  r.evictedBlocks = s.evictedBlocks;
  return r;
}

void writeServe(JsonWriter& w, const RunFigures& f) {
  w.beginObject();
  w.key("prefix_cache").value(f.stats.prefixCacheOn);
  w.key("requests").value(f.m.requests).key("completed").value(f.m.completed);
  w.key("ttft_ms").beginObject();
  w.key("p50").value(percentile(f.ttft, 0.5) * 1e3).key("p99").value(percentile(f.ttft, 0.99) * 1e3);
  w.endObject();
  // Node runs whose prompt the cache held at least half of, and the others.
  w.key("ttft_p50_ms_by_prompt").beginObject();
  w.key("mostly_cached").value(percentile(f.ttftMostlyCached, 0.5) * 1e3);
  w.key("mostly_computed").value(percentile(f.ttftMostlyComputed, 0.5) * 1e3);
  w.key("mostly_cached_runs").value(static_cast<int64_t>(f.ttftMostlyCached.size()));
  w.key("mostly_computed_runs").value(static_cast<int64_t>(f.ttftMostlyComputed.size()));
  w.endObject();
  w.key("latency_s").beginObject();
  w.key("mean").value(f.m.meanLatency).key("p50").value(f.m.p50Latency).key("p99").value(f.m.p99Latency);
  w.endObject();
  w.key("throughput_rps").value(f.m.throughput);
  w.key("accuracy").value(f.m.accuracy);
  w.key("hit_rate").value(f.stats.prefixHitRate());
  w.key("hit_tokens").value(f.stats.prefixHitTokens).key("queried_tokens").value(f.stats.prefixQueriedTokens);
  w.key("evicted_blocks").value(f.stats.prefixEvictedBlocks);
  w.key("generation_busy_ms_per_request").value(f.generationBusyPerRequest * 1e3);
  w.endObject();
}

}  // namespace

int cmdBenchPrefix(Args& args) {
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const bool quick = args.flag("quick");
  // Long enough for the cache to warm up (a short trace is mostly first sightings); --quick
  // plays the same requests faster.
  auto requests = args.getInt("requests", 800);
  auto rate = args.getDouble("rps", quick ? 40.0 : 16.0);
  auto simRequests = args.getInt("sim-requests", quick ? 400 : 2000);
  auto seed = args.getInt("seed", 1);
  auto nprobe = args.getInt("nprobe", 128);
  const std::string popularity = args.getOr("popularity", "zipf:1.1");
  const std::string policiesArg = args.getOr("policies", "lru,lfu,pgdsf");
  const std::string split = args.getOr("split", "test");
  const std::string jsonPath = args.getOr("json", "");
  auto serving = readServingParams(args, "hedra");
  if (!serving) return fail(serving.status());
  for (auto* r : {&requests, &simRequests, &seed, &nprobe})
    if (!*r) return fail(r->status());
  if (!rate) return fail(rate.status());
  if (Status st = args.finish(); !st) return fail(st);
  if (*requests < 1 || *simRequests < 1) return fail(Status::invalidArgument("--requests and --sim-requests must be at least 1"));
  if (!(*rate > 0)) return fail(Status::invalidArgument("--rps must be a positive request rate"));
  if (*nprobe < 1) return fail(Status::invalidArgument("--nprobe must be at least 1"));
  std::vector<std::string> policies;
  {
    std::stringstream in(policiesArg);
    for (std::string p; std::getline(in, p, ',');) {
      if (p.empty()) continue;
      if (auto e = memory::makeEvictionPolicy(p); !e) return fail(e.status().withContext("--policies"));
      policies.push_back(p);
    }
  }
  auto pop = workload::parsePopularity(popularity);
  if (!pop) return fail(pop.status().withContext("--popularity"));

  auto items = workload::loadQaItems(corpusPath, split);
  if (!items) return fail(items.status());
  serving->nprobe = *nprobe;
  std::fprintf(stderr, "loading the model, the embedder and the passage index...\n");
  auto assets = loadServingAssets(*serving, corpusPath);
  if (!assets) return fail(assets.status());
  const WorkflowGraph oneshot = benchBuiltin(Workflow::OneShot);
  const Stopwatch wall;

  // ---- serving, cache off then on ----
  workload::TraceParams tp{.rate = *rate, .requests = *requests, .popularity = *pop, .seed = static_cast<uint64_t>(*seed),
                           .split = split};
  auto trace = workload::makeWorkloadTrace(tp, *items);
  if (!trace) return fail(trace.status());
  std::vector<RunFigures> runs;
  for (bool on : {false, true}) {
    ServingParams p = *serving;
    p.prefixCache = on;
    auto f = serveRun(*assets, corpusPath, p, *trace, [&](const workload::TraceRequest&) { return &oneshot; }, 1.0);
    if (!f) return fail(f.status().withContext(std::string("prefix cache ") + (on ? "on" : "off")));
    std::fprintf(stderr, "[serve] cache %-3s ttft p50 %.1f ms p99 %.1f ms  %.2f req/s  hit rate %.3f\n", on ? "on" : "off",
                 percentile(f->ttft, 0.5) * 1e3, percentile(f->ttft, 0.99) * 1e3, f->m.throughput,
                 f->stats.prefixHitRate());
    runs.push_back(std::move(*f));
  }
  // PGDSF's cost: the prefill speed the cache-on run measured.
  const memory::RecomputeCost cost(runs.back().stats.prefillSecondsPerToken, runs.back().stats.prefillSecondsPerPair);

  // ---- hit rates by policy, cache size and popularity ----
  auto reader = corpus::QaPromptReader::open(corpusPath);
  if (!reader) return fail(reader.status());
  OneShotPrompts prompts(**assets, std::move(*reader), oneshot, *nprobe);
  struct Row {
    std::string popularity;
    int64_t distinctTokens = 0, totalTokens = 0;
    std::map<double, std::map<std::string, SimResult>> bySize;
  };
  std::vector<Row> rows;
  const double sizes[] = {0.05, 0.10, 0.20};
  for (const char* popName : {"uniform", "zipf:1.1", "temporal"}) {
    workload::TraceParams sp = tp;
    sp.requests = *simRequests;
    sp.popularity = *workload::parsePopularity(popName);
    auto t = workload::makeWorkloadTrace(sp, *items);
    if (!t) return fail(t.status());
    auto ps = prompts.of(*t);
    if (!ps) return fail(ps.status());
    Row row;
    row.popularity = popName;
    row.distinctTokens = distinctBlocks(*ps, kBlockSize) * kBlockSize;
    for (const std::vector<int32_t>* p : *ps) row.totalTokens += static_cast<int64_t>(p->size());
    for (double size : sizes) {
      const auto blocks = static_cast<int32_t>(std::max<int64_t>(1, std::llround(size * static_cast<double>(row.distinctTokens) / kBlockSize)));
      for (const std::string& policy : policies) {
        auto r = simulate(*ps, blocks, policy, cost);
        if (!r) return fail(r.status());
        row.bySize[size][policy] = *r;
      }
    }
    std::fprintf(stderr, "[hit rates] %-9s %lld requests, %lld distinct prompt tokens of %lld\n", popName,
                 static_cast<long long>(*simRequests), static_cast<long long>(row.distinctTokens),
                 static_cast<long long>(row.totalTokens));
    rows.push_back(std::move(row));
  }

  std::ostringstream out;
  JsonWriter w(out, true);
  w.beginObject();
  w.key("settings").beginObject();
  w.key("workflow").value("oneshot").key("popularity").value(popularity).key("rps").value(*rate);
  w.key("requests").value(*requests).key("sim_requests").value(*simRequests).key("seed").value(*seed);
  w.key("nprobe").value(*nprobe).key("mode").value(servePolicyName(serving->policy));
  w.key("eviction").value(serving->evictionPolicy).key("block_tokens").value(int64_t{kBlockSize});
  w.key("model").value(serving->modelDir.string()).key("dtype").value(serving->dtype);
  w.key("ttft_means").value("a generation node's start to its first token");
  w.endObject();
  const RunFigures &off = runs[0], &on = runs[1];
  const double p50Off = percentile(off.ttft, 0.5), p50On = percentile(on.ttft, 0.5);
  w.key("ttft_p50_ms").beginObject().key("on").value(p50On * 1e3).key("off").value(p50Off * 1e3).endObject();
  w.key("ttft_p99_ms").beginObject();
  w.key("on").value(percentile(on.ttft, 0.99) * 1e3).key("off").value(percentile(off.ttft, 0.99) * 1e3);
  w.endObject();
  w.key("ttft_p50_off_over_on").value(p50On > 0 ? p50Off / p50On : 0.0);
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  w.key("ttft_mean_ms").beginObject().key("on").value(mean(on.ttft) * 1e3).key("off").value(mean(off.ttft) * 1e3).endObject();
  w.key("throughput_rps").beginObject().key("on").value(on.m.throughput).key("off").value(off.m.throughput).endObject();
  w.key("hit_rate").value(on.stats.prefixHitRate());
  w.key("serve").beginObject();
  w.key("off");
  writeServe(w, off);
  w.key("on");
  writeServe(w, on);
  w.endObject();
  w.key("prefill_cost").beginObject();
  w.key("seconds_per_token").value(on.stats.prefillSecondsPerToken).key("seconds_per_pair").value(on.stats.prefillSecondsPerPair);
  w.endObject();
  w.key("hit_rates").beginObject();
  for (const Row& row : rows) {
    w.key(row.popularity).beginObject();
    w.key("distinct_prompt_tokens").value(row.distinctTokens).key("prompt_tokens").value(row.totalTokens);
    for (const auto& [size, byPolicy] : row.bySize) {
      std::ostringstream k;
      k << std::lround(size * 100) << "%";
      w.key(k.str()).beginObject();
      for (const auto& [policy, r] : byPolicy) w.key(policy).value(r.hitRate);
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
