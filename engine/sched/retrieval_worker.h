// The retrieval worker: a thread that embeds queries and runs step-wise IVF search over the
// passage index (HedraRAG §5's retrieval worker with its extended `step`). The scheduler adds
// and cancels jobs through a mailbox; the worker posts one partial top-k per job for speculation
// (when asked to) and the final top-k when a job's cluster list is done.
//
// With embedAhead the queries are embedded on a second thread, the embedding lane, which hands
// each job with its vector to the search thread: a new query's encoder pass then overlaps the
// sub-stages in progress instead of holding them up, and runs on whatever core the search leaves
// (on a CPU host, the generation thread's idle time). Without it the search thread embeds every
// queued job itself before its next turn, as FlashRAG's retriever encodes then searches.
//
// How a turn looks depends on the pacing (rag/engine.h's RetrievalPacing):
//   Turns      one job at a time, its whole search in one call, holding the TurnLock;
//   Batches    every queued job embedded together, then all searched to the end in one call;
//              jobs that arrive meanwhile wait for the next turn;
//   SubStages  jobs join the live set at every sub-stage; one IvfIndex::step (or stepShared,
//              which reads a cluster once for every search visiting it) per sub-stage over the
//              live tasks within the budget mb of Eq. (1); a job with a local-cache hint is
//              first answered from that cache, then searched H_v-first (§4.3).
// The final top-k never depends on the policy: every task searches all of its nprobe clusters,
// only in another order (early termination is used for speculation, never for results).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "corpus/qa_prompt.h"
#include "knowledge/kg_retriever.h"
#include "rag/engine.h"
#include "retrieval/bm25_index.h"
#include "retrieval/cluster_cache.h"
#include "retrieval/ivf_index.h"
#include "retrieval/locality.h"
#include "sched/load_gauge.h"
#include "sched/mailbox.h"
#include "sched/stage_budget.h"

namespace rag {
class ForkJoin;
class TraceRing;
namespace model {
class TextEmbedder;
}
namespace retrieval {
class PassageIndex;
}
}  // namespace rag

namespace rag::sched {

using JobKey = uint64_t;

struct RetrievalJob {
  JobKey key = 0;
  uint32_t requestId = 0;
  std::string query;
  // More texts searched as one query with `query` (a node query's '|' parts): the dense vector
  // is the mean of all their embeddings (HyDE's query vector), BM25's ranking the
  // reciprocal-rank fusion of theirs (lexicalRanking). Knowledge jobs use `query` alone.
  std::vector<std::string> alsoQueries = {};
  int32_t k = 5;
  int64_t nprobe = 128;
  RetrievalMethod method = RetrievalMethod::Dense;
  // The top-k reordered by BM25 for the job's texts (RetrievalRerank::Bm25), partials included.
  bool rerank = false;
  std::optional<retrieval::LocalCache> hint;  // the request's previous retrieval (reorder)
  // Set: a knowledge-graph retrieval (knowledge/kg_retriever.h) for `query`, answered in full in
  // one turn (its related entities come from BM25, which needs no IVF search).
  std::optional<knowledge::KgParams> knowledge;
  bool speculative = false;                   // a speculative retrieval (§4.3)
};

struct RetrievalUpdate {
  JobKey key = 0;
  // ("= {}" lets designated initializers leave fields out without -Wmissing-field-initializers.)
  std::vector<retrieval::SearchHit> top = {};  // best first, at most k; ids are index rows
  bool final = false;
  bool fromLocalCache = false;  // answered from the hint's cached vectors, before any search
  int64_t clustersSearched = 0;
  int64_t clustersTotal = 0;
  std::optional<retrieval::LocalCache> cache = {};  // final: what the next retrieval can reuse
  Status error = {};
  // Knowledge jobs: the subgraphs' kept paths, and why there are none when there are none.
  bool knowledge = false;
  std::vector<model::SubgraphText> graphs = {};
  std::string note = {};
  int64_t paths = 0;  // paths scored (kept and pruned)
  std::shared_ptr<const KnowledgeUse> use = {};  // every path with its score, for inspectors
};

struct RetrievalWorkerParams {
  RetrievalPacing pacing = RetrievalPacing::SubStages;
  int32_t threads = 1;          // OpenMP threads for FAISS, and the embedder's team (the same cores: the two take turns)
  bool deterministic = false;   // embed queries one at a time
  double fixedBudgetSeconds = 0;  // > 0: use it instead of Eq. (1)
  // Eq. (1)'s t_R: the live searches' remaining work (true) or one search's time.
  bool stageBudget = true;
  // SubStages: which searches a sub-stage advances.
  SubStagePlanning planning = SubStagePlanning::OldestFirst;
  // SubStages with OldestFirst and no GPU cluster cache: a sub-stage reads each cluster once for
  // all the searches visiting it (IvfIndex::stepShared), which also plans the sub-stage.
  bool sharedScans = true;
  // Keep a larger top-k (localCacheKeep) for the next retrieval's local cache (reorder).
  bool keepLocalCache = true;
  // The generation sub-stage's duration (a decode step): a retrieval sub-stage is never cut
  // shorter, since the pipeline advances at that pace anyway (§4.2's alignment of the two).
  std::function<double()> generationStepSeconds;
  size_t localCacheKeep = 20;   // the larger top-k kept for the next retrieval
  // With speculation: post one partial top-k per job, at the first sub-stage that has
  // searched this share of its clusters (0: the local-cache answer); none: no partials at all.
  std::optional<double> partialAtShare;
  // BM25 and hybrid jobs: the corpus and its FTS5 index (retrieval/bm25_index.h; empty path:
  // <corpus>.fts), opened at the first such job.
  std::filesystem::path corpus;
  std::filesystem::path bm25Path;
  retrieval::HybridFusion fusion;  // hybrid jobs: how the dense and BM25 rankings are fused
  // Embed queries on a thread of their own, ahead of the search (see the top of this file).
  bool embedAhead = false;
  TurnLock* turns = nullptr;
  TraceRing* ring = nullptr;
  LoadGauge* load = nullptr;       // told the time of each search-thread turn (with embedAhead: search only)
  LoadGauge* embedLoad = nullptr;  // embedAhead: told the time of each embedding on the embedding thread
  std::function<void(std::vector<RetrievalUpdate>)> post;  // called on the worker thread
  // SubStages with a GPU: hot clusters on this device store (§4.4); null: every cluster on the CPU.
  std::unique_ptr<retrieval::ClusterStore> clusterStore;
  retrieval::ClusterCacheParams clusterCache;
};

class RetrievalWorker {
public:
  RetrievalWorker(const model::TextEmbedder& embedder, const retrieval::PassageIndex& index,
                  RetrievalWorkerParams params);
  ~RetrievalWorker();
  RetrievalWorker(const RetrievalWorker&) = delete;
  RetrievalWorker& operator=(const RetrievalWorker&) = delete;

  void add(RetrievalJob job);
  void cancel(JobKey key);

  // Jobs taken and not yet answered: embedding, waiting for their first sub-stage, or searching.
  int32_t liveTasks() const {
    return m_liveCount.load(std::memory_order_relaxed) + m_embedding.load(std::memory_order_relaxed);
  }
  // GPU cluster cache: null when there is none; else its visits on the device so far.
  bool clusterCacheActive() const { return m_cache.has_value(); }
  double clusterCacheHitRate() const { return m_cacheHitRate.load(std::memory_order_relaxed); }
  // Per-cluster residency (ClusterResidency values), copied after each sub-stage; empty without a cache.
  std::vector<uint8_t> clusterResidency() const;
  int64_t subStages() const { return m_subStages.load(std::memory_order_relaxed); }
  double budgetSeconds() const { return m_budget.load(std::memory_order_relaxed); }

private:
  struct Live {
    RetrievalJob job;
    retrieval::SearchTask task;
    bool partialPosted = false;
    // Hybrid: BM25's ranking for the query, so that every top-k the job posts (the local cache's
    // answer, a partial one, the final one) is fused the same way and speculation on a partial
    // top-k can match the final one. Looked up at admission, or for a speculative search (which
    // posts only its final top-k, and is often cancelled before) when it ends.
    std::optional<std::vector<int64_t>> lexical;
  };
  struct Command {
    bool cancel = false;
    RetrievalJob job;
    // Set on the embedding thread (embedAhead) for a job that searches the IVF: its query's
    // vector, or why it has none. Unset: the search thread embeds the job itself.
    std::optional<Result<std::vector<float>>> vector = {};
  };
  // Does this job search the IVF (and so need its query embedded)? Knowledge and BM25 jobs do not.
  static bool searchesIvf(const RetrievalJob& job) {
    return !job.knowledge && job.method != RetrievalMethod::Bm25;
  }
  void loop();
  void embedLoop();
  // Sets each job's vector (each searchesIvf): one encoder batch (one text at a time when
  // deterministic), traced on the embedding lane; every job gets the error when it fails.
  void embedQueries(std::span<Command* const> jobs, ForkJoin* team);
  void admit(std::vector<Command>& jobs, std::vector<RetrievalUpdate>& out);
  void searchTurn(std::vector<RetrievalUpdate>& out);
  RetrievalUpdate finalUpdate(Live& l);
  // Looks up a hybrid job's BM25 ranking (Live::lexical) unless it has it.
  Status lookUpLexical(Live& l);
  // The top-k a job posts from dense hits, best first: fused with its BM25 ranking when hybrid
  // (looked up before).
  // Reranked when the job asks (rerankTop).
  Result<std::vector<retrieval::SearchHit>> postedTop(const Live& l, std::vector<retrieval::SearchHit> dense);
  // `hits` reordered by BM25 for the job's texts together, when the job asks for it.
  Status rerankTop(const RetrievalJob& job, std::vector<retrieval::SearchHit>& hits);
  Status openBm25();  // m_bm25, at the first job that needs it
  // BM25's top `k` for `query`, best first, as index rows (what SearchHit ids are).
  Result<std::vector<retrieval::SearchHit>> lexicalHits(const std::string& query, int32_t k);
  // BM25's top `k` for a job: its query's, or with alsoQueries every text's top `depth` fused by
  // reciprocal rank (equal weights, kQueryFusionC) and cut to `k`.
  Result<std::vector<retrieval::SearchHit>> lexicalRanking(const RetrievalJob& job, int32_t k, int32_t depth);
  void traceGpuWork(const retrieval::HybridStepStats& h, uint64_t beginNs);
  std::vector<retrieval::SearchHit> answerFromCache(const retrieval::LocalCache& cache,
                                                    std::span<const float> query, int32_t k) const;

  const model::TextEmbedder& m_embedder;
  const retrieval::PassageIndex& m_index;
  RetrievalWorkerParams m_params;
  std::vector<int32_t> m_clusterOfIds;
  std::optional<retrieval::ClusterCache> m_cache;
  std::optional<retrieval::Bm25Index> m_bm25;
  // BM25's rankings by depth and query text, as looked up (a search takes ~10 ms here, and a
  // request's speculative and final retrievals repeat the parts that do not change, such as
  // HyDE's question); bounded by clearing.
  std::unordered_map<std::string, std::vector<retrieval::SearchHit>> m_lexicalSeen;
  // Query embeddings by text, for the same reason (a speculative and the final retrieval of
  // HyDE's "{hypothesis} {question} | {question}" embed the question alike); bounded by
  // clearing. Guarded: the embedding lane and the search thread both embed.
  std::unordered_map<std::string, std::vector<float>> m_embeddingSeen;
  std::mutex m_embeddingSeenMutex;
  // Knowledge jobs: the graph, loaded at the first one, and the passage reader its linking uses.
  std::unique_ptr<knowledge::KgRetriever> m_kg;
  std::optional<corpus::QaPromptReader> m_reader;
  RetrievalUpdate knowledgeUpdate(const RetrievalJob& job);
  std::atomic<double> m_cacheHitRate{0};
  mutable std::mutex m_residencyMutex;
  std::vector<uint8_t> m_residency;
  Mailbox<Command> m_inbox;     // from the scheduler
  Mailbox<Command> m_embedded;  // embedAhead: from the embedding thread, in the order the scheduler sent
  std::vector<Command> m_pending;
  std::vector<Live> m_live;
  Ema m_tRetrieval{0.2};  // seconds of one whole search (t_R: these times the live searches' shares left)
  Ema m_beta{0.2};        // seconds of overhead per sub-stage (β)
  std::atomic<bool> m_stop{false};
  std::atomic<int32_t> m_liveCount{0};
  std::atomic<int32_t> m_embedding{0};  // embedAhead: jobs on the embedding thread
  std::atomic<int64_t> m_subStages{0};
  std::atomic<double> m_budget{0};
  uint16_t m_lane = 0, m_embedLane = 0, m_gpuLane = 0, m_swapLane = 0;
  std::pair<uint64_t, uint64_t> m_swapsSeen{0, 0};  // cache uploads and evictions already traced
  // The query encoder's team (threads > 1), made on the thread that embeds queries so its threads
  // share that thread's priority; inline, idle while FAISS's OpenMP threads search. Knowledge
  // jobs embed on the search thread: with the team when it is that thread's (inline), else alone.
  std::unique_ptr<ForkJoin> m_embedTeam;
  std::thread m_thread;
  std::thread m_embedThread;  // embedAhead
};

}  // namespace rag::sched
