// The generation worker: one thread driving a ModelRunner (continuous batching, HedraRAG §5's
// "generation worker repeatedly invokes step"). Its owner adds, cancels and retargets sequences
// through a mailbox; after every step the worker posts what each sequence produced. A sub-stage
// of generation is one step: new sequences join the batch at every step boundary.
//
// Retarget drives a live sequence instead of replacing it: the sequence is truncated to the
// first `keep` tokens of its prompt (its KV beyond them dropped) and continues on a new prompt
// tail, as a speculative run whose input changed (a rollback to the point of divergence). Each
// retarget bumps the job's epoch; updates carry the epoch they belong to, so a reader drops what
// the sequence posted before it was retargeted.
//
// Pacing (rag/engine.h's GenerationPacing): EveryStep admits new sequences at every step. Turns
// (the sequential policy) takes turns with retrieval on a TurnLock: it holds the lock while it
// decodes until every sequence present at the start of its turn has finished. StageBatches (the
// flashrag policy) does not split generation: the sequences waiting when the runner falls idle
// form one batch that runs to its end, and later ones wait for the next (a vLLM generate() call
// per stage batch, as FlashRAG's pipeline makes them).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/runner.h"
#include "sched/segment_kv.h"
#include "rag/engine.h"
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
  // A segmented prompt (DepCache's dependency prompt, Block-Attention's block prompt; request.prompt
  // = its tokens, request.mask its mask): with a prefix cache, its segments' KV is built through it
  // first (sched/segment_kv.h), and only its tail is prefilled with the request.
  std::optional<model::SegmentedPrompt> segmented = {};
};

struct GenerationUpdate {
  JobKey key = 0;
  uint32_t epoch = 0;        // the job's retarget count when this was posted
  std::string text;          // new text since the last update (stop strings held back)
  int32_t newTokens = 0;
  int64_t promptCachedTokens = -1;  // >= 0 on the update carrying the prompt's first token
  std::vector<SegmentKvUse> segments;  // a segmented prompt's, on that same update
  bool finished = false;
  model::FinishReason reason = model::FinishReason::None;
  std::string output;        // finished: the whole generated text
  int64_t generatedTokens = 0;
  Status error;              // the sequence could not be added
};

struct GenerationWorkerParams {
  int32_t threads = 1;       // BLAS threads
  GenerationPacing pacing = GenerationPacing::EveryStep;
  TurnLock* turns = nullptr;  // Turns: the lock shared with the retrieval worker
  TraceRing* ring = nullptr;
  LoadGauge* load = nullptr;  // told each step's time
  std::function<void(std::vector<GenerationUpdate>)> post;  // called on the worker thread
  bool graphReencode = true;  // SegmentKvBuilder's GKVR switch
  // Block-Attention's disk tier (memory/block_store.h); saved when the worker stops. Null: none.
  std::shared_ptr<memory::BlockStore> blockStore = nullptr;
};

class GenerationWorker {
public:
  GenerationWorker(std::unique_ptr<model::ModelRunner> runner, GenerationWorkerParams params);
  ~GenerationWorker();  // stops the thread; queued sequences are dropped
  GenerationWorker(const GenerationWorker&) = delete;
  GenerationWorker& operator=(const GenerationWorker&) = delete;

  void add(GenerationJob job);
  void cancel(JobKey key);
  // Continues job `key` on `job.request.prompt`, keeping the KV of its first `keep` tokens (which
  // must equal the old prompt's), under `epoch`. A job that has already ended starts afresh.
  void retarget(GenerationJob job, int64_t keep, uint32_t epoch);

  int32_t runningSequences() const { return m_running.load(std::memory_order_relaxed); }
  int32_t kvBlocksUsed() const { return m_kvUsed.load(std::memory_order_relaxed); }
  int32_t kvBlocksTotal() const { return m_kvTotal; }
  // Moving average of a step's wall time (a generation sub-stage), 0 before the first step.
  double stepSeconds() const { return m_stepSeconds.load(std::memory_order_relaxed); }
  // Totals since the worker started: where a step's time goes (the runner's forward pass, the
  // runner's step as a whole; the worker's whole step is its load gauge's busy time) and how
  // many rows it computed.
  struct StepTotals {
    int64_t steps = 0, rows = 0;
    double forwardSeconds = 0, runnerSeconds = 0;
  };
  StepTotals stepTotals() const;
  // The KV pool and prefix cache as of the last step.
  struct MemoryStats {
    model::KvPoolStats pool;
    memory::PrefixCacheStats cache;
    bool cacheOn = false;
    SegmentKvStats depSegments;    // dependency prompts' subgraphs through the cache
    SegmentKvStats blockSegments;  // block prompts' blocks through the cache and the block store
    memory::BlockStoreStats blockStore;
    double prefillPerRow = 0, prefillPerPair = 0;  // seconds (ModelRunner::recomputeCost)
  };
  MemoryStats memoryStats() const;
  // The prefix KV tree as of the last snapshot (PrefixCache::snapshot, taken with the memory
  // stats at most every kKvTreePeriodNs, and only while someone asked in the last second); empty
  // without a prefix cache. The first call after a pause may answer an older or empty tree.
  std::vector<memory::PrefixNodeInfo> kvTree() const;
  // Who holds each compute block of the KV pool (sched/kv_block_map.h) as of the last map, taken
  // with the memory stats at most every kKvBlocksPeriodNs and only while someone asked in the
  // last second. The first call after a pause may answer an older or empty map.
  std::vector<uint8_t> kvBlockOwners() const;
  // The block store's records as of the last list (taken with the memory stats at most every
  // kStorePeriodNs, only while someone asked in the last second); empty without a block store.
  std::vector<memory::BlockStoreRecordInfo> blockStoreRecords() const;

private:
  struct Command {
    enum class Kind : uint8_t { Add, Cancel, Retarget } kind = Kind::Add;
    GenerationJob job = {};
    int64_t keep = 0;     // Retarget
    uint32_t epoch = 0;   // Retarget
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
  mutable std::mutex m_totalsMutex;
  StepTotals m_totals;
  int32_t m_kvTotal = 0;
  mutable std::mutex m_memoryMutex;
  MemoryStats m_memory;
  uint64_t m_memoryAtNs = 0;  // when m_memory was taken (worker thread only)
  static constexpr uint64_t kKvTreePeriodNs = 200'000'000;
  std::vector<memory::PrefixNodeInfo> m_kvTree;   // under m_memoryMutex
  uint64_t m_kvTreeAtNs = 0;                       // worker thread only
  mutable std::atomic<uint64_t> m_kvTreeAskedNs{0};  // last kvTree() call
  bool kvTreeDue(uint64_t now) const;  // a snapshot was asked for and the last one is old
  static constexpr uint64_t kKvBlocksPeriodNs = 100'000'000;
  std::vector<uint8_t> m_kvBlocks;                     // under m_memoryMutex
  uint64_t m_kvBlocksAtNs = 0;                         // worker thread only
  mutable std::atomic<uint64_t> m_kvBlocksAskedNs{0};  // last kvBlockOwners() call
  bool kvBlocksDue(uint64_t now) const;
  static constexpr uint64_t kStorePeriodNs = 500'000'000;
  std::vector<memory::BlockStoreRecordInfo> m_storeRecords;  // under m_memoryMutex
  uint64_t m_storeAtNs = 0;                                   // worker thread only
  mutable std::atomic<uint64_t> m_storeAskedNs{0};            // last blockStoreRecords() call
  bool storeDue(uint64_t now) const;
  void refreshMemoryStats();
  uint16_t m_lane = 0;
  struct Live {
    JobKey key;
    uint32_t requestId;
    bool speculative;
    uint32_t epoch = 0;
    int64_t generated = 0;  // tokens sampled so far
    std::string text;       // their text, as the events gave it
    int64_t segmentHitTokens = -1;  // a segmented prompt: its segments' tokens found in the cache
    std::vector<SegmentKvUse> segments = {};  // ... and where each segment's KV came from
  };
  bool addToRunner(GenerationJob& job, uint32_t epoch, std::vector<GenerationUpdate>& out);
  // Adds the sequences of segmented prompts whose segments' KV is ready.
  void admitBuilt(std::vector<GenerationUpdate>& out);
  void postError(const GenerationJob& job, uint32_t epoch, Status error, std::vector<GenerationUpdate>& out);
  std::vector<memory::PendingPrompt> pendingPrompts() const;
  static constexpr size_t kMaxBuildingTickets = 8;
  bool roomForTicket(const model::SegmentedPrompt& p) const;
  std::unique_ptr<SegmentKvBuilder> m_segments;  // with a prefix cache
  struct Building {
    SegmentKvBuilder::Ticket ticket;
    GenerationJob job;
    uint32_t epoch;
  };
  std::vector<Building> m_building;
  void applyRetarget(Command& c, std::vector<GenerationUpdate>& out);
  std::vector<std::pair<model::SeqId, Live>> m_live;  // small: a linear map
  std::vector<GenerationJob> m_waiting;               // stageBatches: for the next batch
  std::thread m_thread;
};

}  // namespace rag::sched
