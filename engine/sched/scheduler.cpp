#include "sched/scheduler.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "retrieval/passage_index.h"
#include "sched/compression_executor.h"
#include "sched/generation_executor.h"
#include "sched/retrieval_executor.h"
#include "sched/serving_assets.h"
#include "telemetry/trace_ring.h"
#include "telemetry/trace_zone.h"

namespace rag {

// ---- RequestHandle -------------------------------------------------------------------------

uint32_t RequestHandle::id() const { return m_s ? m_s->id : 0; }

bool RequestHandle::done() const {
  if (!m_s) return true;
  std::lock_guard lock(m_s->mutex);
  return m_s->result.has_value();
}

Result<RequestResult> RequestHandle::wait() const {
  if (!m_s) return Status::invalidArgument("an empty RequestHandle (not returned by Engine::submit)");
  std::unique_lock lock(m_s->mutex);
  m_s->cv.wait(lock, [&] { return m_s->result.has_value(); });
  return *m_s->result;
}

std::string RequestHandle::streamedText() const {
  if (!m_s) return {};
  std::lock_guard lock(m_s->mutex);
  return m_s->streamed;
}

}  // namespace rag

namespace rag::sched {

namespace {

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

double secondsBetween(uint64_t a, uint64_t b) { return b > a ? static_cast<double>(b - a) * 1e-9 : 0.0; }

}  // namespace

// One live request: where it is in its graph and what is in flight for it.
struct Scheduler::Req {
  uint32_t id = 0;
  std::shared_ptr<RequestHandle::Shared> shared;
  std::shared_ptr<const WorkflowGraph> graph;
  RequestInputs inputs;
  RunCounts runs;
  std::string node;            // the node to run or running
  bool ready = false;          // `node` is waiting to be dispatched
  uint64_t submitNs = 0;
  uint64_t nodeBeginNs = 0;
  uint64_t firstTokenNs = 0;   // the running node's first token (generation), 0 before it
  JobKey active = 0;           // the job running `node` (0: none)
  std::string activeText;
  bool speculated = false;     // the running node's partial output has started speculative work
  // A speculative run of the node that follows the running one (a Candidate).
  struct Candidate {
    JobKey key = 0;
    std::string node;
    uint64_t beginNs = 0;
    uint64_t firstTokenNs = 0;
    bool finished = false;
    std::string text = {};  // streamed so far: published if the run is adopted
    NodeOutput output = {};
  };
  std::optional<Candidate> spec;
  std::vector<JobKey> prefetches;  // speculative work that only warms an executor
  RequestResult result;
};

// ---- life cycle ----------------------------------------------------------------------------

Scheduler::Scheduler(std::shared_ptr<const ServingAssets> assets, const ServingParams& params, TraceRing* ring,
                     RequestEventFn onEvent)
    : m_assets(std::move(assets)), m_params(params), m_ring(ring), m_onEvent(std::move(onEvent)) {}

Result<std::unique_ptr<Scheduler>> Scheduler::create(std::shared_ptr<const ServingAssets> assets,
                                                     const ServingParams& params, TraceRing* ring,
                                                     RequestEventFn onEvent) {
  if (!assets || !assets->model || !assets->tokenizer || !assets->embedder || !assets->index)
    return Status::invalidArgument("serving needs a model, its tokenizer, an embedder and a passage index");
  if (params.nprobe < 1) return Status::invalidArgument("nprobe must be at least 1, not " + std::to_string(params.nprobe));
  if (params.maxLiveRequests < 1) return Status::invalidArgument("maxLiveRequests must be at least 1");
  if (!(params.specLoadThreshold >= 0.0))
    return Status::invalidArgument("specLoadThreshold must be a share >= 0 (above 1: speculation ignores the load)");
  if (params.generationThreads < 1 || params.retrievalThreads < 1)
    return Status::invalidArgument("generation and retrieval threads must be at least 1");
  std::unique_ptr<Scheduler> s(new Scheduler(std::move(assets), params, ring, std::move(onEvent)));
  RAG_RETURN_IF_ERROR(s->start());
  return s;
}

Status Scheduler::start() {
  const ServePolicy& policy = m_params.policy;
  if (policy.generation == GenerationPacing::Turns || policy.retrieval == RetrievalPacing::Turns)
    m_turns = std::make_unique<TurnLock>();
  if (m_ring) {
    m_lane = m_ring->registerLane("scheduler", LaneKind::Scheduler);
    m_requestLane = m_ring->registerLane("requests", LaneKind::Requests);
  }
  auto wake = [this] { m_inbox.push(Message(WorkPosted{})); };
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<GenerationExecutor> gen,
                       GenerationExecutor::create(*m_assets, m_params, m_turns.get(), m_ring, wake));
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<RetrievalExecutor> ret,
                       RetrievalExecutor::create(*m_assets, m_params, m_turns.get(), m_ring,
                                                 [g = gen.get()] { return g->worker().stepSeconds(); }, wake));
  m_gen = gen.get();
  m_ret = ret.get();
  m_byKind[static_cast<size_t>(NodeKind::Generation)] = gen.get();
  m_byKind[static_cast<size_t>(NodeKind::Retrieval)] = ret.get();
  m_byKind[static_cast<size_t>(NodeKind::Knowledge)] = ret.get();  // on the retrieval worker: same cores, same embedder
  auto compression = std::make_unique<CompressionExecutor>(wake);
  m_byKind[static_cast<size_t>(NodeKind::Compression)] = compression.get();
  m_executors[kGenerationSlot] = std::move(gen);
  m_executors[kRetrievalSlot] = std::move(ret);
  m_executors[kCompressionSlot] = std::move(compression);
  m_thread = std::thread([this] { loop(); });
  return Status::ok();
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(m_submitMutex);  // no submit() lands in the inbox after this
    m_stop = true;
  }
  m_inbox.poke();
  if (m_thread.joinable()) m_thread.join();
  // Submissions the loop never took still get an answer.
  std::vector<Message> left;
  m_inbox.takeAll(left);
  for (Message& m : left)
    if (auto* sub = std::get_if<SubmitMsg>(&m)) {
      {
        std::lock_guard lock(sub->shared->mutex);
        sub->shared->result = Status::cancelled("the engine shut down before request " +
                                                std::to_string(sub->shared->id) + " started");
      }
      sub->shared->cv.notify_all();
    }
  // The loop has cancelled every live request; the executors stop their workers, which drop
  // what they still hold (the retrieval worker first: it reads the generation worker's pace).
  m_executors[kRetrievalSlot].reset();
  m_executors[kGenerationSlot].reset();
}

Result<RequestHandle> Scheduler::submit(std::string question, std::shared_ptr<const WorkflowGraph> graph) {
  if (blank(question)) return Status::invalidArgument("the question is empty; give the text to answer");
  if (!graph) return Status::invalidArgument("no workflow graph given");
  RAG_RETURN_IF_ERROR(graph->validate());
  std::lock_guard lock(m_submitMutex);
  if (m_stop.load()) return Status::cancelled("the engine is shutting down");
  if (m_live.load() >= m_params.maxLiveRequests)
    return Status::busy(std::to_string(m_live.load()) + " requests are live, the limit is " +
                        std::to_string(m_params.maxLiveRequests) + "; retry when some have finished");
  m_live.fetch_add(1);
  auto shared = std::make_shared<RequestHandle::Shared>();
  shared->id = m_nextId.fetch_add(1);
  m_inbox.push(Message(SubmitMsg{shared, std::move(question), std::move(graph), nowNs()}));
  return RequestHandle(shared);
}

Status Scheduler::cancel(uint32_t requestId) {
  if (requestId == 0 || requestId >= m_nextId.load())
    return Status::notFound("no request " + std::to_string(requestId));
  m_inbox.push(Message(CancelMsg{requestId}));
  return Status::ok();
}

std::vector<memory::PrefixNodeInfo> Scheduler::kvTree() const { return m_gen ? m_gen->worker().kvTree() : std::vector<memory::PrefixNodeInfo>{}; }

KvBlockMap Scheduler::kvBlockMap() const {
  KvBlockMap map;
  if (!m_gen) return map;
  const GenerationWorker& gen = m_gen->worker();
  map.owners = gen.kvBlockOwners();
  const GenerationWorker::MemoryStats mem = gen.memoryStats();
  map.hostUsed = mem.pool.hostUsed;
  map.hostTotal = mem.pool.hostCapacity;
  return map;
}

std::vector<BlockStoreEntry> Scheduler::blockStoreEntries() const {
  std::vector<BlockStoreEntry> out;
  if (!m_gen) return out;
  for (const memory::BlockStoreRecordInfo& r : m_gen->worker().blockStoreRecords())
    out.push_back({.passageId = r.passageId, .tokens = r.tokens, .bytes = r.bytes, .hits = r.hits, .saved = !r.pending});
  return out;
}

ServingStats Scheduler::stats() const {
  ServingStats s;
  s.liveRequests = m_live.load();
  const GenerationWorker& gen = m_gen->worker();
  const RetrievalWorker& ret = m_ret->worker();
  s.runningSequences = gen.runningSequences();
  s.kvBlocksUsed = gen.kvBlocksUsed();
  s.kvBlocksTotal = gen.kvBlocksTotal();
  s.searchTasks = ret.liveTasks();
  s.finishedRequests = m_finished.load();
  s.subStages = ret.subStages();
  s.subStageBudgetSeconds = ret.budgetSeconds();
  s.gpuCacheActive = ret.clusterCacheActive();
  s.gpuCacheHitRate = ret.clusterCacheHitRate();
  s.generationLoad = m_gen->load().last();
  s.retrievalLoad = m_ret->load().last();
  s.embeddingLoad = m_ret->embedLoad().last();
  // The step totals before the busy time: a step adds its busy time first, so the busy time read
  // after holds every step the totals do (the worker's own share is never negative).
  const GenerationWorker::StepTotals steps = gen.stepTotals();
  s.generationSteps = steps.steps;
  s.generationRows = steps.rows;
  s.generationForwardSeconds = steps.forwardSeconds;
  s.generationRunnerSeconds = steps.runnerSeconds;
  s.generationBusySeconds = m_gen->load().busySeconds();
  s.retrievalBusySeconds = m_ret->load().busySeconds();
  s.embeddingBusySeconds = m_ret->embedLoad().busySeconds();
  const GenerationWorker::MemoryStats mem = gen.memoryStats();
  s.kvHostBlocksUsed = mem.pool.hostUsed;
  s.kvHostBlocksTotal = mem.pool.hostCapacity;
  s.kvBlocksToHost = mem.pool.blocksToHost;
  s.kvBlocksToCompute = mem.pool.blocksToCompute;
  s.prefixCacheOn = mem.cacheOn;
  s.prefixQueriedTokens = mem.cache.queriedTokens;
  s.prefixHitTokens = mem.cache.hitTokens;
  s.prefixEvictedBlocks = mem.cache.evictedBlocks;
  s.prefixCachedBlocks = mem.cache.computeBlocks;
  s.prefillSecondsPerToken = mem.prefillPerRow;
  s.prefillSecondsPerPair = mem.prefillPerPair;
  s.depSegmentTokens = mem.depSegments.segmentTokens;
  s.depHitTokens = mem.depSegments.hitTokens;
  s.blockTokens = mem.blockSegments.segmentTokens;
  s.blockHitTokens = mem.blockSegments.hitTokens;
  s.blockStoreHitTokens = mem.blockSegments.storeHitTokens;
  s.blockStoreRecords = mem.blockStore.records;
  s.blockStoreNotice = m_gen->blockStoreReport();
  return s;
}

ClusterHeat Scheduler::clusterHeat() const {
  ClusterHeat h;
  h.accesses = m_assets->index->ivf().clusterAccessCounts();
  h.residency = m_ret->worker().clusterResidency();
  return h;
}

JobKey Scheduler::newKey(uint32_t requestId, NodeKind kind) {
  const JobKey k = m_nextKey++;
  m_keyOwner[k] = {requestId, kind};
  return k;
}

// ---- the loop ------------------------------------------------------------------------------

void Scheduler::loop() {
  std::vector<Message> msgs;
  std::vector<StageUpdate> updates;
  while (true) {
    msgs.clear();
    m_inbox.takeAll(msgs, std::chrono::milliseconds(50));
    if (m_stop.load()) {
      for (Message& m : msgs)  // taken but never started: registered so that they are cancelled below
        if (auto* sub = std::get_if<SubmitMsg>(&m)) handle(*sub);
      break;
    }
    if (msgs.empty()) continue;
    RAG_TRACE_ZONE(zone, m_ring, m_lane, TraceStage::Schedule, 0);
    // The one place the gauges are sampled: for the speculation triggers and stats().
    const uint64_t now = nowNs();
    for (const auto& ex : m_executors) ex->sampleLoad(now);
    for (Message& m : msgs) std::visit([this](auto& x) { handle(x); }, m);
    updates.clear();
    for (const auto& ex : m_executors) ex->collect(updates);
    for (StageUpdate& u : updates) handle(u);
    // The wavefront: every request whose next node is ready, across all live requests.
    uint32_t wave = 0;
    for (auto& [id, r] : m_reqs)
      if (r->ready) {
        r->ready = false;
        startNode(*r);
        ++wave;
      }
    zone.setArgs(wave, static_cast<uint32_t>(msgs.size() + updates.size()));
    // Requests finished or failed during the cycle are erased by their handlers.
  }
  std::vector<uint32_t> ids;
  for (auto& [id, r] : m_reqs) ids.push_back(id);
  for (uint32_t id : ids) {
    Req& r = *m_reqs[id];
    cancelWork(r);
    fail(r, Status::cancelled("the engine shut down before request " + std::to_string(id) + " finished"));
  }
}

void Scheduler::handle(SubmitMsg& m) {
  auto r = std::make_unique<Req>();
  r->id = m.shared->id;
  r->shared = m.shared;
  r->graph = m.graph;
  r->submitNs = m.submitNs;
  r->inputs.vars[std::string(kQuestionVar)] = m.question;
  r->result.id = r->id;
  Req& req = *r;
  m_reqs[r->id] = std::move(r);
  emit(RequestEvent::Kind::Submitted, req, m.question);
  Result<std::string> first = req.graph->readySuccessor(kStart, req.inputs.vars, req.runs);
  if (!first) return fail(req, first.status());
  if (*first == kEnd) return complete(req);
  req.node = *first;
  req.ready = true;
}

void Scheduler::handle(CancelMsg& m) {
  auto it = m_reqs.find(m.id);
  if (it == m_reqs.end()) return;  // finished already
  Req& r = *it->second;
  cancelWork(r);
  fail(r, Status::cancelled("request " + std::to_string(m.id) + " was cancelled"));
}

void Scheduler::handle(StageUpdate& u) {
  auto owner = m_keyOwner.find(u.key);
  if (owner == m_keyOwner.end()) return;  // cancelled work reporting its end
  const uint32_t id = owner->second.requestId;
  if (u.final) m_keyOwner.erase(owner);
  auto it = m_reqs.find(id);
  if (it == m_reqs.end()) return;
  Req& r = *it->second;
  if (r.spec && r.spec->key == u.key) {
    if (u.firstToken && r.spec->firstTokenNs == 0) r.spec->firstTokenNs = nowNs();
    r.spec->text += u.text;
    if (!u.final) return;
    if (!u.error.isOk()) {
      r.spec.reset();  // the real run reports the error, if it happens again
      return;
    }
    r.spec->finished = true;
    r.spec->output = std::move(u.output);
    return;
  }
  if (auto p = std::find(r.prefetches.begin(), r.prefetches.end(), u.key); p != r.prefetches.end()) {
    if (u.final) r.prefetches.erase(p);  // its executor kept what it found
    return;
  }
  if (u.key != r.active) return;
  if (!u.error.isOk()) return fail(r, u.error.withContext("node '" + r.node + "'"));
  if (u.firstToken && r.firstTokenNs == 0) r.firstTokenNs = nowNs();
  if (!u.text.empty()) {
    r.activeText += u.text;
    {
      std::lock_guard lock(r.shared->mutex);
      r.shared->streamed = r.activeText;
    }
    emit(RequestEvent::Kind::Tokens, r, u.text);
  }
  if (u.final) {
    r.active = 0;
    return finishNode(r, std::move(u.output), false);
  }
  if (u.partial) maybeSpeculate(r, *u.partial);
}

// ---- nodes ---------------------------------------------------------------------------------

// The node `r` stands at begins: its clock, its streamed text, its event.
void Scheduler::beginNode(Req& r) {
  r.nodeBeginNs = nowNs();
  r.firstTokenNs = 0;
  r.activeText.clear();
  r.speculated = false;
  {
    std::lock_guard lock(r.shared->mutex);
    r.shared->streamed.clear();
  }
  emit(RequestEvent::Kind::NodeStarted, r, r.node);
}

void Scheduler::startNode(Req& r) {
  const WorkflowNode* node = r.graph->findNode(r.node);
  if (!node) return fail(r, Status::internal("node '" + r.node + "' vanished from its graph"));
  beginNode(r);
  const JobKey key = newKey(r.id, node->kind);
  if (Status st = executor(node->kind).start({key, r.id, node, &r.inputs, false}); !st) {
    m_keyOwner.erase(key);
    return fail(r, st.withContext("node '" + r.node + "'"));
  }
  r.active = key;
}

void Scheduler::finishNode(Req& r, NodeOutput output, bool speculative) {
  const WorkflowNode* node = r.graph->findNode(r.node);
  const uint64_t end = nowNs();
  StageTiming t;
  t.node = r.node;
  t.kind = node->kind;
  t.beginSeconds = secondsBetween(r.submitNs, r.nodeBeginNs);
  t.endSeconds = secondsBetween(r.submitNs, end);
  t.work = output.work;
  t.speculative = speculative;
  if (r.firstTokenNs != 0) t.firstTokenSeconds = secondsBetween(r.submitNs, r.firstTokenNs);
  t.promptTokens = output.promptTokens;
  t.cachedPromptTokens = output.cachedPromptTokens;
  t.promptTokenIds = output.promptTokenIds;
  t.attention = output.attention;
  t.segments = output.segments;
  t.knowledge = output.knowledge;
  t.output = output.text;
  r.result.stages.push_back(std::move(t));
  traceNode(r,
            node->kind == NodeKind::Generation    ? TraceStage::Decode
            : node->kind == NodeKind::Compression ? TraceStage::Compress
                                                  : TraceStage::RetrievalStep,
            r.nodeBeginNs,
            static_cast<uint32_t>(std::max<int64_t>(0, output.work)), speculative ? kTraceSpeculative : 0);
  if (node->kind == NodeKind::Retrieval) {
    r.result.lastPassages.clear();
    for (const model::PassageText& p : output.passages) r.result.lastPassages.push_back(p.id);
  }
  if (output.passages.empty()) r.inputs.passages.erase(node->outputVar);
  else r.inputs.passages[node->outputVar] = std::move(output.passages);
  if (node->kind == NodeKind::Knowledge) r.inputs.graphs[node->outputVar] = std::move(output.graphs);
  else r.inputs.graphs.erase(node->outputVar);
  r.inputs.vars[node->outputVar] = output.text;
  ++r.runs[r.node];
  emit(RequestEvent::Kind::NodeFinished, r, std::move(output.text));
  advance(r);
}

// Chooses the next node; a speculative run waiting for it is kept, retargeted or dropped here.
void Scheduler::advance(Req& r) {
  Result<std::string> next = r.graph->readySuccessor(r.node, r.inputs.vars, r.runs);
  if (!next) {
    cancelWork(r);
    return fail(r, next.status());
  }
  if (*next == kEnd) {
    cancelWork(r);
    return complete(r);
  }
  r.node = *next;
  if (r.spec && r.spec->node != r.node) {
    // A speculation waits beyond a compression node (maybeSpeculate looks through them): the
    // compression runs here, at once, so that the speculation meets its real input.
    const WorkflowNode* node = r.graph->findNode(r.node);
    if (node && node->kind == NodeKind::Compression) {
      beginNode(r);
      return finishNode(r, CompressionExecutor::compress(*node, r.inputs), false);
    }
  }
  if (r.spec) return adoptOrDropSpeculation(r);
  r.ready = true;
}

void Scheduler::adoptOrDropSpeculation(Req& r) {
  Req::Candidate spec = std::move(*r.spec);
  r.spec.reset();
  const WorkflowNode* node = r.graph->findNode(r.node);
  Adoption adoption = Adoption::None;
  if (node && spec.node == r.node) adoption = executor(node->kind).adopt({spec.key, r.id, node, &r.inputs, false});
  if (adoption == Adoption::Exact) {
    // The speculation ran on exactly the final input: it is this node's run.
    ++r.result.specAccepted;
    r.nodeBeginNs = spec.beginNs;
    r.firstTokenNs = spec.firstTokenNs;
    r.speculated = false;
    emit(RequestEvent::Kind::NodeStarted, r, r.node);
    // What it streamed while speculative is this node's text: published now, the rest as it comes.
    r.activeText = std::move(spec.text);
    {
      std::lock_guard lock(r.shared->mutex);
      r.shared->streamed = r.activeText;
    }
    if (!r.activeText.empty()) emit(RequestEvent::Kind::Tokens, r, r.activeText);
    if (spec.finished) return finishNode(r, std::move(spec.output), true);
    r.active = spec.key;
    return;
  }
  ++r.result.rollbacks;
  emit(RequestEvent::Kind::Rollback, r, spec.node);
  traceNode(r, TraceStage::Decode, spec.beginNs, 0, kTraceSpeculative | kTraceRollback);
  if (adoption == Adoption::Retargeted) {
    // Rolled back to where the inputs diverge: the same run continues as this node's.
    r.nodeBeginNs = nowNs();
    r.firstTokenNs = 0;
    r.activeText.clear();
    r.speculated = false;
    emit(RequestEvent::Kind::NodeStarted, r, r.node);
    r.active = spec.key;
    return;
  }
  if (node) executor(node->kind).cancel(spec.key);
  m_keyOwner.erase(spec.key);
  r.ready = true;
}

// Speculative execution (§4.3) of the node that would follow the running one if `partial` were
// its output.
void Scheduler::maybeSpeculate(Req& r, const NodeOutput& partial) {
  if (!m_params.policy.speculation || r.speculated) return;
  const WorkflowNode* node = r.graph->findNode(r.node);
  if (!node) return;
  RequestInputs inputs = r.inputs;
  inputs.vars[node->outputVar] = partial.text;
  if (partial.passages.empty()) inputs.passages.erase(node->outputVar);
  else inputs.passages[node->outputVar] = partial.passages;
  RunCounts runs = r.runs;
  ++runs[r.node];
  Result<std::string> next = r.graph->readySuccessor(r.node, inputs.vars, runs);
  if (!next || *next == kEnd) return;
  const WorkflowNode* target = r.graph->findNode(*next);
  if (!target) return;
  // A compression node costs microseconds and depends only on its inputs: speculation looks
  // through it (RECOMP's retrieve -> compress -> answer), compressing the partial passages, and
  // advance() runs it at once when the real ones arrive.
  std::string read = node->outputVar;  // what the target must read for the speculation to matter
  for (int hops = 0; target->kind == NodeKind::Compression && hops < 4; ++hops) {
    if (!executor(target->kind).reads(*target, read)) return;
    NodeOutput squeezed = CompressionExecutor::compress(*target, inputs);
    inputs.vars[target->outputVar] = std::move(squeezed.text);
    inputs.passages.erase(target->outputVar);
    ++runs[target->id];
    read = target->outputVar;
    next = r.graph->readySuccessor(target->id, inputs.vars, runs);
    if (!next || *next == kEnd) return;
    target = r.graph->findNode(*next);
    if (!target) return;
  }
  StageExecutor& ex = executor(target->kind);
  const SpeculationKind kind = ex.speculation();
  if (kind == SpeculationKind::None || !ex.reads(*target, read)) return;
  if (kind == SpeculationKind::Candidate && r.spec) return;
  if (!ex.roomToSpeculate()) return;  // T_curr >= τ·T_max
  const JobKey key = newKey(r.id, target->kind);
  if (!ex.start({key, r.id, target, &inputs, true})) {
    m_keyOwner.erase(key);
    return;
  }
  r.speculated = true;
  if (kind == SpeculationKind::Prefetch) {
    r.prefetches.push_back(key);
    return;
  }
  r.spec = Req::Candidate{.key = key, .node = *next, .beginNs = nowNs()};
  ++r.result.speculations;
  emit(RequestEvent::Kind::Speculation, r, *next);
}

// ---- endings -------------------------------------------------------------------------------

void Scheduler::complete(Req& r) {
  auto a = r.inputs.vars.find(r.graph->answerVar());
  r.result.answer = a == r.inputs.vars.end() ? std::string() : a->second;
  r.result.variables = r.inputs.vars;
  r.result.latencySeconds = secondsBetween(r.submitNs, nowNs());
  traceNode(r, TraceStage::Request, r.submitNs, static_cast<uint32_t>(r.result.stages.size()), 0);
  emit(RequestEvent::Kind::Finished, r, r.result.answer);
  {
    std::lock_guard lock(r.shared->mutex);
    r.shared->result = r.result;
  }
  r.shared->cv.notify_all();
  m_finished.fetch_add(1);
  erase(r.id);
}

void Scheduler::fail(Req& r, const Status& why) {
  cancelWork(r);
  emit(RequestEvent::Kind::Failed, r, why.message());
  {
    std::lock_guard lock(r.shared->mutex);
    r.shared->result = why;
  }
  r.shared->cv.notify_all();
  erase(r.id);
}

// Cancels everything in flight for `r`: its node's job and any speculation. The executors free
// the KV blocks and search tasks; their late reports find no owner and are dropped.
void Scheduler::cancelWork(Req& r) {
  auto drop = [&](JobKey k) {
    if (k == 0) return;
    auto it = m_keyOwner.find(k);
    if (it != m_keyOwner.end()) {
      const NodeKind kind = it->second.kind;
      m_keyOwner.erase(it);
      executor(kind).cancel(k);
    }
  };
  drop(r.active);
  r.active = 0;
  if (r.spec) {
    // A finished candidate's key is no longer owned, but its executor may still hold it.
    if (const WorkflowNode* n = r.graph->findNode(r.spec->node)) executor(n->kind).cancel(r.spec->key);
    drop(r.spec->key);
    r.spec.reset();
  }
  for (JobKey k : r.prefetches) drop(k);
  r.prefetches.clear();
}

void Scheduler::erase(uint32_t id) {
  for (const auto& ex : m_executors) ex->forget(id);
  if (m_reqs.erase(id)) m_live.fetch_sub(1);
}

// ---- helpers -------------------------------------------------------------------------------

void Scheduler::emit(RequestEvent::Kind kind, const Req& r, std::string text) {
  if (!m_onEvent) return;
  m_onEvent(RequestEvent{kind, r.id, r.node, std::move(text)});
}

void Scheduler::traceNode(const Req& r, TraceStage stage, uint64_t beginNs, uint32_t work, uint8_t flags) {
  if (!m_ring) return;
  TraceEvent ev;
  ev.beginNs = beginNs;
  ev.endNs = nowNs();
  ev.requestId = r.id;
  ev.lane = m_requestLane;
  ev.stage = stage;
  ev.flags = flags;
  ev.arg0 = work;
  ev.arg1 = static_cast<uint32_t>(r.result.stages.size());
  m_ring->push(ev);
}

}  // namespace rag::sched
