// rag::Engine (rag/engine.h): the facade over the worker pool, the trace ring and the corpus.
#include "rag/engine.h"

#include <pthread.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "core/fs.h"
#include "core/json.h"
#include "core/thread_pool.h"
#include "corpus/corpus_db.h"
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

Result<std::vector<std::string>> jsonStrings(std::string_view text, std::string_view what) {
  RAG_ASSIGN_OR_RETURN(JsonValue v, parseJson(text));
  if (!v.isArray()) return Status::corrupt(std::string(what) + " is not a JSON array");
  std::vector<std::string> out;
  for (const JsonValue& e : v.asArray()) {
    if (!e.isString()) return Status::corrupt(std::string(what) + " holds a non-string");
    out.push_back(e.asString());
  }
  return out;
}

Result<std::vector<int64_t>> jsonIds(std::string_view text, std::string_view what) {
  RAG_ASSIGN_OR_RETURN(JsonValue v, parseJson(text));
  if (!v.isArray()) return Status::corrupt(std::string(what) + " is not a JSON array");
  std::vector<int64_t> out;
  for (const JsonValue& e : v.asArray()) {
    auto id = e.asInt64();
    if (!id) return Status::corrupt(std::string(what) + " holds a non-integer id");
    out.push_back(*id);
  }
  return out;
}

Result<QaItem> readQaItem(sql::Db& db, int64_t qaId) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt q, db.prepare(
      "SELECT split, type, coalesce(relation, ''), question, answers, gold_passages, kg_path "
      "FROM qa WHERE id = ?"));
  q.bind(1, qaId);
  RAG_ASSIGN_OR_RETURN(bool row, q.step());
  if (!row) return Status::notFound("no QA item with id " + std::to_string(qaId));
  QaItem item;
  item.id = qaId;
  item.split = q.columnText(0);
  item.type = q.columnText(1);
  item.relation = q.columnText(2);
  item.question = q.columnText(3);
  const std::string ctx = "QA item " + std::to_string(qaId);
  RAG_ASSIGN_OR_RETURN(item.answers, jsonStrings(q.columnTextView(4), ctx + " answers"));
  RAG_ASSIGN_OR_RETURN(std::vector<int64_t> gold, jsonIds(q.columnTextView(5), ctx + " gold_passages"));
  item.kgPath = q.columnText(6);
  RAG_ASSIGN_OR_RETURN(sql::Stmt p, db.prepare(
      "SELECT title, text, source, source_file, source_offset FROM passages WHERE id = ?"));
  for (int64_t pid : gold) {
    p.reset();
    p.bind(1, pid);
    RAG_ASSIGN_OR_RETURN(bool prow, p.step());
    if (!prow) return Status::corrupt(ctx + " names passage " + std::to_string(pid) + ", which does not exist");
    item.goldPassages.push_back({pid, p.columnText(0), p.columnText(1), p.columnText(2),
                                 p.columnText(3), p.columnInt64(4)});
  }
  return item;
}

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

  explicit Impl(const EngineParams& p)
      : params(p), ring(p.traceCapacity), connections(p.corpus) {}

  uint16_t laneForThisThread() {
    // Pool threads are named "<name>-<i>"; register a lane per name on first use.
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    return ring.registerLane(name);
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

Engine::Engine(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Engine::~Engine() { shutdown(); }

Result<std::unique_ptr<Engine>> Engine::create(const EngineParams& params) {
  RAG_ASSIGN_OR_RETURN(CorpusStats stats, readCorpusStats(params.corpus));
  auto impl = std::make_unique<Impl>(params);
  impl->stats = std::move(stats);
  impl->ring.registerLane("engine");
  impl->pool = std::make_unique<ThreadPool>(ThreadPoolParams{.threads = params.workerThreads, .name = "worker"});
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const CorpusStats& Engine::corpusStats() const { return m_impl->stats; }

std::future<Result<std::vector<int64_t>>> Engine::listQa(std::string split, std::string type) {
  Impl* impl = m_impl.get();
  return impl->run([impl, split = std::move(split), type = std::move(type)]() -> Result<std::vector<int64_t>> {
    RAG_ASSIGN_OR_RETURN(sql::Db * db, impl->connections.get());
    RAG_ASSIGN_OR_RETURN(sql::Stmt q, db->prepare(
        "SELECT id FROM qa WHERE split = ?1 AND (?2 = '' OR type = ?2) ORDER BY id"));
    q.bind(1, split).bind(2, type);
    std::vector<int64_t> ids;
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, q.step());
      if (!row) break;
      ids.push_back(q.columnInt64(0));
    }
    return ids;
  });
}

std::future<Result<QaItem>> Engine::lookupQa(int64_t qaId, uint32_t requestId) {
  Impl* impl = m_impl.get();
  return impl->run([impl, qaId, requestId]() -> Result<QaItem> {
    TraceZone zone(impl->ring, impl->laneForThisThread(), TraceStage::User, requestId);
    RAG_ASSIGN_OR_RETURN(sql::Db * db, impl->connections.get());
    Result<QaItem> item = readQaItem(*db, qaId);
    if (item) zone.setArgs(static_cast<uint32_t>(item->goldPassages.size()), static_cast<uint32_t>(qaId));
    return item;
  });
}

size_t Engine::drainTrace(std::vector<TraceEvent>& out) { return m_impl->ring.drain(out); }
std::vector<std::string> Engine::traceLaneNames() const { return m_impl->ring.laneNames(); }
uint64_t Engine::droppedTraceEvents() const { return m_impl->ring.dropped(); }

void Engine::shutdown() {
  if (!m_impl || m_impl->stopped.exchange(true)) return;
  std::unique_ptr<ThreadPool> pool;
  {
    std::lock_guard lock(m_impl->poolMutex);
    pool = std::move(m_impl->pool);
  }
  pool.reset();  // finishes queued work, then joins
}

}  // namespace rag
