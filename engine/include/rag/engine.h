// The engine facade: what the workbench and the CLI hold. One Engine owns the worker pool,
// the trace ring and the corpus it serves from; every call that does work runs on the pool
// and returns a future, so a GUI thread never waits on it.
//
//   rag::EngineParams params = rag::defaultEngineParams();
//   params.corpus = "/path/corpus.db";
//   rag::Result<std::unique_ptr<rag::Engine>> engine = rag::Engine::create(params);
//   if (!engine) return fail(engine.status());
//   std::future<rag::Result<rag::QaItem>> f = (*engine)->lookupQa(42);
//   ...
//   std::vector<rag::TraceEvent> spans;
//   (*engine)->drainTrace(spans);   // what the workers did, for a timeline or a JSON export
//
// Later issues add request submission (RAGraph workflows), generation and retrieval here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "rag/corpus.h"
#include "rag/status.h"
#include "rag/trace.h"

namespace rag {

struct EngineParams {
  std::filesystem::path corpus;   // the corpus database to serve from
  size_t workerThreads = 0;       // 0: one per core
  size_t traceCapacity = 1 << 16; // events buffered between drains; more are dropped and counted
};

EngineParams defaultEngineParams();  // corpus = defaultCorpusLocation()

class Engine {
public:
  // Opens the corpus (checking its schema) and starts the workers.
  static Result<std::unique_ptr<Engine>> create(const EngineParams& params);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const CorpusStats& corpusStats() const;

  // Ids of QA items of a split ("train" | "dev" | "test"), optionally of one type, in id order.
  std::future<Result<std::vector<int64_t>>> listQa(std::string split, std::string type = {});
  // One QA item with its gold passages, read on a worker (traced as a "user" span).
  std::future<Result<QaItem>> lookupQa(int64_t qaId, uint32_t requestId = 0);

  // Moves buffered trace events (oldest first) to `out`; returns how many.
  size_t drainTrace(std::vector<TraceEvent>& out);
  std::vector<std::string> traceLaneNames() const;
  uint64_t droppedTraceEvents() const;

  // Finishes queued work and stops the workers; later calls fail with Cancelled.
  void shutdown();

private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag
