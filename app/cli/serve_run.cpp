#include "serve_run.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <thread>
#include <unordered_set>

#include "core/clock.h"
#include "retrieval/bm25_index.h"
#include "memory/eviction_policy.h"
#include "corpus/qa_prompt.h"
#include "model_choice.h"
#include "retriever.h"
#include "sched/step_device.h"
#include "workload/driver.h"

namespace rag::cli {

Status prepareLexicalIndex(const std::filesystem::path& corpus, std::span<const WorkflowGraph* const> graphs) {
  const bool lexical = std::any_of(graphs.begin(), graphs.end(), [](const WorkflowGraph* g) {
    return std::any_of(g->nodes().begin(), g->nodes().end(), [](const WorkflowNode& n) {
      return n.kind == NodeKind::Retrieval && n.retrieval.usesBm25();
    });
  });
  if (!lexical) return Status::ok();
  auto say = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  return retrieval::Bm25Index::openOrBuild(corpus, {}, say).status();
}

Result<ServingParams> readServingParams(Args& args, const std::string& defaultMode) {
  ServingParams p;
  RAG_ASSIGN_OR_RETURN(ModelChoice choice, readModelChoice(args, /*allowSynthetic=*/false));
  p.modelDir = choice.dir;
  p.dtype = choice.dtype;
  p.device = choice.device;
  p.encoderDevice = args.getOr("encoder-device", "cpu");
  RAG_ASSIGN_OR_RETURN(model::EncoderBackendFactory encoder, encoderBackendFor(p.encoderDevice));
  RAG_ASSIGN_OR_RETURN(int64_t minTexts, args.getInt("encoder-gpu-min", 1));
  if (minTexts < 1 || minTexts > 65536)
    return Status::invalidArgument("--encoder-gpu-min takes 1 to 65536 texts (the smallest batch the GPU encoder takes)");
  if (minTexts > 1 && !encoder)
    return Status::invalidArgument("--encoder-gpu-min applies to a GPU encoder: add --encoder-device cuda");
  p.encoderDeviceMinTexts = static_cast<int32_t>(minTexts);
  RAG_ASSIGN_OR_RETURN(p.embedderDir, readEmbedderDir(args));
  if (auto base = args.get("index")) p.indexBase = *base;
  RAG_ASSIGN_OR_RETURN(p.policy, parseServePolicy(args.getOr("mode", defaultMode)));
  RAG_ASSIGN_OR_RETURN(int64_t gen, args.getInt("generation-threads", 1));
  RAG_ASSIGN_OR_RETURN(int64_t ret, args.getInt("retrieval-threads", 1));
  if (gen < 1 || ret < 1) return Status::invalidArgument("--generation-threads and --retrieval-threads must be at least 1");
  p.generationThreads = static_cast<int32_t>(gen);
  p.retrievalThreads = static_cast<int32_t>(ret);
  RAG_ASSIGN_OR_RETURN(int64_t running, args.getInt("max-running", 0));
  RAG_ASSIGN_OR_RETURN(int64_t rows, args.getInt("max-batch-tokens", 0));
  if (running < 0 || running > 4096 || rows < 0 || rows > 65536)
    return Status::invalidArgument("--max-running takes 1 to 4096 sequences and --max-batch-tokens 1 to 65536 rows a step "
                                   "(0 or leaving them out: the device's default, 64 and 512 on the CPU, 256 and 2048 on a GPU)");
  p.maxRunningSequences = static_cast<int32_t>(running);
  p.maxBatchTokens = static_cast<int32_t>(rows);
  RAG_ASSIGN_OR_RETURN(p.subStageSeconds, args.getDouble("substage-ms", 0.0));
  p.subStageSeconds /= 1000.0;
  p.deterministic = args.flag("deterministic");
  RAG_ASSIGN_OR_RETURN(p.specLoadThreshold, args.getDouble("spec-load", p.specLoadThreshold));
  if (!(p.specLoadThreshold >= 0.0))
    return Status::invalidArgument("--spec-load must be a share >= 0 (0.5: speculate while the worker doing it idles half the time; "
                                   "above 1: always, within the request counts)");
  RAG_ASSIGN_OR_RETURN(p.prefixCache, onOff(args, "prefix-cache", true, "on or off"));
  p.evictionPolicy = args.getOr("eviction", p.evictionPolicy);
  if (Result<std::unique_ptr<memory::EvictionPolicy>> e = memory::makeEvictionPolicy(p.evictionPolicy); !e)
    return e.status().withContext("--eviction");  // before anything loads
  RAG_ASSIGN_OR_RETURN(int64_t hostMb, args.getInt("host-kv-mb", 0));
  if (hostMb < 0) return Status::invalidArgument("--host-kv-mb must be 0 (no host tier) or more");
  p.hostKvBytes = hostMb << 20;
  const std::string attention = args.getOr("graph-attention", "dependency");
  if (attention != "dependency" && attention != "causal")
    return Status::invalidArgument("--graph-attention takes dependency (DepCache's prefix trees under the ancestor mask) "
                                   "or causal (flat paths), not '" + attention + "'");
  p.dependencyAttention = attention == "dependency";
  RAG_ASSIGN_OR_RETURN(p.graphReencode, onOff(args, "gkvr", true, "on (cached subgraph KV re-encoded to its offset) or off (the ablation)"));
  RAG_ASSIGN_OR_RETURN(p.blockAttention,
                       onOff(args, "block-attention", false,
                             "on (each retrieved passage a block whose KV is computed once, stored and re-encoded; for a "
                             "block-fine-tuned model such as datasets/models/rag-llama-block) or off (one causal prefill)"));
  RAG_ASSIGN_OR_RETURN(int64_t storeMb, args.getInt("block-store-mb", p.blockStoreBytes >> 20));
  if (storeMb < 0) return Status::invalidArgument("--block-store-mb must be 0 (no disk tier) or more");
  p.blockStoreBytes = storeMb << 20;
  return p;
}

double ceilingRps(const WorkPerRequest& work, double genThreads, double retThreads, double cores) {
  double c = std::numeric_limits<double>::infinity();
  for (double seconds : {work.generation, work.retrieval, work.embedding})
    if (seconds > 0) c = std::min(c, 1.0 / seconds);
  const double threadSeconds = work.generation * std::min(genThreads, cores) +
                               (work.retrieval + work.embedding) * std::min(retThreads, cores);
  if (threadSeconds > 0) c = std::min(c, cores / threadSeconds);
  return std::isfinite(c) ? c : 0.0;
}

int64_t distinctBlocks(std::span<const std::vector<int32_t>* const> prompts, int32_t blockSize) {
  std::unordered_set<uint64_t> seen;
  const auto bs = static_cast<size_t>(blockSize);
  for (const std::vector<int32_t>* p : prompts) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the prefix, one value per block end
    for (size_t b = 0; b + bs <= p->size(); b += bs) {
      for (size_t t = b; t < b + bs; ++t) {
        h ^= static_cast<uint32_t>((*p)[t]);
        h *= 1099511628211ull;
      }
      seen.insert(h);
    }
  }
  return static_cast<int64_t>(seen.size());
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

namespace {

// `now`'s counters less `before`'s (what a run did after its priming); levels, gauges and the
// measured prefill speed as they are now. (gpuCacheHitRate is a share since serving started.)
ServingStats countersSince(ServingStats now, const ServingStats& before) {
  now.finishedRequests -= before.finishedRequests;
  now.subStages -= before.subStages;
  now.generationBusySeconds -= before.generationBusySeconds;
  now.retrievalBusySeconds -= before.retrievalBusySeconds;
  now.embeddingBusySeconds -= before.embeddingBusySeconds;
  now.generationSteps -= before.generationSteps;
  now.generationRows -= before.generationRows;
  now.generationForwardSeconds -= before.generationForwardSeconds;
  now.generationRunnerSeconds -= before.generationRunnerSeconds;
  now.prefixQueriedTokens -= before.prefixQueriedTokens;
  now.prefixHitTokens -= before.prefixHitTokens;
  now.prefixEvictedBlocks -= before.prefixEvictedBlocks;
  now.kvBlocksToHost -= before.kvBlocksToHost;
  now.kvBlocksToCompute -= before.kvBlocksToCompute;
  now.depSegmentTokens -= before.depSegmentTokens;
  now.depHitTokens -= before.depHitTokens;
  now.blockTokens -= before.blockTokens;
  now.blockHitTokens -= before.blockHitTokens;
  now.blockStoreHitTokens -= before.blockStoreHitTokens;
  return now;
}

// Answers each of `prime` once through `engine`, at most `inFlight` live at a time, and waits for
// them; their results are dropped (a request that fails here fails again, counted, in the run).
Status primeEngine(Engine& engine, std::span<const workload::TraceRequest> prime, const GraphFor& graphFor,
                   size_t inFlight) {
  std::deque<RequestHandle> live;
  for (const workload::TraceRequest& r : prime) {
    if (live.size() >= inFlight) {
      (void)live.front().wait();
      live.pop_front();
    }
    Result<RequestHandle> h = engine.submit(r.question, *graphFor(r));
    if (!h) return h.status().withContext("priming the engine (--prime off serves the run from cold caches)");
    live.push_back(std::move(*h));
  }
  for (RequestHandle& h : live) (void)h.wait();
  return Status::ok();
}

}  // namespace

Result<RunFigures> serveRun(const std::shared_ptr<const ServingAssets>& assets, const std::filesystem::path& corpus,
                            const ServingParams& params, std::span<const workload::TraceRequest> trace,
                            const GraphFor& graphFor, double slo, TraceSink traceOut,
                            const ResultSink& onResult, std::span<const workload::TraceRequest> prime) {
  EngineParams ep;
  ep.corpus = corpus;
  ep.workerThreads = 1;
  ep.serving = params;
  ep.assets = assets;
  ep.traceCapacity = traceOut.events ? (1u << 22) : 2;
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(ep));
  for (const workload::TraceRequest& r : trace)
    if (!graphFor(r))
      return Status::invalidArgument("the trace asks for workflow " + std::string(workflowName(r.workflow)) +
                                     ", which this run was not given");
  for (const workload::TraceRequest& r : prime)
    if (!graphFor(r)) return Status::invalidArgument("a priming request has no workflow in this run");
  RunFigures f;
  ServingStats before;
  if (!prime.empty()) {
    const uint64_t primeStart = nowNs();
    // Half the admission limit in flight: batches form, and no request is refused.
    const size_t inFlight = static_cast<size_t>(std::clamp(params.maxLiveRequests / 2, 1, 32));
    RAG_RETURN_IF_ERROR(primeEngine(*engine, prime, graphFor, inFlight));
    before = engine->servingStats();
    std::vector<TraceEvent> dropped;  // the priming's trace events are not the run's
    engine->drainTrace(dropped);
    f.primeSeconds = static_cast<double>(nowNs() - primeStart) * 1e-9;
  }
  const uint64_t start = nowNs(), cpuStart = processCpuNs();
  std::vector<workload::Submission> subs = workload::replayTrace(
      trace, [&](const workload::TraceRequest& r) { return engine->submit(r.question, *graphFor(r)); });
  std::vector<RequestRecord> records;
  for (workload::Submission& s : subs) {
    if (!s.handle) {
      if (s.handle.status().code() != StatusCode::Busy) return s.handle.status();
      ++f.busy;
      continue;
    }
    RequestRecord rec;
    rec.requestId = s.handle->id();
    Result<RequestResult> r = s.handle->wait();
    if (onResult) onResult(s.index, r);
    rec.ok = r.isOk();
    if (!r && f.firstError.empty()) f.firstError = r.status().message();
    if (r) {
      rec.latencySeconds = r->latencySeconds;
      rec.correct = corpus::answerMatches(r->answer, trace[s.index].answers);
      rec.speculations = r->speculations;
      rec.specAccepted = r->specAccepted;
      rec.rollbacks = r->rollbacks;
      for (const StageTiming& st : r->stages)
        if (st.kind == NodeKind::Generation && st.firstTokenSeconds >= 0) {
          const double t = st.firstTokenSeconds - st.beginSeconds;
          f.ttft.push_back(t);
          (2 * st.cachedPromptTokens >= st.promptTokens && st.promptTokens > 0 ? f.ttftMostlyCached
                                                                                : f.ttftMostlyComputed)
              .push_back(t);
        }
    }
    records.push_back(std::move(rec));
  }
  f.m = computeRunMetrics(records, static_cast<int64_t>(trace.size()), slo,
                          static_cast<double>(nowNs() - start) * 1e-9);
  const uint64_t cpuEnd = processCpuNs();
  f.stats = countersSince(engine->servingStats(), before);
  f.subStages = f.stats.subStages;
  f.subStageBudget = f.stats.subStageBudgetSeconds;
  if (f.m.completed > 0) {
    const double n = static_cast<double>(f.m.completed);
    f.generationBusyPerRequest = f.stats.generationBusySeconds / n;
    f.retrievalBusyPerRequest = f.stats.retrievalBusySeconds / n;
    f.embeddingBusyPerRequest = f.stats.embeddingBusySeconds / n;
    f.cpuPerRequest = static_cast<double>(cpuEnd - cpuStart) * 1e-9 / n;
    f.ceilingRps = ceilingRps({f.generationBusyPerRequest, f.retrievalBusyPerRequest, f.embeddingBusyPerRequest},
                              params.generationThreads,
                              params.retrievalThreads, std::max(1u, std::thread::hardware_concurrency()));
  }
  if (traceOut.events) {
    engine->drainTrace(*traceOut.events);
    if (traceOut.lanes) *traceOut.lanes = engine->traceLanes();
  }
  return f;
}

}  // namespace rag::cli
