// The generation worker: one thread driving a ModelRunner (continuous batching, HedraRAG §5's
// "generation worker repeatedly invokes step"). The scheduler adds and cancels sequences through
// a mailbox; after every step the worker posts what each sequence produced. A sub-stage of
// generation is one step: new sequences join the batch at every step boundary.
//
// With a TurnLock (the Sequential policy) the worker takes turns with retrieval: it holds the
// lock while it decodes until every sequence present at the start of its turn has finished.
// With stageBatches (the FlashRag policy) generation is not split: the sequences waiting when
// the runner falls idle form one batch that runs to its end, and later ones wait for the next
// (a vLLM generate() call per stage batch, as FlashRAG's pipeline makes them).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/runner.h"
#include "sched/load_gauge.h"
#include "sched/mailbox.h"

namespace rag {
class TraceRing;
}

namespace rag::sched {

using JobKey = uint64_t;  // names one unit of work (one node run, or one speculation) of a request

struct GenerationJob {
  JobKey key = 0;
  uint32_t requestId = 0;
  model::SequenceRequest request;
  bool speculative = false;  // traced with kTraceSpeculative
};

struct GenerationUpdate {
  JobKey key = 0;
  std::string text;          // new text since the last update (stop strings held back)
  int32_t newTokens = 0;
  bool finished = false;
  model::FinishReason reason = model::FinishReason::None;
  std::string output;        // finished: the whole generated text
  int64_t generatedTokens = 0;
  Status error;              // the sequence could not be added
};

struct GenerationWorkerParams {
  int32_t threads = 1;       // BLAS threads
  TurnLock* turns = nullptr;
  bool stageBatches = false;
  TraceRing* ring = nullptr;
  LoadGauge* load = nullptr;  // told each step's time
  std::function<void(std::vector<GenerationUpdate>)> post;  // called on the worker thread
};

class GenerationWorker {
public:
  GenerationWorker(std::unique_ptr<model::ModelRunner> runner, GenerationWorkerParams params);
  ~GenerationWorker();  // stops the thread; queued sequences are dropped
  GenerationWorker(const GenerationWorker&) = delete;
  GenerationWorker& operator=(const GenerationWorker&) = delete;

  void add(GenerationJob job);
  void cancel(JobKey key);

  int32_t runningSequences() const { return m_running.load(std::memory_order_relaxed); }
  int32_t kvBlocksUsed() const { return m_kvUsed.load(std::memory_order_relaxed); }
  int32_t kvBlocksTotal() const { return m_kvTotal; }
  // Moving average of a step's wall time (a generation sub-stage), 0 before the first step.
  double stepSeconds() const { return m_stepSeconds.load(std::memory_order_relaxed); }

private:
  struct Command {
    bool cancel = false;
    GenerationJob job;
  };
  void loop();
  void applyCommands(std::vector<Command>& commands, std::vector<GenerationUpdate>& out);
  void stepOnce(std::vector<GenerationUpdate>& out);

  std::unique_ptr<model::ModelRunner> m_runner;
  GenerationWorkerParams m_params;
  Mailbox<Command> m_inbox;
  std::atomic<bool> m_stop{false};
  std::atomic<int32_t> m_running{0};
  std::atomic<int32_t> m_kvUsed{0};
  std::atomic<double> m_stepSeconds{0};
  int32_t m_kvTotal = 0;
  uint16_t m_lane = 0;
  struct Live {
    JobKey key;
    uint32_t requestId;
    bool speculative;
    int64_t generated = 0;  // tokens sampled so far
    std::string text;       // their text, as the events gave it
  };
  std::vector<std::pair<model::SeqId, Live>> m_live;  // small: a linear map
  std::vector<GenerationJob> m_waiting;               // stageBatches: for the next batch
  std::thread m_thread;
};

}  // namespace rag::sched
