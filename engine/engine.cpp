// rag::Engine (rag/engine.h): the facade over the worker pool, the trace ring and the corpus.
#include "rag/engine.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "core/fs.h"
#include "core/thread_pool.h"
#include "corpus/corpus_db.h"
#include "corpus/qa_reader.h"
#include "sched/scheduler.h"
#include "model/tokenizer.h"
#include "sched/serving_assets.h"
#include "storage/sqlite.h"
#include "telemetry/trace_ring.h"
#include "telemetry/trace_zone.h"

namespace rag {

namespace {

// Each worker thread reads through its own connection: SQLite connections are not shared
// across threads here (opened with NOMUTEX).
class ConnectionPerThread {
public:
  explicit ConnectionPerThread(std::filesystem::path path) : m_path(std::move(path)) {}
  Result<sql::Db*> get() {
    std::lock_guard lock(m_mutex);
    auto it = m_dbs.find(std::this_thread::get_id());
    if (it != m_dbs.end()) return it->second.get();
    RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(m_path));
    auto owned = std::make_unique<sql::Db>(std::move(db));
    sql::Db* raw = owned.get();
    m_dbs.emplace(std::this_thread::get_id(), std::move(owned));
    return raw;
  }

private:
  std::filesystem::path m_path;
  std::mutex m_mutex;
  std::unordered_map<std::thread::id, std::unique_ptr<sql::Db>> m_dbs;
};

}  // namespace

struct Engine::Impl {
  EngineParams params;
  CorpusStats stats;
  TraceRing ring;
  ConnectionPerThread connections;
  std::vector<uint16_t> workerLanes;  // indexed by worker number
  std::mutex poolMutex;  // guards pool against a shutdown() racing a submission
  std::unique_ptr<ThreadPool> pool;
  std::atomic<bool> stopped{false};
  std::shared_ptr<const ServingAssets> assets;  // null while serving is off
  // Callers on any thread (the GUI, HTTP handlers) use the scheduler under a shared lock;
  // shutdown() takes it out under the exclusive lock and destroys it after, so that no call can
  // be inside a scheduler being destroyed (ThreadSanitizer found `ragraph serve`'s handlers
  // reading the pointer while a SIGINT's shutdown reset it).
  mutable std::shared_mutex schedulerMutex;
  std::unique_ptr<sched::Scheduler> scheduler;

  // fn(scheduler) under the shared lock; the scheduler is null when serving is off or after
  // shutdown().
  template <typename F>
  auto withScheduler(F&& fn) const {
    std::shared_lock lock(schedulerMutex);
    return fn(scheduler.get());
  }

  explicit Impl(const EngineParams& p)
      : params(p), ring(p.traceCapacity), connections(p.corpus) {}

  uint16_t laneForThisThread() {
    // Pool threads are named "<name>-<i>"; register a lane per name on first use.
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    return ring.registerLane(name, LaneKind::Workers);
  }

  template <typename F>
  auto run(F&& fn) -> std::future<std::invoke_result_t<F>> {
    using R = std::invoke_result_t<F>;
    std::lock_guard lock(poolMutex);
    if (!pool) {
      std::promise<R> p;
      p.set_value(Status::cancelled("the engine has been shut down"));
      return p.get_future();
    }
    return pool->submit(std::forward<F>(fn));
  }
};

EngineParams defaultEngineParams() {
  EngineParams p;
  p.corpus = defaultCorpusLocation();
  return p;
}

std::filesystem::path defaultModelDirectory() {
  const std::filesystem::path datasets = findShippedDir("datasets");
  return datasets.empty() ? std::filesystem::path() : datasets / "models" / "rag-llama-roles-wide";
}

std::filesystem::path defaultEmbedderDirectory() {
  const std::filesystem::path datasets = findShippedDir("datasets");
  return datasets.empty() ? std::filesystem::path() : datasets / "models" / "rag-embedder";
}

Engine::Engine(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Engine::~Engine() { shutdown(); }

Result<std::unique_ptr<Engine>> Engine::create(const EngineParams& params) {
  RAG_ASSIGN_OR_RETURN(CorpusStats stats, readCorpusStats(params.corpus));
  auto impl = std::make_unique<Impl>(params);
  impl->stats = std::move(stats);
  impl->ring.registerLane("engine", LaneKind::Engine);
  impl->pool = std::make_unique<ThreadPool>(ThreadPoolParams{.threads = params.workerThreads, .name = "worker"});
  if (!params.serving.modelDir.empty() || params.assets) {
    std::shared_ptr<const ServingAssets> assets = params.assets;
    if (!assets) {
      RAG_ASSIGN_OR_RETURN(assets, loadServingAssets(params.serving, params.corpus));
    } else if (assets->corpus != params.corpus) {
      return Status::invalidArgument("the serving assets were loaded for the corpus " + assets->corpus.string() +
                                     ", not " + params.corpus.string() + "; load them for this corpus");
    }
    impl->assets = assets;
    RAG_ASSIGN_OR_RETURN(impl->scheduler,
                         sched::Scheduler::create(std::move(assets), params.serving, &impl->ring, params.onEvent));
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const CorpusStats& Engine::corpusStats() const { return m_impl->stats; }

std::future<Result<std::vector<int64_t>>> Engine::listQa(std::string split, std::string type) {
  Impl* impl = m_impl.get();
  return impl->run([impl, split = std::move(split), type = std::move(type)]() -> Result<std::vector<int64_t>> {
    RAG_ASSIGN_OR_RETURN(sql::Db * db, impl->connections.get());
    return corpus::listQaIds(*db, split, type);
  });
}

std::future<Result<QaItem>> Engine::lookupQa(int64_t qaId, uint32_t requestId) {
  Impl* impl = m_impl.get();
  return impl->run([impl, qaId, requestId]() -> Result<QaItem> {
    RAG_TRACE_ZONE(zone, &impl->ring, impl->laneForThisThread(), TraceStage::User, requestId);
    RAG_ASSIGN_OR_RETURN(sql::Db * db, impl->connections.get());
    Result<QaItem> item = corpus::readQaItem(*db, qaId);
    if (item) zone.setArgs(static_cast<uint32_t>(item->goldPassages.size()), static_cast<uint32_t>(qaId));
    return item;
  });
}

bool Engine::serving() const {
  return m_impl->withScheduler([](const sched::Scheduler* s) { return s != nullptr; });
}
std::shared_ptr<const ServingAssets> Engine::assets() const { return m_impl->assets; }

Result<RequestHandle> Engine::submit(std::string question, const WorkflowGraph& graph) {
  return m_impl->withScheduler([&](sched::Scheduler* s) -> Result<RequestHandle> {
    if (m_impl->stopped.load()) return Status::cancelled("the engine has been shut down");
    if (!s) return Status::unavailable("serving is off: create the engine with serving.modelDir set to a model directory");
    return s->submit(std::move(question), std::make_shared<const WorkflowGraph>(graph));
  });
}

Status Engine::cancel(uint32_t requestId) {
  return m_impl->withScheduler([&](sched::Scheduler* s) {
    if (m_impl->stopped.load()) return Status::cancelled("the engine has been shut down");
    return s ? s->cancel(requestId) : Status::unavailable("serving is off");
  });
}

ServingStats Engine::servingStats() const {
  return m_impl->withScheduler([](const sched::Scheduler* s) { return s ? s->stats() : ServingStats{}; });
}

ClusterHeat Engine::clusterHeat() const {
  return m_impl->withScheduler([](const sched::Scheduler* s) { return s ? s->clusterHeat() : ClusterHeat{}; });
}

std::vector<KvTreeNode> Engine::kvTreeSnapshot() const {
  const std::vector<memory::PrefixNodeInfo> tree = m_impl->withScheduler(
      [](const sched::Scheduler* s) { return s ? s->kvTree() : std::vector<memory::PrefixNodeInfo>{}; });
  std::vector<KvTreeNode> out;
  out.reserve(tree.size());
  for (const memory::PrefixNodeInfo& n : tree) {
    KvTreeNode k{.id = n.id, .parent = n.parent, .ns = n.ns, .tokens = n.tokens, .text = {},
                 .depthTokens = n.depthTokens, .hostTier = n.tier == memory::KvTier::Host, .locks = n.locks,
                 .hits = n.hits, .priority = n.priority};
    if (m_impl->assets && m_impl->assets->tokenizer)
      if (auto text = m_impl->assets->tokenizer->decode(n.tokens); text) k.text = std::move(*text);
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<BlockStoreEntry> Engine::blockStoreEntries() const {
  return m_impl->withScheduler(
      [](const sched::Scheduler* s) { return s ? s->blockStoreEntries() : std::vector<BlockStoreEntry>{}; });
}

KvBlockMap Engine::kvBlockMap() const {
  return m_impl->withScheduler([](const sched::Scheduler* s) { return s ? s->kvBlockMap() : KvBlockMap{}; });
}

std::string_view kvBlockOwnerName(KvBlockOwner owner) {
  switch (owner) {
    case KvBlockOwner::Free: return "free";
    case KvBlockOwner::Sequence: return "sequence";
    case KvBlockOwner::Prefix: return "prefix";
    case KvBlockOwner::Subgraph: return "subgraph";
    case KvBlockOwner::Passage: return "passage";
  }
  return "free";
}

size_t Engine::drainTrace(std::vector<TraceEvent>& out) { return m_impl->ring.drain(out); }
std::vector<TraceLane> Engine::traceLanes() const { return m_impl->ring.lanes(); }
uint64_t Engine::droppedTraceEvents() const { return m_impl->ring.dropped(); }

void Engine::shutdown() {
  if (!m_impl || m_impl->stopped.exchange(true)) return;
  std::unique_ptr<sched::Scheduler> scheduler;
  {
    std::unique_lock lock(m_impl->schedulerMutex);  // waits for calls inside the scheduler
    scheduler = std::move(m_impl->scheduler);
  }
  scheduler.reset();  // cancels live requests (their handles answer Cancelled)
  std::unique_ptr<ThreadPool> pool;
  {
    std::lock_guard lock(m_impl->poolMutex);
    pool = std::move(m_impl->pool);
  }
  pool.reset();  // finishes queued work, then joins
}

}  // namespace rag
