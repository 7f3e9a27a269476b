// The RAGraph scheduler (HedraRAG §4.2–4.5): one event-loop thread over every live request.
//
// Each cycle it takes what arrived (submissions, cancels, the workers' partial and final
// results), advances each request's graph (variables, loop counters, the first matching edge),
// and dispatches the wavefront of ready nodes: a Generation node becomes a sequence in the
// generation worker, a Retrieval node a search job in the retrieval worker. Under the Hedra
// policy it also applies the transformations of §4.3:
//   - speculative generation: when a partial top-k arrives (from the local cache or after a
//     sub-stage), fewer than specGenerationLimit requests are generating and the workers'
//     threads have been busy less than specLoadThreshold of the time (load_gauge.h), the next
//     Generation node starts on the partial passages; when the final top-k arrives, the
//     speculation is kept if its prompt is exactly the final prompt, else cancelled (its KV
//     freed) and the node restarted: a rollback. Results never depend on speculation.
//   - speculative retrieval: once a Generation node that feeds a Retrieval node has produced
//     specRetrievalMinTokens tokens, fewer than specRetrievalLimit searches are live and the
//     threads have room (the same gauge), its
//     partial text is searched; the result becomes the request's local cache, which orders the
//     real retrieval's clusters.
//   - similarity-aware order: every retrieval leaves a local cache (top-20, H_v, C) that the
//     request's next retrieval uses (RetrievalWorker).
// Node splitting is the workers' part: generation advances one decode step per sub-stage and
// retrieval one time-budgeted sub-stage (Eq. 1) at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "rag/engine.h"
#include "sched/generation_worker.h"
#include "sched/mailbox.h"
#include "sched/retrieval_worker.h"

namespace rag {
class TraceRing;
namespace model {
class LlamaModel;
class Tokenizer;
class TextEmbedder;
}  // namespace model
namespace retrieval {
class PassageIndex;
}
namespace corpus {
class QaPromptReader;
}
}  // namespace rag

namespace rag {

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

// The loaded model, tokenizer, embedder and passage index, shareable between engines (a
// benchmark runs several policies over one set).
struct ServingResources {
  std::shared_ptr<const model::LlamaModel> model;
  std::shared_ptr<const model::Tokenizer> tokenizer;
  std::shared_ptr<const model::TextEmbedder> embedder;
  std::shared_ptr<const retrieval::PassageIndex> index;
  std::filesystem::path corpus;
};

// Loads what `params` names. NotFound (naming the command that makes it) for a missing model,
// embedder or index; SchemaMismatch for an index built by another embedder.
Result<ServingResources> loadServingResources(const ServingParams& params, const std::filesystem::path& corpus);

class Scheduler {
public:
  static Result<std::unique_ptr<Scheduler>> create(ServingResources resources, const ServingParams& params,
                                                   TraceRing* ring, RequestEventFn onEvent);
  ~Scheduler();  // cancels live requests, stops the workers
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  Result<RequestHandle> submit(std::string question, std::shared_ptr<const WorkflowGraph> graph);
  Status cancel(uint32_t requestId);
  ServingStats stats() const;
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
  using Message = std::variant<SubmitMsg, CancelMsg, GenerationUpdate, RetrievalUpdate>;

  Scheduler(ServingResources resources, const ServingParams& params, TraceRing* ring, RequestEventFn onEvent);
  Status start();
  void loop();
  void handle(SubmitMsg& m);
  void handle(CancelMsg& m);
  void handle(GenerationUpdate& u);
  void handle(RetrievalUpdate& u);
  void startNode(Req& r);
  // Records `output` as the current node's result and moves to the next node (or END).
  void finishNode(Req& r, std::string output, int64_t work, bool speculative);
  void advance(Req& r);
  void adoptOrDropSpeculation(Req& r);
  void maybeSpeculateGeneration(Req& r, const std::vector<retrieval::SearchHit>& partial);
  void maybeSpeculateRetrieval(Req& r);
  void complete(Req& r);
  void fail(Req& r, const Status& why);
  void cancelWork(Req& r);
  void erase(uint32_t id);
  Result<std::string> formatDocs(const std::vector<retrieval::SearchHit>& hits);
  Result<model::SequenceRequest> sequenceFor(const WorkflowNode& node, const std::string& prompt, uint32_t requestId) const;
  void emit(RequestEvent::Kind kind, const Req& r, std::string text = {});
  void traceNode(const Req& r, TraceStage stage, uint64_t beginNs, uint32_t work, uint8_t flags);
  JobKey newKey(uint32_t requestId);
  bool hedraSpeculation() const;
  // T_curr < τ·T_max: the workers' threads have had idle time lately (the gauge as the loop last
  // sampled it).
  bool roomToSpeculate(const LoadGauge& stage) const;

  ServingResources m_res;
  ServingParams m_params;
  TraceRing* m_ring;
  RequestEventFn m_onEvent;
  std::unique_ptr<corpus::QaPromptReader> m_reader;  // scheduler thread only
  std::unordered_map<int64_t, std::string> m_passageText;
  std::unique_ptr<TurnLock> m_turns;
  // Each worker's busy time: speculative generation asks the generation worker's, speculative
  // retrieval the retrieval worker's (HedraRAG §4.3: the throughput of the stage that would do
  // the speculative work).
  std::unique_ptr<LoadGauge> m_genLoad, m_retLoad;
  std::unique_ptr<GenerationWorker> m_gen;
  std::unique_ptr<RetrievalWorker> m_ret;
  Mailbox<Message> m_inbox;
  std::unordered_map<uint32_t, std::unique_ptr<Req>> m_reqs;  // scheduler thread only
  std::unordered_map<JobKey, uint32_t> m_keyOwner;            // scheduler thread only
  int32_t m_genInFlight = 0;                                  // generation jobs (incl. speculative)
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
