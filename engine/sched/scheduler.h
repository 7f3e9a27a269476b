// The RAGraph scheduler (HedraRAG §4.2–4.5): one event-loop thread over every live request.
//
// Each cycle it takes what arrived (submissions, cancels), collects what the stage executors'
// workers reported (stage_executor.h: one executor per node kind, generation and retrieval
// today), advances each request's graph (variables, loop counters, the first matching edge), and
// dispatches the wavefront of ready nodes to their executors. Under a policy with speculation it
// also applies the transformations of §4.3 on partial outputs:
//   - a partial output of the running node (a retrieval's partial top-k, a generation's text so
//     far) starts the node that would follow it, speculatively, when that node reads the output,
//     its executor speculates and its stage has room (T_curr < τ·T_max, load_gauge.h);
//   - a Candidate (generation) is adopted when its node's real input equals the partial one,
//     retargeted (rolled back to where the prompts diverge and continued) when it differs, or
//     cancelled and restarted: a rollback either way. Results never depend on speculation;
//   - a Prefetch (retrieval) only warms its executor for the real run (the local cache that
//     orders the next retrieval's clusters).
// Node splitting is the executors' part: generation advances one decode step per sub-stage and
// retrieval one time-budgeted sub-stage (Eq. 1) at a time.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "memory/prefix_cache.h"
#include "rag/engine.h"
#include "sched/mailbox.h"
#include "sched/stage_executor.h"

namespace rag {
class TraceRing;
class ServingAssets;

// What a RequestHandle shares with the scheduler.
struct RequestHandle::Shared {
  uint32_t id = 0;
  mutable std::mutex mutex;
  mutable std::condition_variable cv;
  std::optional<Result<RequestResult>> result;
  std::string streamed;
};

}  // namespace rag

namespace rag::sched {

class GenerationExecutor;
class RetrievalExecutor;

class Scheduler {
public:
  static Result<std::unique_ptr<Scheduler>> create(std::shared_ptr<const ServingAssets> assets,
                                                   const ServingParams& params, TraceRing* ring,
                                                   RequestEventFn onEvent);
  ~Scheduler();  // cancels live requests, stops the executors
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  Result<RequestHandle> submit(std::string question, std::shared_ptr<const WorkflowGraph> graph);
  Status cancel(uint32_t requestId);
  ServingStats stats() const;
  std::vector<memory::PrefixNodeInfo> kvTree() const;  // GenerationWorker::kvTree
  KvBlockMap kvBlockMap() const;                       // GenerationWorker::kvBlockOwners and the host tier
  std::vector<BlockStoreEntry> blockStoreEntries() const;  // GenerationWorker::blockStoreRecords
  ClusterHeat clusterHeat() const;

private:
  struct Req;
  struct SubmitMsg {
    std::shared_ptr<RequestHandle::Shared> shared;
    std::string question;
    std::shared_ptr<const WorkflowGraph> graph;
    uint64_t submitNs = 0;
  };
  struct CancelMsg {
    uint32_t id = 0;
  };
  struct WorkPosted {};  // an executor has updates to collect
  using Message = std::variant<SubmitMsg, CancelMsg, WorkPosted>;

  Scheduler(std::shared_ptr<const ServingAssets> assets, const ServingParams& params, TraceRing* ring,
            RequestEventFn onEvent);
  Status start();
  void loop();
  void handle(SubmitMsg& m);
  void handle(CancelMsg& m);
  void handle(WorkPosted&) {}
  void handle(StageUpdate& u);
  StageExecutor& executor(NodeKind kind) { return *m_byKind[static_cast<size_t>(kind)]; }
  void beginNode(Req& r);
  void startNode(Req& r);
  // Records `output` as the current node's result and moves to the next node (or END).
  void finishNode(Req& r, NodeOutput output, bool speculative);
  void advance(Req& r);
  void adoptOrDropSpeculation(Req& r);
  void maybeSpeculate(Req& r, const NodeOutput& partial);
  void complete(Req& r);
  void fail(Req& r, const Status& why);
  void cancelWork(Req& r);
  void erase(uint32_t id);
  void emit(RequestEvent::Kind kind, const Req& r, std::string text = {});
  void traceNode(const Req& r, TraceStage stage, uint64_t beginNs, uint32_t work, uint8_t flags);
  JobKey newKey(uint32_t requestId, NodeKind kind);

  std::shared_ptr<const ServingAssets> m_assets;
  ServingParams m_params;
  TraceRing* m_ring;
  RequestEventFn m_onEvent;
  std::unique_ptr<TurnLock> m_turns;
  // The executors, in this order (m_byKind finds a node kind's; the retrieval executor also runs
  // Knowledge nodes). The typed pointers are for statistics.
  enum ExecutorSlot : size_t { kGenerationSlot, kRetrievalSlot, kCompressionSlot, kExecutorSlots };
  std::array<std::unique_ptr<StageExecutor>, kExecutorSlots> m_executors;  // owners
  std::array<StageExecutor*, kNodeKindCount> m_byKind{};
  GenerationExecutor* m_gen = nullptr;
  RetrievalExecutor* m_ret = nullptr;
  Mailbox<Message> m_inbox;
  std::unordered_map<uint32_t, std::unique_ptr<Req>> m_reqs;  // scheduler thread only
  struct Owner {
    uint32_t requestId = 0;
    NodeKind kind = NodeKind::Generation;
  };
  std::unordered_map<JobKey, Owner> m_keyOwner;                // scheduler thread only
  JobKey m_nextKey = 1;
  std::atomic<uint32_t> m_nextId{1};
  std::atomic<int32_t> m_live{0};
  std::atomic<int64_t> m_finished{0};
  std::atomic<bool> m_stop{false};
  std::mutex m_submitMutex;  // orders submit() against shutdown: nothing is queued after m_stop
  uint16_t m_lane = 0;         // scheduler cycles
  uint16_t m_requestLane = 0;  // one span per node run, per request (Request, Decode, RetrievalStep)
  std::thread m_thread;
};

}  // namespace rag::sched
