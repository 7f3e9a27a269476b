#include "sched/scheduler.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "corpus/qa_prompt.h"
#include "model/text_embedder.h"
#include "model/tokenizer.h"
#include "retrieval/passage_index.h"
#include "telemetry/trace_ring.h"
#include "telemetry/trace_zone.h"
#if RAGWB_HAVE_CUDA
#include "cuda_cluster_store.h"
#endif

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

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

double secondsBetween(uint64_t a, uint64_t b) { return b > a ? static_cast<double>(b - a) * 1e-9 : 0.0; }

}  // namespace

// One live request: where it is in its graph and what is in flight for it.
struct Scheduler::Req {
  uint32_t id = 0;
  std::shared_ptr<RequestHandle::Shared> shared;
  std::shared_ptr<const WorkflowGraph> graph;
  Variables vars;
  RunCounts runs;
  std::string node;            // the node to run or running
  bool ready = false;          // `node` is waiting to be dispatched
  uint64_t submitNs = 0;
  uint64_t nodeBeginNs = 0;
  JobKey active = 0;           // the job running `node` (0: none)
  int64_t activeTokens = 0;
  std::string activeText;
  std::optional<retrieval::LocalCache> cache;  // the last retrieval (or speculative one)
  struct SpecGen {
    JobKey key = 0;
    std::string node;          // the generation node it runs ahead for
    std::string prompt;        // the exact prompt it runs on
    uint64_t beginNs = 0;
    bool finished = false;
    std::string output;
    int64_t tokens = 0;
  };
  std::optional<SpecGen> spec;
  JobKey specRetrieval = 0;    // a speculative search in flight
  bool specRetrievalIssued = false;  // for the current generation node run
  bool specGenerationTried = false;  // for the current retrieval node run
  RequestResult result;
};

// ---- resources -----------------------------------------------------------------------------

Result<ServingResources> loadServingResources(const ServingParams& params, const std::filesystem::path& corpus) {
  ServingResources r;
  r.corpus = corpus;
  if (params.modelDir.empty())
    return Status::invalidArgument("no model directory: set ServingParams::modelDir (e.g. datasets/models/rag-llama)");
  RAG_ASSIGN_OR_RETURN(r.model, model::loadModel(params.modelDir, params.dtype));
  Result<model::Tokenizer> tok = model::Tokenizer::load(params.modelDir);
  if (!tok)
    return tok.status().withContext("the model at " + params.modelDir.string() +
                                    " needs its tokenizer.json next to it");
  r.tokenizer = std::make_shared<const model::Tokenizer>(std::move(*tok));
  if (params.embedderDir.empty())
    return Status::invalidArgument("no embedder directory: set ServingParams::embedderDir (e.g. datasets/models/rag-embedder)");
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<model::TextEmbedder> emb, model::TextEmbedder::load(params.embedderDir));
  const std::filesystem::path base = params.indexBase.empty() ? retrieval::defaultIndexBase(corpus) : params.indexBase;
  RAG_ASSIGN_OR_RETURN(retrieval::PassageIndex index, retrieval::PassageIndex::load(base, emb->fingerprint()));
  r.embedder = std::shared_ptr<const model::TextEmbedder>(std::move(emb));
  r.index = std::make_shared<const retrieval::PassageIndex>(std::move(index));
  return r;
}

// ---- life cycle ----------------------------------------------------------------------------

Scheduler::Scheduler(ServingResources resources, const ServingParams& params, TraceRing* ring, RequestEventFn onEvent)
    : m_res(std::move(resources)), m_params(params), m_ring(ring), m_onEvent(std::move(onEvent)) {}

Result<std::unique_ptr<Scheduler>> Scheduler::create(ServingResources resources, const ServingParams& params,
                                                     TraceRing* ring, RequestEventFn onEvent) {
  if (!resources.model || !resources.tokenizer || !resources.embedder || !resources.index)
    return Status::invalidArgument("serving needs a model, its tokenizer, an embedder and a passage index");
  if (params.nprobe < 1) return Status::invalidArgument("nprobe must be at least 1, not " + std::to_string(params.nprobe));
  if (params.maxLiveRequests < 1) return Status::invalidArgument("maxLiveRequests must be at least 1");
  if (!(params.specLoadThreshold >= 0.0))
    return Status::invalidArgument("specLoadThreshold must be a share >= 0 (above 1: speculation ignores the load)");
  if (params.generationThreads < 1 || params.retrievalThreads < 1)
    return Status::invalidArgument("generation and retrieval threads must be at least 1");
  std::unique_ptr<Scheduler> s(new Scheduler(std::move(resources), params, ring, std::move(onEvent)));
  RAG_RETURN_IF_ERROR(s->start());
  return s;
}

Status Scheduler::start() {
  RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(m_res.corpus));
  m_reader = std::make_unique<corpus::QaPromptReader>(std::move(reader));
  if (m_params.policy.mode == ServeMode::Sequential) m_turns = std::make_unique<TurnLock>();
  // Each worker's threads, as many as the machine runs at once.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  m_genLoad = std::make_unique<LoadGauge>(std::min(cores, m_params.generationThreads));
  m_retLoad = std::make_unique<LoadGauge>(std::min(cores, m_params.retrievalThreads));

  model::RunnerParams rp;
  rp.deterministic = m_params.deterministic;
  rp.maxRunning = m_params.maxRunningSequences;
  rp.kvBudgetBytes = m_params.kvBudgetBytes;
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelRunner> runner,
                       model::ModelRunner::create(m_res.model, rp, m_res.tokenizer));
  if (m_ring) {
    m_lane = m_ring->registerLane("scheduler");
    m_requestLane = m_ring->registerLane("requests");
  }
  m_gen = std::make_unique<GenerationWorker>(
      std::move(runner),
      GenerationWorkerParams{.threads = m_params.generationThreads,
                             .turns = m_turns.get(),
                             .stageBatches = m_params.policy.mode == ServeMode::FlashRag,
                             .ring = m_ring,
                             .load = m_genLoad.get(),
                             .post = [this](std::vector<GenerationUpdate> us) {
                               for (auto& u : us) m_inbox.push(Message(std::move(u)));
                             }});
  // The partial GPU cluster cache (§4.4): Hedra with gpuCache on, when a CUDA device is there.
  std::unique_ptr<retrieval::ClusterStore> store;
#if RAGWB_HAVE_CUDA
  if (m_params.policy.mode == ServeMode::Hedra && m_params.policy.gpuCache && m_params.gpuCacheBytes > 0) {
    if (auto s = cuda::makeCudaClusterStore()) store = std::move(*s);
  }
#endif
  retrieval::ClusterCacheParams cacheParams;
  cacheParams.capacityBytes = m_params.gpuCacheBytes;
  m_ret = std::make_unique<RetrievalWorker>(
      *m_res.embedder, *m_res.index,
      RetrievalWorkerParams{.mode = m_params.policy.mode,
                            .threads = m_params.retrievalThreads,
                            .deterministic = m_params.deterministic,
                            .fixedBudgetSeconds = m_params.subStageSeconds,
                            .oldestFirst = m_params.policy.oldestFirst,
                            .sharedScans = m_params.policy.sharedScans,
                            .generationStepSeconds = [gen = m_gen.get()] { return gen->stepSeconds(); },
                            .partialAtShare = hedraSpeculation() ? std::optional<double>(m_params.specMinSearchedShare)
                                                                 : std::nullopt,
                            .turns = m_turns.get(),
                            .ring = m_ring,
                            .load = m_retLoad.get(),
                            .post = [this](std::vector<RetrievalUpdate> us) {
                              for (auto& u : us) m_inbox.push(Message(std::move(u)));
                            },
                            .clusterStore = std::move(store),
                            .clusterCache = cacheParams});
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
  // The loop has cancelled every live request; the workers drop what they still hold.
  m_gen.reset();
  m_ret.reset();
}

Result<RequestHandle> Scheduler::submit(std::string question, std::shared_ptr<const WorkflowGraph> graph) {
  if (trim(question).empty()) return Status::invalidArgument("the question is empty; give the text to answer");
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

ServingStats Scheduler::stats() const {
  ServingStats s;
  s.liveRequests = m_live.load();
  s.runningSequences = m_gen->runningSequences();
  s.kvBlocksUsed = m_gen->kvBlocksUsed();
  s.kvBlocksTotal = m_gen->kvBlocksTotal();
  s.searchTasks = m_ret->liveTasks();
  s.finishedRequests = m_finished.load();
  s.subStages = m_ret->subStages();
  s.subStageBudgetSeconds = m_ret->budgetSeconds();
  s.gpuCacheActive = m_ret->clusterCacheActive();
  s.gpuCacheHitRate = m_ret->clusterCacheHitRate();
  s.generationLoad = m_genLoad->last();
  s.retrievalLoad = m_retLoad->last();
  s.generationBusySeconds = m_genLoad->busySeconds();
  s.retrievalBusySeconds = m_retLoad->busySeconds();
  return s;
}

ClusterHeat Scheduler::clusterHeat() const {
  ClusterHeat h;
  h.accesses = m_res.index->ivf().clusterAccessCounts();
  h.residency = m_ret->clusterResidency();
  return h;
}

bool Scheduler::hedraSpeculation() const {
  return m_params.policy.mode == ServeMode::Hedra && m_params.policy.speculation;
}

bool Scheduler::roomToSpeculate(const LoadGauge& stage) const {
  return m_params.specLoadThreshold > 1.0 || stage.last() < m_params.specLoadThreshold;
}

JobKey Scheduler::newKey(uint32_t requestId) {
  const JobKey k = m_nextKey++;
  m_keyOwner[k] = requestId;
  return k;
}

// ---- the loop ------------------------------------------------------------------------------

void Scheduler::loop() {
  std::vector<Message> msgs;
  while (true) {
    msgs.clear();
    m_inbox.takeAll(msgs, std::chrono::milliseconds(50));
    if (m_stop.load()) {
      for (Message& m : msgs)  // taken but never started: registered so that they are cancelled below
        if (auto* sub = std::get_if<SubmitMsg>(&m)) handle(*sub);
      break;
    }
    if (msgs.empty()) continue;
    TraceZone zone(m_ring, m_lane, TraceStage::Schedule, 0);
    // The one place the gauges are sampled: for the triggers and stats().
    const uint64_t now = nowNs();
    (void)m_genLoad->load(now);
    (void)m_retLoad->load(now);
    for (Message& m : msgs) std::visit([this](auto& x) { handle(x); }, m);
    // The wavefront: every request whose next node is ready, across all live requests.
    uint32_t wave = 0;
    for (auto& [id, r] : m_reqs)
      if (r->ready) {
        r->ready = false;
        startNode(*r);
        ++wave;
      }
    zone.setArgs(wave, static_cast<uint32_t>(msgs.size()));
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
  r->vars[std::string(kQuestionVar)] = m.question;
  r->result.id = r->id;
  Req& req = *r;
  m_reqs[r->id] = std::move(r);
  emit(RequestEvent::Kind::Submitted, req, m.question);
  Result<std::string> first = req.graph->readySuccessor(kStart, req.vars, req.runs);
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

void Scheduler::handle(GenerationUpdate& u) {
  auto owner = m_keyOwner.find(u.key);
  if (owner == m_keyOwner.end()) return;  // cancelled work reporting its end
  const uint32_t id = owner->second;
  if (u.finished) {
    m_keyOwner.erase(owner);
    --m_genInFlight;
  }
  auto it = m_reqs.find(id);
  if (it == m_reqs.end()) return;
  Req& r = *it->second;
  if (r.spec && r.spec->key == u.key) {
    if (!u.finished) return;
    if (!u.error.isOk() || u.reason == model::FinishReason::Error) {
      r.spec.reset();  // the real run will report the error, if it happens again
      return;
    }
    r.spec->finished = true;
    r.spec->output = u.output;
    r.spec->tokens = u.generatedTokens;
    return;
  }
  if (u.key != r.active) return;
  if (!u.error.isOk()) return fail(r, u.error.withContext("node '" + r.node + "'"));
  if (u.reason == model::FinishReason::Error)
    return fail(r, Status::internal("node '" + r.node + "': the model produced no valid token (NaN logits)"));
  r.activeTokens += u.newTokens;
  if (!u.text.empty()) {
    r.activeText += u.text;
    {
      std::lock_guard lock(r.shared->mutex);
      r.shared->streamed = r.activeText;
    }
    emit(RequestEvent::Kind::Tokens, r, u.text);
  }
  if (u.finished) {
    r.active = 0;
    finishNode(r, trim(u.output), u.generatedTokens, false);
    return;
  }
  maybeSpeculateRetrieval(r);
}

void Scheduler::handle(RetrievalUpdate& u) {
  auto owner = m_keyOwner.find(u.key);
  if (owner == m_keyOwner.end()) return;
  const uint32_t id = owner->second;
  if (u.final) m_keyOwner.erase(owner);
  auto it = m_reqs.find(id);
  if (it == m_reqs.end()) return;
  Req& r = *it->second;
  if (u.key == r.specRetrieval) {
    if (u.final) {
      r.specRetrieval = 0;
      if (u.error.isOk() && u.cache) r.cache = std::move(u.cache);
    }
    return;
  }
  if (u.key != r.active) return;
  if (!u.error.isOk()) return fail(r, u.error.withContext("node '" + r.node + "'"));
  if (!u.final) {
    // Once per retrieval, on the first partial top-k over enough of the clusters (§4.3).
    if (!r.specGenerationTried && u.clustersTotal > 0 &&
        static_cast<double>(u.clustersSearched) >= m_params.specMinSearchedShare * static_cast<double>(u.clustersTotal))
      maybeSpeculateGeneration(r, u.top);
    return;
  }
  r.active = 0;
  if (u.cache) r.cache = std::move(u.cache);
  r.result.lastPassages.clear();
  for (const auto& h : u.top)
    if (h.id >= 0) r.result.lastPassages.push_back(retrieval::PassageIndex::passageId(h.id));
  Result<std::string> docs = formatDocs(u.top);
  if (!docs) return fail(r, docs.status());
  finishNode(r, std::move(*docs), u.clustersSearched, false);
}

// ---- nodes ---------------------------------------------------------------------------------

Result<model::SequenceRequest> Scheduler::sequenceFor(const WorkflowNode& node, const std::string& prompt,
                                                      uint32_t requestId) const {
  model::SequenceRequest q;
  q.prompt = m_res.tokenizer->encode(prompt, model::EncodeOptions{.parseSpecial = false});
  if (q.prompt.empty()) return Status::invalidArgument("node '" + node.id + "': its prompt renders to no tokens");
  q.sampling.maxTokens = static_cast<int32_t>(node.generation.maxTokens);
  q.sampling.temperature = static_cast<float>(node.generation.temperature);
  q.sampling.seed = requestId;
  q.sampling.stop = node.generation.stop;
  return q;
}

void Scheduler::startNode(Req& r) {
  const WorkflowNode* node = r.graph->findNode(r.node);
  if (!node) return fail(r, Status::internal("node '" + r.node + "' vanished from its graph"));
  r.nodeBeginNs = nowNs();
  r.activeTokens = 0;
  r.activeText.clear();
  {
    std::lock_guard lock(r.shared->mutex);
    r.shared->streamed.clear();
  }
  emit(RequestEvent::Kind::NodeStarted, r, r.node);
  r.specGenerationTried = false;
  if (node->kind == NodeKind::Generation) {
    r.specRetrievalIssued = false;
    Result<std::string> prompt = renderTemplate(node->promptTemplate, r.vars);
    if (!prompt) return fail(r, prompt.status().withContext("node '" + r.node + "'"));
    Result<model::SequenceRequest> seq = sequenceFor(*node, *prompt, r.id);
    if (!seq) return fail(r, seq.status());
    r.active = newKey(r.id);
    ++m_genInFlight;
    m_gen->add(GenerationJob{.key = r.active, .requestId = r.id, .request = std::move(*seq)});
    return;
  }
  auto q = r.vars.find(node->queryVar);
  RetrievalJob job;
  job.key = r.active = newKey(r.id);
  job.requestId = r.id;
  job.query = q == r.vars.end() ? std::string() : trim(q->second);
  if (job.query.empty()) job.query = r.vars[std::string(kQuestionVar)];  // nothing to search with: the question
  job.k = static_cast<int32_t>(node->topk);
  job.nprobe = node->retrieval.nprobe > 0 ? node->retrieval.nprobe : m_params.nprobe;
  if (m_params.policy.mode == ServeMode::Hedra && m_params.policy.reorder) job.hint = r.cache;
  m_ret->add(std::move(job));
}

void Scheduler::finishNode(Req& r, std::string output, int64_t work, bool speculative) {
  const WorkflowNode* node = r.graph->findNode(r.node);
  const uint64_t end = nowNs();
  StageTiming t;
  t.node = r.node;
  t.kind = node->kind;
  t.beginSeconds = secondsBetween(r.submitNs, r.nodeBeginNs);
  t.endSeconds = secondsBetween(r.submitNs, end);
  t.work = work;
  t.speculative = speculative;
  r.result.stages.push_back(t);
  traceNode(r, node->kind == NodeKind::Generation ? TraceStage::Decode : TraceStage::RetrievalStep, r.nodeBeginNs,
            static_cast<uint32_t>(std::max<int64_t>(0, work)), speculative ? kTraceSpeculative : 0);
  r.vars[node->outputVar] = output;
  ++r.runs[r.node];
  emit(RequestEvent::Kind::NodeFinished, r, std::move(output));
  advance(r);
}

// Chooses the next node; a speculative generation waiting for it is kept or dropped here.
void Scheduler::advance(Req& r) {
  Result<std::string> next = r.graph->readySuccessor(r.node, r.vars, r.runs);
  if (!next) {
    if (r.spec) cancelWork(r);
    return fail(r, next.status());
  }
  if (*next == kEnd) {
    if (r.spec) cancelWork(r);
    return complete(r);
  }
  r.node = *next;
  if (r.spec) return adoptOrDropSpeculation(r);
  r.ready = true;
}

void Scheduler::adoptOrDropSpeculation(Req& r) {
  Req::SpecGen spec = std::move(*r.spec);
  r.spec.reset();
  const WorkflowNode* node = r.graph->findNode(r.node);
  bool keep = false;
  if (node && node->kind == NodeKind::Generation && spec.node == r.node) {
    Result<std::string> prompt = renderTemplate(node->promptTemplate, r.vars);
    keep = prompt && *prompt == spec.prompt;
  }
  if (!keep) {
    m_gen->cancel(spec.key);
    ++r.result.rollbacks;
    emit(RequestEvent::Kind::Rollback, r, spec.node);
    traceNode(r, TraceStage::Decode, spec.beginNs, static_cast<uint32_t>(spec.tokens), kTraceSpeculative | kTraceRollback);
    r.ready = true;
    return;
  }
  // The speculation ran on exactly the final prompt: it is this node's run.
  ++r.result.specAccepted;
  r.nodeBeginNs = spec.beginNs;
  emit(RequestEvent::Kind::NodeStarted, r, r.node);
  r.specRetrievalIssued = false;
  if (spec.finished) {
    m_keyOwner.erase(spec.key);
    return finishNode(r, trim(spec.output), spec.tokens, true);
  }
  r.active = spec.key;
}

// Speculative generation (§4.3) on a partial top-k of the running retrieval.
void Scheduler::maybeSpeculateGeneration(Req& r, const std::vector<retrieval::SearchHit>& partial) {
  if (!hedraSpeculation() || partial.empty()) return;
  const WorkflowNode* node = r.graph->findNode(r.node);
  if (!node) return;
  // The node that would follow if the partial passages were final.
  Result<std::string> docs = formatDocs(partial);
  if (!docs) return;
  Variables vars = r.vars;
  vars[node->outputVar] = *docs;
  RunCounts runs = r.runs;
  ++runs[r.node];
  Result<std::string> next = r.graph->readySuccessor(r.node, vars, runs);
  if (!next || *next == kEnd) return;
  const WorkflowNode* gen = r.graph->findNode(*next);
  if (!gen || gen->kind != NodeKind::Generation) return;
  Result<std::string> prompt = renderTemplate(gen->promptTemplate, vars);
  if (!prompt) return;
  if (r.spec || m_genInFlight >= m_params.specGenerationLimit || !roomToSpeculate(*m_genLoad)) return;  // T_curr >= τ·T_max
  Result<model::SequenceRequest> seq = sequenceFor(*gen, *prompt, r.id);
  if (!seq) return;
  r.specGenerationTried = true;
  Req::SpecGen spec;
  spec.key = newKey(r.id);
  spec.node = *next;
  spec.prompt = std::move(*prompt);
  spec.beginNs = nowNs();
  ++m_genInFlight;
  ++r.result.speculations;
  m_gen->add(GenerationJob{.key = spec.key, .requestId = r.id, .request = std::move(*seq), .speculative = true});
  r.spec = std::move(spec);
  emit(RequestEvent::Kind::Speculation, r, *next);
}

// Speculative retrieval (§4.3) on the partial output of the running generation.
void Scheduler::maybeSpeculateRetrieval(Req& r) {
  if (!hedraSpeculation() || r.specRetrievalIssued || r.specRetrieval != 0) return;
  if (r.activeTokens < m_params.specRetrievalMinTokens) return;
  if (m_ret->liveTasks() >= m_params.specRetrievalLimit || !roomToSpeculate(*m_retLoad)) return;
  const WorkflowNode* node = r.graph->findNode(r.node);
  if (!node) return;
  Variables vars = r.vars;
  vars[node->outputVar] = trim(r.activeText);
  RunCounts runs = r.runs;
  ++runs[r.node];
  Result<std::string> next = r.graph->readySuccessor(r.node, vars, runs);
  if (!next || *next == kEnd) return;
  const WorkflowNode* ret = r.graph->findNode(*next);
  if (!ret || ret->kind != NodeKind::Retrieval || ret->queryVar != node->outputVar) return;
  r.specRetrievalIssued = true;
  RetrievalJob job;
  job.key = r.specRetrieval = newKey(r.id);
  job.requestId = r.id;
  job.query = vars[node->outputVar];
  job.k = static_cast<int32_t>(ret->topk);
  job.nprobe = ret->retrieval.nprobe > 0 ? ret->retrieval.nprobe : m_params.nprobe;
  job.speculative = true;
  if (m_params.policy.reorder) job.hint = r.cache;
  m_ret->add(std::move(job));
}

// ---- endings -------------------------------------------------------------------------------

void Scheduler::complete(Req& r) {
  auto a = r.vars.find(r.graph->answerVar());
  r.result.answer = a == r.vars.end() ? std::string() : a->second;
  r.result.variables = r.vars;
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

// Cancels everything in flight for `r`: its node's job and any speculation. The workers free
// the KV blocks and search tasks; their late reports find no owner and are dropped.
void Scheduler::cancelWork(Req& r) {
  auto drop = [&](JobKey k) {
    auto it = m_keyOwner.find(k);
    if (it == m_keyOwner.end()) return false;
    m_keyOwner.erase(it);
    return true;
  };
  if (r.active) {
    const WorkflowNode* node = r.graph->findNode(r.node);
    if (node && node->kind == NodeKind::Generation) {
      m_gen->cancel(r.active);
      if (drop(r.active)) --m_genInFlight;
    } else {
      m_ret->cancel(r.active);
      drop(r.active);
    }
    r.active = 0;
  }
  if (r.spec) {
    m_gen->cancel(r.spec->key);
    if (drop(r.spec->key) && !r.spec->finished) --m_genInFlight;
    r.spec.reset();
  }
  if (r.specRetrieval) {
    m_ret->cancel(r.specRetrieval);
    drop(r.specRetrieval);
    r.specRetrieval = 0;
  }
}

void Scheduler::erase(uint32_t id) {
  if (m_reqs.erase(id)) m_live.fetch_sub(1);
}

// ---- helpers -------------------------------------------------------------------------------

Result<std::string> Scheduler::formatDocs(const std::vector<retrieval::SearchHit>& hits) {
  std::string out;
  for (const auto& h : hits) {
    if (h.id < 0) continue;
    const int64_t pid = retrieval::PassageIndex::passageId(h.id);
    auto it = m_passageText.find(pid);
    if (it == m_passageText.end()) {
      RAG_ASSIGN_OR_RETURN(Passage p, m_reader->passage(pid));
      if (m_passageText.size() > 200000) m_passageText.clear();
      it = m_passageText.emplace(pid, corpus::formatPassage(p, corpus::PassageStyle{}) + "\n").first;
    }
    out += it->second;
  }
  return out;
}

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
