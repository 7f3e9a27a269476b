#include "sched/retrieval_worker.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <unordered_set>

#include "core/clock.h"
#include "core/fork_join.h"
#include "knowledge/knowledge_use.h"
#include "model/text_embedder.h"
#include "retrieval/passage_index.h"
#include "retrieval/substage_planner.h"
#include "telemetry/trace_ring.h"
#include "telemetry/trace_zone.h"

namespace rag::sched {

namespace {

// Reciprocal-rank fusion's constant for the BM25 rankings of one query's texts (lexicalRanking):
// Cormack et al.'s 60. With two texts the choice hardly matters: the last gold passage in BM25's
// top 5 for HyDE's "{hypothesis} {question} | {question}" on 1,000 test questions was 0.861 at
// c 1, 5 and 60 alike (0.816 for the concatenated text alone, 0.867 for the question alone).
constexpr double kQueryFusionC = 60.0;

std::vector<retrieval::SearchHit> firstK(std::vector<retrieval::SearchHit> hits, int32_t k) {
  if (hits.size() > static_cast<size_t>(k)) hits.resize(static_cast<size_t>(k));
  return hits;
}

}  // namespace

RetrievalWorker::RetrievalWorker(const model::TextEmbedder& embedder, const retrieval::PassageIndex& index,
                                 RetrievalWorkerParams params)
    : m_embedder(embedder), m_index(index), m_params(std::move(params)) {
  m_clusterOfIds = m_index.ivf().clusterOfIds();
  if (m_params.clusterStore) {
    Result<retrieval::ClusterCache> cache =
        retrieval::ClusterCache::create(m_index.ivf(), *m_params.clusterStore, m_params.clusterCache);
    if (cache) m_cache.emplace(std::move(*cache));  // else: searched on the CPU (stats say so)
    if (m_cache && m_params.ring) {
      m_gpuLane = m_params.ring->registerLane("gpu", LaneKind::Gpu);
      m_swapLane = m_params.ring->registerLane("gpu-cache swaps", LaneKind::GpuCacheSwaps);
    }
  }
  if (m_params.ring) {
    m_lane = m_params.ring->registerLane("retrieval", LaneKind::Retrieval);
    // "embedding · cuda:0" with the query encoder on a GPU (--encoder-device).
    m_embedLane = m_params.ring->registerLane(deviceLaneName("embedding", m_embedder.device()), LaneKind::Embedding);
  }
  m_thread = std::thread([this] { loop(); });
  if (m_params.embedAhead) m_embedThread = std::thread([this] { embedLoop(); });
}

RetrievalWorker::~RetrievalWorker() {
  m_stop = true;
  m_inbox.poke();
  m_embedded.poke();
  if (m_embedThread.joinable()) m_embedThread.join();
  if (m_thread.joinable()) m_thread.join();
}

// The GPU part of a hybrid step on its own lane, and cache swaps as instants on another, so the
// timeline shows the device next to the CPU search.
void RetrievalWorker::traceGpuWork(const retrieval::HybridStepStats& h, uint64_t beginNs) {
  if (!m_params.ring || !m_cache) return;
  if (h.deviceVisits > 0) {
    TraceEvent ev;
    ev.beginNs = beginNs;
    ev.endNs = beginNs + static_cast<uint64_t>(h.deviceSeconds * 1e9);
    ev.lane = m_gpuLane;
    ev.stage = TraceStage::ClusterScan;
    ev.flags = kTraceGpu;
    ev.arg0 = static_cast<uint32_t>(h.deviceVisits);
    m_params.ring->push(ev);
  }
  const retrieval::ClusterCacheStats& cs = m_cache->stats();
  if (cs.uploads != m_swapsSeen.first || cs.evictions != m_swapsSeen.second) {
    TraceEvent ev;
    ev.beginNs = ev.endNs = nowNs();
    ev.lane = m_swapLane;
    ev.stage = TraceStage::CacheSwap;
    ev.flags = kTraceInstant | kTraceGpu;
    ev.arg0 = static_cast<uint32_t>(cs.uploads - m_swapsSeen.first);
    ev.arg1 = static_cast<uint32_t>(cs.evictions - m_swapsSeen.second);
    m_params.ring->push(ev);
    m_swapsSeen = {cs.uploads, cs.evictions};
  }
}

std::vector<uint8_t> RetrievalWorker::clusterResidency() const {
  std::lock_guard lock(m_residencyMutex);
  return m_residency;
}

void RetrievalWorker::add(RetrievalJob job) { m_inbox.push(Command{.cancel = false, .job = std::move(job)}); }

void RetrievalWorker::cancel(JobKey key) {
  Command c;
  c.cancel = true;
  c.job.key = key;
  m_inbox.push(std::move(c));
}

std::vector<retrieval::SearchHit> RetrievalWorker::answerFromCache(const retrieval::LocalCache& cache,
                                                                   std::span<const float> query,
                                                                   int32_t k) const {
  // Observation (1) of §4.3: the next query's results tend to lie among the previous query's
  // larger top-k, so score those vectors first.
  const int64_t dim = m_index.dim();
  const std::span<const float> vectors = m_index.vectors();
  std::vector<retrieval::SearchHit> hits;
  for (const retrieval::SearchHit& h : cache.top) {
    if (h.id < 0 || h.id >= m_index.size()) continue;
    const float* v = vectors.data() + h.id * dim;
    float s = 0;
    for (int64_t d = 0; d < dim; ++d) s += v[d] * query[static_cast<size_t>(d)];
    hits.push_back({h.id, s});
  }
  std::stable_sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.similarity > b.similarity; });
  return firstK(std::move(hits), k);
}

Status RetrievalWorker::openBm25() {
  if (m_bm25) return Status::ok();
  if (m_params.corpus.empty())
    return Status::invalidArgument("BM25 retrieval and reranking need the corpus its index is built from; this engine was given none");
  RAG_ASSIGN_OR_RETURN(retrieval::Bm25Index idx, retrieval::Bm25Index::openOrBuild(m_params.corpus, m_params.bm25Path));
  m_bm25.emplace(std::move(idx));
  return Status::ok();
}

Status RetrievalWorker::rerankTop(const RetrievalJob& job, std::vector<retrieval::SearchHit>& hits) {
  if (!job.rerank || hits.size() < 2) return Status::ok();
  RAG_RETURN_IF_ERROR(openBm25());
  std::string text = job.query;
  for (const std::string& t : job.alsoQueries) text += ' ' + t;
  std::vector<int64_t> ids;  // passage ids are index rows + 1
  for (const retrieval::SearchHit& h : hits) ids.push_back(h.id < 0 ? -1 : h.id + 1);
  RAG_ASSIGN_OR_RETURN(std::vector<size_t> order, m_bm25->rankAmong(text, ids));
  std::vector<retrieval::SearchHit> out;
  out.reserve(hits.size());
  for (size_t i : order) out.push_back(hits[i]);
  hits = std::move(out);
  return Status::ok();
}

// BM25's top k for `query` (the index opened on first use).
Result<std::vector<retrieval::SearchHit>> RetrievalWorker::lexicalHits(const std::string& query, int32_t k) {
  RAG_RETURN_IF_ERROR(openBm25());
  std::string key = std::to_string(k) + ' ' + query;
  if (auto seen = m_lexicalSeen.find(key); seen != m_lexicalSeen.end()) return seen->second;
  RAG_ASSIGN_OR_RETURN(std::vector<int64_t> ids, m_bm25->search(query, k));
  std::vector<retrieval::SearchHit> hits;
  for (size_t r = 0; r < ids.size(); ++r)  // passage ids are index rows + 1; the score is 1 / rank
    hits.push_back({ids[r] - 1, 1.0f / static_cast<float>(r + 1)});
  if (m_lexicalSeen.size() >= 4096) m_lexicalSeen.clear();
  m_lexicalSeen.emplace(std::move(key), hits);
  return hits;
}

Result<std::vector<retrieval::SearchHit>> RetrievalWorker::lexicalRanking(const RetrievalJob& job, int32_t k,
                                                                           int32_t depth) {
  if (job.alsoQueries.empty()) return lexicalHits(job.query, k);
  std::vector<std::vector<int64_t>> rankings;
  for (size_t i = 0; i <= job.alsoQueries.size(); ++i) {
    RAG_ASSIGN_OR_RETURN(std::vector<retrieval::SearchHit> hits,
                         lexicalHits(i == 0 ? job.query : job.alsoQueries[i - 1], std::max(k, depth)));
    rankings.emplace_back();
    for (const retrieval::SearchHit& h : hits) rankings.back().push_back(h.id);
  }
  const std::vector<int64_t> fused = retrieval::reciprocalRankFusion(rankings, k, kQueryFusionC);
  std::vector<retrieval::SearchHit> hits;
  for (size_t r = 0; r < fused.size(); ++r) hits.push_back({fused[r], 1.0f / static_cast<float>(r + 1)});
  return hits;
}

RetrievalUpdate RetrievalWorker::knowledgeUpdate(const RetrievalJob& job) {
  RetrievalUpdate u{.key = job.key, .final = true};
  u.knowledge = true;
  if (!m_kg) {
    if (m_params.corpus.empty()) {
      u.error = Status::invalidArgument("knowledge-graph retrieval needs the corpus; this engine was given none");
      return u;
    }
    Result<std::shared_ptr<const knowledge::KnowledgeGraph>> kg = knowledge::KnowledgeGraph::load(m_params.corpus);
    Result<corpus::QaPromptReader> reader = corpus::QaPromptReader::open(m_params.corpus);
    if (!kg || !reader) {
      u.error = !kg ? kg.status() : reader.status();
      return u;
    }
    m_reader.emplace(std::move(*reader));
    m_kg = std::make_unique<knowledge::KgRetriever>(
        std::move(*kg),
        [this](std::span<const std::string> texts) {
          return m_embedder.embed(texts, 32, m_params.embedAhead ? nullptr : m_embedTeam.get());
        },
        [this](std::string_view q, int32_t k) -> Result<std::vector<int64_t>> {
          RAG_ASSIGN_OR_RETURN(std::vector<retrieval::SearchHit> hits, lexicalHits(std::string(q), k));
          std::vector<int64_t> ids;
          for (const retrieval::SearchHit& h : hits) ids.push_back(retrieval::PassageIndex::passageId(h.id));
          return ids;
        },
        [this](int64_t pid) -> Result<std::string> {
          RAG_ASSIGN_OR_RETURN(Passage p, m_reader->passage(pid));
          return std::move(p.text);
        });
  }
  Result<knowledge::KgResult> r = m_kg->retrieve(job.query, *job.knowledge);
  if (!r) {
    u.error = r.status();
    return u;
  }
  u.graphs = knowledge::subgraphTexts(m_kg->graph(), r->subgraphs);
  for (const knowledge::Subgraph& g : r->subgraphs) u.paths += static_cast<int64_t>(g.paths.size());
  u.note = r->note;
  u.use = knowledge::knowledgeUse(m_kg->graph(), job.query, *r);
  return u;
}

void RetrievalWorker::embedQueries(std::span<Command* const> jobs, ForkJoin* team) {
  if (jobs.empty()) return;
  // Every job's texts: its query, then its alsoQueries; those not embedded before go in one batch.
  const auto dim = static_cast<size_t>(m_embedder.dim());
  std::vector<std::string> texts;
  std::vector<size_t> firstText;
  for (const Command* c : jobs) {
    firstText.push_back(texts.size());
    texts.push_back(c->job.query.empty() ? std::string(" ") : c->job.query);
    for (const std::string& t : c->job.alsoQueries) texts.push_back(t.empty() ? std::string(" ") : t);
  }
  firstText.push_back(texts.size());
  std::vector<std::string> fresh;  // distinct texts to embed, in order
  std::unordered_map<std::string, std::vector<float>> embedded;  // this call's vectors, by text
  {
    std::unordered_set<std::string_view> pending;
    std::lock_guard lock(m_embeddingSeenMutex);
    for (const std::string& t : texts)
      if (auto seen = m_embeddingSeen.find(t); seen != m_embeddingSeen.end()) embedded.emplace(t, seen->second);
      else if (pending.insert(t).second) fresh.push_back(t);
  }
  Status failed;
  if (!fresh.empty()) {
    Result<std::vector<float>> vectors = Status::internal("not embedded");
    RAG_TRACE_ZONE(zone, m_params.ring, m_embedLane, TraceStage::Embed, jobs.size() == 1 ? jobs[0]->job.requestId : 0);
    zone.setArgs(static_cast<uint32_t>(jobs.size()));
    if (!m_params.deterministic || fresh.size() == 1) {
      vectors = m_embedder.embed(fresh, 32, team);
    } else {
      std::vector<float> all;
      for (const std::string& t : fresh) {
        Result<std::vector<float>> one = m_embedder.embed(std::span<const std::string>(&t, 1), 32, team);
        if (!one) { vectors = one.status(); break; }
        all.insert(all.end(), one->begin(), one->end());
      }
      if (all.size() == fresh.size() * dim) vectors = std::move(all);
    }
    if (vectors) {
      std::lock_guard lock(m_embeddingSeenMutex);
      if (m_embeddingSeen.size() + fresh.size() > 4096) m_embeddingSeen.clear();
      for (size_t f = 0; f < fresh.size(); ++f) {
        std::vector<float> v(vectors->begin() + static_cast<std::ptrdiff_t>(f * dim),
                             vectors->begin() + static_cast<std::ptrdiff_t>((f + 1) * dim));
        m_embeddingSeen[fresh[f]] = v;
        embedded.emplace(fresh[f], std::move(v));
      }
    } else {
      failed = vectors.status();
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (!failed.isOk()) {
      jobs[i]->vector.emplace(failed);
      continue;
    }
    // One text: its vector. Several: their mean (HyDE's query vector; inner-product rankings do
    // not depend on its length).
    std::vector<float> v(dim, 0.0f);
    const size_t n = firstText[i + 1] - firstText[i];
    for (size_t t = firstText[i]; t < firstText[i + 1]; ++t) {
      const std::vector<float>& e = embedded.at(texts[t]);
      for (size_t d = 0; d < dim; ++d) v[d] += e[d];
    }
    if (n > 1)
      for (float& x : v) x /= static_cast<float>(n);
    jobs[i]->vector.emplace(std::move(v));
  }
}

// The embedding lane (embedAhead): takes the scheduler's commands, embeds every new job that
// searches the IVF in one batch, and hands all of them, in order, to the search thread.
void RetrievalWorker::embedLoop() {
  if (m_params.threads > 1) m_embedTeam = std::make_unique<ForkJoin>(m_params.threads);
  std::vector<Command> commands;
  std::vector<Command*> toEmbed;
  while (!m_stop.load()) {
    m_inbox.takeAll(commands, std::chrono::milliseconds(50));
    if (commands.empty()) continue;
    toEmbed.clear();
    for (Command& c : commands)
      if (!c.cancel && searchesIvf(c.job)) toEmbed.push_back(&c);
    if (!toEmbed.empty()) {
      m_embedding.store(static_cast<int32_t>(toEmbed.size()), std::memory_order_relaxed);
      const uint64_t t0 = nowNs();
      embedQueries(toEmbed, m_embedTeam.get());
      if (m_params.embedLoad) m_params.embedLoad->addBusy(nowNs() - t0);
    }
    for (Command& c : commands) m_embedded.push(std::move(c));
    m_embedding.store(0, std::memory_order_relaxed);
    commands.clear();
  }
}

// Answers knowledge and BM25 jobs in full, embeds the IVF jobs not embedded yet, and makes
// their search tasks (cluster order and local-cache answer).
void RetrievalWorker::admit(std::vector<Command>& jobs, std::vector<RetrievalUpdate>& out) {
  // Knowledge and BM25 jobs need no IVF: answered here, in full.
  std::erase_if(jobs, [&](const Command& c) {
    const RetrievalJob& job = c.job;
    if (searchesIvf(job)) return false;
    RAG_TRACE_ZONE(zone, m_params.ring, m_lane, TraceStage::RetrievalStep, job.requestId);
    if (job.knowledge) {
      out.push_back(knowledgeUpdate(job));
      return true;
    }
    Result<std::vector<retrieval::SearchHit>> hits =
        lexicalRanking(job, job.k, static_cast<int32_t>(m_params.localCacheKeep));
    RetrievalUpdate u{.key = job.key, .final = true};
    Status reranked = hits ? rerankTop(job, *hits) : hits.status();
    if (reranked) u.top = std::move(*hits);
    else u.error = reranked;
    out.push_back(std::move(u));
    return true;
  });
  if (jobs.empty()) return;
  std::vector<Command*> toEmbed;
  for (Command& c : jobs)
    if (!c.vector) toEmbed.push_back(&c);
  embedQueries(toEmbed, m_embedTeam.get());
  const bool subStages = m_params.pacing == RetrievalPacing::SubStages;
  for (Command& c : jobs) {
    RetrievalJob& job = c.job;
    if (!*c.vector) {
      out.push_back(RetrievalUpdate{.key = job.key, .final = true, .error = c.vector->status()});
      continue;
    }
    std::span<const float> q(**c.vector);
    // The larger top-k is kept for the next retrieval's local cache; the first k of a top-20
    // are the top-k.
    // Hybrid fuses the dense top-20 whatever the policy, so its results never depend on it.
    const int32_t searchK = m_params.keepLocalCache || job.method == RetrievalMethod::Hybrid
                                ? std::max<int32_t>(job.k, static_cast<int32_t>(m_params.localCacheKeep))
                                : job.k;
    Result<retrieval::SearchTask> task = m_index.ivf().makeTask(q, searchK, job.nprobe);
    if (task && subStages && job.hint) {
      std::vector<int64_t> order = retrieval::reorderClusters(task->clusters(), *job.hint);
      task = m_index.ivf().makeTask(q, searchK, order);
    }
    if (!task) {
      out.push_back(RetrievalUpdate{.key = job.key, .final = true, .error = task.status()});
      continue;
    }
    Live l{std::move(job), std::move(*task), false, std::nullopt};
    if (!l.job.speculative) {
      if (Status s = lookUpLexical(l); !s) {
        out.push_back(RetrievalUpdate{.key = l.job.key, .final = true, .error = s});
        continue;
      }
    }
    if (m_params.partialAtShare == 0.0 && !l.job.speculative && l.job.hint && !l.job.hint->top.empty()) {
      RetrievalUpdate u{.key = l.job.key, .fromLocalCache = true};
      Result<std::vector<retrieval::SearchHit>> top = postedTop(l, answerFromCache(*l.job.hint, q, searchK));
      if (!top) {
        out.push_back(RetrievalUpdate{.key = l.job.key, .final = true, .error = top.status()});
        continue;
      }
      u.top = std::move(*top);
      u.clustersTotal = static_cast<int64_t>(l.task.clusters().size());
      out.push_back(std::move(u));
      l.partialPosted = true;
    }
    m_live.push_back(std::move(l));
  }
  jobs.clear();
}

Status RetrievalWorker::lookUpLexical(Live& l) {
  if (l.job.method != RetrievalMethod::Hybrid || l.lexical) return Status::ok();
  // As deep as the dense top-20 it is fused with (see admit).
  const int32_t depth = std::max<int32_t>(l.job.k, static_cast<int32_t>(m_params.localCacheKeep));
  RAG_ASSIGN_OR_RETURN(std::vector<retrieval::SearchHit> hits, lexicalRanking(l.job, depth, depth));
  l.lexical.emplace();
  for (const retrieval::SearchHit& h : hits) l.lexical->push_back(h.id);
  return Status::ok();
}

Result<std::vector<retrieval::SearchHit>> RetrievalWorker::postedTop(const Live& l, std::vector<retrieval::SearchHit> dense) {
  if (l.job.method != RetrievalMethod::Hybrid) {
    std::vector<retrieval::SearchHit> top = firstK(std::move(dense), l.job.k);
    RAG_RETURN_IF_ERROR(rerankTop(l.job, top));
    return top;
  }
  // The dense top-20 (see admit) fused with BM25's top-20 (retrieval::hybridFusion), by the
  // constants measured for this embedder (ServingAssets::fusion).
  std::vector<int64_t> ids;
  for (const retrieval::SearchHit& h : dense) ids.push_back(h.id);
  std::vector<retrieval::SearchHit> fused;
  static const std::vector<int64_t> kNone;  // lookUpLexical ran before every call; dense alone otherwise
  for (int64_t row : retrieval::hybridFusion(ids, l.lexical ? *l.lexical : kNone, l.job.k, m_params.fusion)) {
    auto hit = std::find_if(dense.begin(), dense.end(), [&](const retrieval::SearchHit& h) { return h.id == row; });
    fused.push_back({row, hit != dense.end() ? hit->similarity : 0.0f});
  }
  RAG_RETURN_IF_ERROR(rerankTop(l.job, fused));
  return fused;
}

RetrievalUpdate RetrievalWorker::finalUpdate(Live& l) {
  RetrievalUpdate u{.key = l.job.key, .final = true};
  if (Status s = lookUpLexical(l); !s) {
    u.error = s;
    return u;
  }
  u.cache = retrieval::LocalCache::remember(l.task, m_clusterOfIds, m_params.localCacheKeep);
  Result<std::vector<retrieval::SearchHit>> top = postedTop(l, l.task.topK());
  if (!top) {
    u.error = top.status();
    return u;
  }
  u.top = std::move(*top);
  u.clustersSearched = static_cast<int64_t>(l.task.cursor());
  u.clustersTotal = static_cast<int64_t>(l.task.clusters().size());
  return u;
}

// One search turn over the live tasks: to the end (Turns, Batches) or one sub-stage.
void RetrievalWorker::searchTurn(std::vector<RetrievalUpdate>& out) {
  if (m_live.empty()) return;
  const bool subStages = m_params.pacing == RetrievalPacing::SubStages;
  // The searches with clusters left: what the budget is sized for and the plan advances.
  std::vector<Live*> unfinished;
  std::vector<SearchRank> ranks;
  for (Live& l : m_live)
    if (!l.task.done()) {
      unfinished.push_back(&l);
      ranks.push_back({.requestId = l.job.requestId, .speculative = l.job.speculative});
    }
  double budget = std::numeric_limits<double>::infinity();
  if (subStages) {
    if (m_params.fixedBudgetSeconds > 0) {
      budget = m_params.fixedBudgetSeconds;
    } else {
      // Before anything is measured: the cost model's time for a whole search, 200 µs overhead.
      double tR = m_tRetrieval.value(), beta = m_beta.value();
      if (m_tRetrieval.samples() == 0) {
        const auto& cm = m_index.ivf().costModel();
        const double avgList = static_cast<double>(m_index.size()) / static_cast<double>(std::max<int64_t>(1, m_index.ivf().nlist()));
        tR = cm.seconds(static_cast<int64_t>(avgList)) * static_cast<double>(m_live.front().task.clusters().size());
      }
      if (m_beta.samples() == 0) beta = 2e-4;
      if (m_params.stageBudget) {
        std::vector<double> left;
        for (const Live* l : unfinished)
          left.push_back(static_cast<double>(l->task.clustersLeft()) /
                         static_cast<double>(std::max<size_t>(1, l->task.clusters().size())));
        tR = retrievalStageSeconds(tR, left);
      }
      const double floor = m_params.generationStepSeconds ? m_params.generationStepSeconds() : 0.0;
      budget = optimalSubStageSeconds(tR, beta, std::max(1e-4, floor));
    }
    m_budget.store(budget, std::memory_order_relaxed);
  }
  // The sub-stage's plan (retrieval/substage_planner.h): the unfinished searches in priority
  // order (subStageOrder: oldest request first, speculative ones last) under the policy's
  // strategy. Shared scans need the CPU to read every cluster, so they are off while the GPU
  // cluster cache splits the clusters.
  std::vector<retrieval::SearchTask*> tasks;
  for (size_t i : subStageOrder(ranks, m_params.planning)) tasks.push_back(&unfinished[i]->task);
  // With the cache, clusters resident on the device are planned free: the budget is the CPU's.
  const bool oldestFirst = subStages && m_params.planning != SubStagePlanning::RoundRobin;
  const bool shared = oldestFirst && m_params.sharedScans && !m_cache;
  const std::vector<uint8_t> onDevice = m_cache ? m_cache->residentMask() : std::vector<uint8_t>();
  Result<retrieval::SubStagePlan> plan = retrieval::planSubStage(
      m_index.ivf(), tasks, budget,
      {.order = oldestFirst ? retrieval::PlanOrder::OldestFirst : retrieval::PlanOrder::RoundRobin,
       .scan = shared ? retrieval::ScanMode::Shared : retrieval::ScanMode::Alone,
       .threads = retrieval::IvfIndex::searchThreads(),
       .onDevice = onDevice});
  const uint64_t t0 = nowNs();
  Result<retrieval::StepStats> stats = Status::internal("no step");
  {
    RAG_TRACE_ZONE(zone, m_params.ring, m_lane, TraceStage::RetrievalStep, tasks.size() == 1 ? unfinished[0]->job.requestId : 0);
    if (!plan) {
      stats = plan.status();
    } else if (m_cache) {
      Result<retrieval::HybridStepStats> h = m_cache->step(tasks, *plan);
      if (h) {
        traceGpuWork(*h, t0);
        stats = h->cpu;
        stats->clustersSearched += h->deviceVisits;
        zone.addFlags(h->deviceVisits > 0 ? kTraceGpu : 0);
        m_cacheHitRate.store(m_cache->stats().hitRate(), std::memory_order_relaxed);
        std::vector<uint8_t> residency;
        for (retrieval::ClusterResidency c : m_cache->snapshot()) residency.push_back(static_cast<uint8_t>(c));
        std::lock_guard lock(m_residencyMutex);
        m_residency = std::move(residency);
      } else {
        stats = h.status();
      }
    } else {
      stats = m_index.ivf().execute(tasks, *plan);
    }
    if (stats) zone.setArgs(static_cast<uint32_t>(stats->clustersSearched), static_cast<uint32_t>(stats->tasksAdvanced));
    if (subStages && tasks.size() == 1 && unfinished[0]->job.speculative) zone.addFlags(kTraceSpeculative);
  }
  const uint64_t t1 = nowNs();
  m_subStages.fetch_add(1, std::memory_order_relaxed);
  if (!stats) {
    for (Live& l : m_live) out.push_back(RetrievalUpdate{.key = l.job.key, .final = true, .error = stats.status()});
    m_live.clear();
    return;
  }
  const double stepSeconds = static_cast<double>(t1 - t0) * 1e-9;
  // Read before m_live is rebuilt below: `tasks` points into its elements, which the move frees
  // (AddressSanitizer's heap-use-after-free in engine_test_torch_scheduler).
  const double clustersPerTask = tasks.empty() ? 0.0 : static_cast<double>(tasks.front()->clusters().size());
  std::vector<Live> still;
  for (Live& l : m_live) {
    if (l.task.done()) {
      out.push_back(finalUpdate(l));
      continue;
    }
    const double searched = static_cast<double>(l.task.cursor());
    const double all = static_cast<double>(l.task.clusters().size());
    if (m_params.partialAtShare && !l.job.speculative && !l.partialPosted && searched >= *m_params.partialAtShare * all) {
      Result<std::vector<retrieval::SearchHit>> top = postedTop(l, l.task.topK());
      // A partial that cannot be reranked is not posted; the final update carries the error.
      if (!top) {
        still.push_back(std::move(l));
        continue;
      }
      RetrievalUpdate u{.key = l.job.key, .top = std::move(*top)};
      u.clustersSearched = static_cast<int64_t>(l.task.cursor());
      u.clustersTotal = static_cast<int64_t>(l.task.clusters().size());
      out.push_back(std::move(u));
      l.partialPosted = true;
    }
    still.push_back(std::move(l));
  }
  m_live = std::move(still);
  // A whole search's time, scaled to one task, feeds t_R. β is what a sub-stage costs beyond
  // the scanning itself: the step's wall time over the cost model's estimate of its scans
  // (planning, the FAISS call and its threads) plus handing the partial results over.
  if (subStages && stats->tasksAdvanced > 0 && stats->clustersSearched > 0) {
    const double perCluster = stepSeconds / static_cast<double>(stats->clustersSearched) * static_cast<double>(stats->tasksAdvanced);
    m_tRetrieval.add(perCluster * clustersPerTask);
    const double overhead = std::max(0.0, stepSeconds - stats->estimatedSeconds);
    m_beta.add(overhead + static_cast<double>(nowNs() - t1) * 1e-9);
  }
}

void RetrievalWorker::loop() {
  omp_set_num_threads(std::max(1, m_params.threads));
  if (m_params.threads > 1 && !m_params.embedAhead) m_embedTeam = std::make_unique<ForkJoin>(m_params.threads);
  // The scheduler's commands, or (embedAhead) the same commands with their vectors.
  Mailbox<Command>& inbox = m_params.embedAhead ? m_embedded : m_inbox;
  std::vector<Command> commands;
  std::vector<RetrievalUpdate> out;
  auto flush = [&] {
    if (!out.empty() && m_params.post) m_params.post(std::move(out));
    out.clear();
  };
  while (!m_stop.load()) {
    const bool idle = m_pending.empty() && m_live.empty();
    inbox.takeAll(commands, idle ? std::chrono::milliseconds(50) : std::chrono::milliseconds(0));
    for (Command& c : commands) {
      if (!c.cancel) {
        m_pending.push_back(std::move(c));
        continue;
      }
      std::erase_if(m_pending, [&](const Command& p) { return p.job.key == c.job.key; });
      std::erase_if(m_live, [&](const Live& l) { return l.job.key == c.job.key; });
    }
    commands.clear();
    // Embedding and search, timed for the load gauge (an idle pass adds microseconds).
    auto work = [&](std::vector<Command>& jobs) {
      const uint64_t t0 = nowNs();
      admit(jobs, out);
      searchTurn(out);
      if (m_params.load) m_params.load->addBusy(nowNs() - t0);
    };
    if (m_params.pacing == RetrievalPacing::Turns) {
      // One request's retrieval at a time, start to end, while generation waits its turn (the
      // wait is not work).
      if (!m_pending.empty()) {
        TurnGuard turn(m_params.turns);
        std::vector<Command> one;
        one.push_back(std::move(m_pending.front()));
        m_pending.erase(m_pending.begin());
        work(one);
      }
    } else {
      work(m_pending);
    }
    m_liveCount.store(static_cast<int32_t>(m_live.size() + m_pending.size()), std::memory_order_relaxed);
    flush();
  }
}

}  // namespace rag::sched
