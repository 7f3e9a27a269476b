// What the serving benchmarks share: the serving options of the command line, and one run of a
// workload through a fresh Engine over shared assets, measured (latency, throughput, SLO,
// accuracy, TTFT, the workers' busy time, the prefix cache).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "args.h"
#include "rag/engine.h"
#include "rag/run_store.h"
#include "workload/workload_trace.h"

namespace rag::cli {

// Model, embedder, index, policy, thread, speculation and KV-memory options:
// --model --dtype --embedder --index --mode --generation-threads --retrieval-threads
// --substage-ms --deterministic --spec-load --prefix-cache on|off --eviction POLICY --host-kv-mb N.
Result<ServingParams> readServingParams(Args& args, const std::string& defaultMode);

// Before serving `graphs`: when one searches with BM25 (a bm25 or hybrid retrieval node), opens
// the BM25 index beside `corpus`, building it first where it is missing or was built from another
// corpus and saying so on stderr, so that this happens before any request, not inside the first
// one (the retrieval worker then opens it as it is).
Status prepareLexicalIndex(const std::filesystem::path& corpus, std::span<const WorkflowGraph* const> graphs);

struct RunFigures {
  std::string workflow, mode;
  double rps = 0;
  int64_t busy = 0, subStages = 0;
  double subStageBudget = 0;  // the last Eq. (1) budget (sub-stage policies)
  // Each worker thread's busy time per completed request (retrieval: the search, and the queries'
  // embedding unless the embedding thread did it), and the rate at which this run's work per
  // request would fill a worker thread (it steps one sub-stage at a time) or the cores (every
  // thread's seconds). The work per request depends on the load (batching, shared scans), so
  // this is the capacity at this run's load.
  double generationBusyPerRequest = 0, retrievalBusyPerRequest = 0, embeddingBusyPerRequest = 0;
  // The process's CPU time per completed request over the run (every thread: workers, their
  // teams, the scheduler, the load generator); reported beside the busy times, not a bound's input.
  double cpuPerRequest = 0;
  double ceilingRps = 0;
  // Time to first token of every generation node run (its start to its first token), seconds.
  std::vector<double> ttft;
  // The same split by how much of the prompt the prefix cache held: at least half, or less.
  std::vector<double> ttftMostlyCached, ttftMostlyComputed;
  ServingStats stats;  // at the end of the run; its counters since the priming (gauges as they are)
  double primeSeconds = 0;  // how long the priming took (0: none)
  RunMetrics m;
  std::string firstError;  // why the first failed request failed ("" when none did)
};

// Seconds of work per request on each worker thread: generation, retrieval's search thread, and
// the embedding thread (the policy's embedAhead; 0 when the search thread embeds).
struct WorkPerRequest {
  double generation = 0, retrieval = 0, embedding = 0;
};
// The highest request rate at which that work fits: each thread at most 1 / its busy time, all of
// them on `cores` at most cores / their thread-seconds (the retrieval and embedding threads each
// with a team of `retThreads`). Busy time is wall time at work, so a thread preempted mid-work (by
// another worker, or by the host: steal time on a VM) counts that time as its own: the bound is
// what this run's threads could do on the cores they got. 0: no work.
double ceilingRps(const WorkPerRequest& work, double genThreads, double retThreads, double cores);

// The graph a request of a trace runs (non-null for every request of the trace).
using GraphFor = std::function<const WorkflowGraph*(const workload::TraceRequest&)>;

// One run: `trace` replayed (workload/driver.h) through a new engine over `assets` under
// `params`, each request through graphFor(it); `traceOut` (optional) receives the engine's trace
// events and lane names. With `prime`, the engine first answers each request of `prime` once
// (closed loop, a few in flight), unmeasured: the run's figures, trace and worker counters start
// after it, from warm caches (prefix KV, query embeddings, the scheduler's estimates).
struct TraceSink {
  std::vector<TraceEvent>* events = nullptr;
  std::vector<TraceLane>* lanes = nullptr;
};
// Called with each request's result, in trace order (trace index, result).
using ResultSink = std::function<void(size_t, const Result<RequestResult>&)>;
Result<RunFigures> serveRun(const std::shared_ptr<const ServingAssets>& assets, const std::filesystem::path& corpus,
                            const ServingParams& params, std::span<const workload::TraceRequest> trace,
                            const GraphFor& graphFor, double slo, TraceSink traceOut = {},
                            const ResultSink& onResult = {}, std::span<const workload::TraceRequest> prime = {});

double percentile(std::vector<double> v, double q);  // nearest rank; 0 for an empty vector
// Blocks a radix tree holding every one of `prompts` would hold: their distinct full-block
// prefixes of `blockSize` tokens (what `bench prefix` and `bench depcache` size caches by).
int64_t distinctBlocks(std::span<const std::vector<int32_t>* const> prompts, int32_t blockSize);

}  // namespace rag::cli
