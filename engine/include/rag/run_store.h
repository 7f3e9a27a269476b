// The run history: every serving run's settings, per-request results, metrics and trace, and the
// JSON of benches run from the workbench, in one SQLite file, so any past run can be reopened, its timeline scrubbed and its figures exported.
//
//   RAG_ASSIGN_OR_RETURN(rag::RunStore store, rag::RunStore::open("runs.db"));
//   RAG_ASSIGN_OR_RETURN(int64_t run, store.beginRun(settings));
//   RAG_RETURN_IF_ERROR(store.addRequests(run, finishedRecords));     // as requests finish
//   RAG_RETURN_IF_ERROR(store.finishRun(run, metrics, traceEvents, engine.traceLanes()));
//   RAG_ASSIGN_OR_RETURN(std::vector<rag::RunSummary> runs, store.listRuns());
//
// Each write is one transaction, so a crash never leaves half a batch; a run that never
// finished keeps the requests recorded so far (finished = false). A file written by a newer
// build (a higher schema version) is refused with SchemaMismatch, untouched.
// One RunStore is one connection: use it from one thread at a time (open another per thread).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "rag/request.h"
#include "rag/status.h"
#include "rag/trace.h"

namespace rag {

struct RunSettings {
  std::string workflow;      // the graph's name
  std::string workflowJson;  // the whole graph (WorkflowGraph::toJson)
  std::string mode;          // servePolicyName
  std::string split;         // QA split the questions came from ("" for free text)
  double rps = 0;            // Poisson arrival rate; 0: all at once
  int64_t requests = 0;
  int64_t nprobe = 0;
  double sloSeconds = 1.0;
};

struct RequestRecord {
  uint32_t requestId = 0;
  std::string question;
  std::string answer;
  std::vector<std::string> goldAnswers;  // empty: not a QA question (correct stays false)
  bool correct = false;
  bool ok = true;            // false: failed or cancelled, `error` says why
  std::string error;
  double latencySeconds = 0;
  int32_t speculations = 0, specAccepted = 0, rollbacks = 0;
  std::vector<StageTiming> stages;
};

struct RunMetrics {
  int64_t requests = 0, completed = 0, failed = 0;
  double meanLatency = 0, p50Latency = 0, p99Latency = 0;
  double throughput = 0;       // completed requests per second of wall time
  double sloAttainment = 0;    // share of all requests finished within the SLO
  double accuracy = 0;         // share of all requests whose answer holds a gold answer
  int64_t speculations = 0, specAccepted = 0, rollbacks = 0;
  double wallSeconds = 0;
};

// The figures of a set of finished requests (`requests` counts those that never finished too).
RunMetrics computeRunMetrics(std::span<const RequestRecord> records, int64_t requests, double sloSeconds,
                             double wallSeconds);

struct RunSummary {
  int64_t id = 0;
  std::string startedAt;  // UTC, ISO 8601
  RunSettings settings;
  RunMetrics metrics;     // zeros until finished
  bool finished = false;
};

// One finished `ragraph bench ...` run (the workbench's Reproduce page): what ran and the JSON it
// printed, kept whole so a past result can be reopened and plotted again.
struct BenchResult {
  int64_t id = 0;           // assigned by addBenchResult
  std::string name;         // the figure it reproduces, e.g. "dragon-fig6"
  std::string commandLine;  // the command as run, e.g. "ragraph bench dragon --quick --json"
  std::string startedAt;    // UTC, ISO 8601
  double seconds = 0;       // wall time of the bench
  std::string json;         // the bench's output, a JSON document
};

struct StoredTrace {
  std::vector<TraceEvent> events;
  std::vector<TraceLane> lanes;  // by lane id
};

class RunStore {
public:
  // Creates the file (and its directory) when missing. SchemaMismatch for a newer schema.
  static Result<RunStore> open(const std::filesystem::path& path);
  RunStore(RunStore&&) noexcept;
  RunStore& operator=(RunStore&&) noexcept;
  ~RunStore();

  const std::filesystem::path& path() const;
  Result<int64_t> beginRun(const RunSettings& settings);
  Status addRequests(int64_t run, std::span<const RequestRecord> records);
  Status finishRun(int64_t run, const RunMetrics& metrics, std::span<const TraceEvent> trace,
                   const std::vector<TraceLane>& lanes);
  Result<std::vector<RunSummary>> listRuns();  // newest first
  Result<std::vector<RequestRecord>> requests(int64_t run);
  Result<StoredTrace> trace(int64_t run);
  Status deleteRun(int64_t run);

  // Bench results. addBenchResult refuses (InvalidArgument) an empty name or a `json` that does
  // not parse as JSON, so the history never holds half an output; it returns the new id.
  Result<int64_t> addBenchResult(const BenchResult& result);
  Result<std::vector<BenchResult>> listBenchResults();  // newest first, JSON included
  Status deleteBenchResult(int64_t id);

private:
  struct Impl;
  explicit RunStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// The default history file: <data dir>/runs.db (next to the default corpus).
std::filesystem::path defaultRunStoreLocation();

}  // namespace rag
