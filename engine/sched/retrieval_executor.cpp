#include "sched/retrieval_executor.h"

#include <algorithm>

#include "model/prompt.h"
#include "retrieval/passage_index.h"
#include "sched/serving_assets.h"
#if RAGWB_HAVE_CUDA
#include "cuda_cluster_store.h"
#endif

namespace rag::sched {

RetrievalExecutor::RetrievalExecutor(const ServingAssets& assets, const ServingParams& params,
                                     corpus::QaPromptReader reader)
    : m_assets(assets),
      m_params(params),
      m_load(kWorkerLoopThreads),
      m_embedLoad(kWorkerLoopThreads),
      m_reader(std::move(reader)) {}

RetrievalExecutor::~RetrievalExecutor() { m_worker.reset(); }

Result<std::unique_ptr<RetrievalExecutor>> RetrievalExecutor::create(const ServingAssets& assets,
                                                                     const ServingParams& params, TurnLock* turns,
                                                                     TraceRing* ring,
                                                                     std::function<double()> generationStepSeconds,
                                                                     std::function<void()> wake) {
  RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(assets.corpus));
  std::unique_ptr<RetrievalExecutor> ex(new RetrievalExecutor(assets, params, std::move(reader)));
  ex->m_wake = std::move(wake);
  const ServePolicy& policy = params.policy;
  const bool subStages = policy.retrieval == RetrievalPacing::SubStages;
  // The partial GPU cluster cache (§4.4), when the policy wants it and a CUDA device is there.
  std::unique_ptr<retrieval::ClusterStore> store;
#if RAGWB_HAVE_CUDA
  if (subStages && policy.gpuCache && params.gpuCacheBytes > 0) {
    if (auto s = cuda::makeCudaClusterStore()) store = std::move(*s);
  }
#endif
  // Filled at start (largest clusters first) and kept current at least every 100 ms, so that a
  // short run under load is served by a warm cache (see ClusterCacheParams).
  retrieval::ClusterCacheParams cacheParams;
  cacheParams.capacityBytes = params.gpuCacheBytes;
  cacheParams.warmStart = true;
  cacheParams.maxUpdateSeconds = 0.1;
  RetrievalExecutor* self = ex.get();
  ex->m_worker = std::make_unique<RetrievalWorker>(
      *assets.embedder, *assets.index,
      RetrievalWorkerParams{.pacing = policy.retrieval,
                            .threads = params.retrievalThreads,
                            .deterministic = params.deterministic,
                            .fixedBudgetSeconds = params.subStageSeconds,
                            .stageBudget = policy.stageBudget,
                            .planning = policy.planning,
                            .sharedScans = policy.sharedScans,
                            .keepLocalCache = policy.reorder,
                            .generationStepSeconds = std::move(generationStepSeconds),
                            .partialAtShare = subStages && policy.speculation
                                                  ? std::optional<double>(params.specMinSearchedShare)
                                                  : std::nullopt,
                            .corpus = assets.corpus,
                            .bm25Path = {},  // <corpus>.fts
                            .fusion = assets.fusion,
                            .embedAhead = subStages && policy.embedAhead,
                            .turns = turns,
                            .ring = ring,
                            .load = &ex->m_load,
                            .embedLoad = &ex->m_embedLoad,
                            .post = [self](std::vector<RetrievalUpdate> us) {
                              for (RetrievalUpdate& u : us) self->m_updates.push(std::move(u));
                              self->m_wake();
                            },
                            .clusterStore = std::move(store),
                            .clusterCache = cacheParams});
  return ex;
}

bool RetrievalExecutor::reads(const WorkflowNode& node, std::string_view var) const {
  Result<std::vector<std::string>> vars = queryVariables(node.query);
  return vars && std::find(vars->begin(), vars->end(), var) != vars->end();
}

Status RetrievalExecutor::start(const StageJob& job) {
  const WorkflowNode& node = *job.node;
  const Variables& vars = job.inputs->vars;
  RetrievalJob r;
  r.key = job.key;
  r.requestId = job.requestId;
  // A knowledge node searches its query's parts as one text; a retrieval node each part that is
  // not empty (the first as `query`, the rest fused with it: RetrievalJob::alsoQueries).
  std::vector<std::string> texts;
  if (node.kind == NodeKind::Knowledge) texts.push_back(queryText(node.query, vars));
  else texts = queryTexts(node.query, vars);
  for (std::string& t : texts) t = trimmedText(t);
  std::erase_if(texts, [](const std::string& t) { return t.empty(); });
  if (texts.empty()) {  // nothing to search with: the question
    auto question = vars.find(kQuestionVar);
    texts.push_back(question == vars.end() ? std::string() : question->second);
  }
  r.query = std::move(texts.front());
  r.alsoQueries.assign(std::make_move_iterator(texts.begin() + 1), std::make_move_iterator(texts.end()));
  r.k = static_cast<int32_t>(node.topk);
  r.nprobe = node.retrieval.nprobe > 0 ? node.retrieval.nprobe : m_params.nprobe;
  r.method = node.retrieval.method;
  r.rerank = node.retrieval.rerank == RetrievalRerank::Bm25;
  r.speculative = job.speculative;
  if (node.kind == NodeKind::Knowledge)
    r.knowledge = knowledge::KgParams{.subgraphs = static_cast<int32_t>(node.topk),
                                      .hops = static_cast<int32_t>(node.knowledge.hops),
                                      .fanout = static_cast<int32_t>(node.knowledge.fanout),
                                      .topK = static_cast<int32_t>(node.knowledge.paths)};
  if (m_params.policy.reorder && m_params.policy.retrieval == RetrievalPacing::SubStages) {
    auto cache = m_localCache.find(job.requestId);
    if (cache != m_localCache.end()) r.hint = cache->second;
  }
  m_live[job.key] = job.requestId;
  m_worker->add(std::move(r));
  return Status::ok();
}

void RetrievalExecutor::cancel(JobKey key) {
  if (m_live.erase(key)) m_worker->cancel(key);
}

Result<NodeOutput> RetrievalExecutor::outputOf(const std::vector<retrieval::SearchHit>& hits, int64_t clustersSearched) {
  NodeOutput out;
  out.work = clustersSearched;
  for (const retrieval::SearchHit& h : hits) {
    if (h.id < 0) continue;
    const int64_t pid = retrieval::PassageIndex::passageId(h.id);
    auto it = m_passageText.find(pid);
    if (it == m_passageText.end()) {
      RAG_ASSIGN_OR_RETURN(Passage p, m_reader.passage(pid));
      if (m_passageText.size() > 200000) m_passageText.clear();
      it = m_passageText.emplace(pid, model::passageText(p).text).first;
    }
    out.text += it->second;
    out.passages.push_back({pid, it->second});
  }
  return out;
}

// A knowledge node's output: the flat paths as its variable's text (what conditions and causal
// prompts read), the subgraphs for dependency prompts; the note when nothing was linked.
NodeOutput RetrievalExecutor::graphOutput(RetrievalUpdate& u) {
  NodeOutput out;
  out.text = model::flatGraphText(u.graphs);
  if (out.text.empty() && !u.note.empty()) out.text = "(" + u.note + ")\n";
  out.work = u.paths;
  out.graphs = std::move(u.graphs);
  out.knowledge = std::move(u.use);
  return out;
}

void RetrievalExecutor::collect(std::vector<StageUpdate>& out) {
  std::vector<RetrievalUpdate> raw;
  m_updates.takeAll(raw);
  for (RetrievalUpdate& u : raw) {
    auto live = m_live.find(u.key);
    if (live == m_live.end()) continue;  // cancelled
    const uint32_t requestId = live->second;
    StageUpdate s;
    s.key = u.key;
    if (u.final) {
      m_live.erase(live);
      s.final = true;
      if (u.cache) m_localCache[requestId] = std::move(*u.cache);
      Result<NodeOutput> o = !u.error.isOk() ? Result<NodeOutput>(u.error)
                             : u.knowledge   ? Result<NodeOutput>(graphOutput(u))
                                             : outputOf(u.top, u.clustersSearched);
      if (o) s.output = std::move(*o);
      else s.error = o.status();
    } else {
      Result<NodeOutput> o = outputOf(u.top, u.clustersSearched);
      if (!o) continue;  // a partial that cannot be read is not worth speculating on
      s.partial = std::move(*o);
    }
    out.push_back(std::move(s));
  }
}

bool RetrievalExecutor::roomToSpeculate() const {
  return m_worker->liveTasks() < m_params.specRetrievalLimit &&
         loadAllowsSpeculation(m_load.last(), m_params.specLoadThreshold);
}

}  // namespace rag::sched
