// rag::RunStore (rag/run_store.h): the run history in SQLite.
#include "rag/run_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <numeric>
#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "storage/sqlite.h"

namespace rag {

namespace {

constexpr sql::Migration kMigrations[] = {
    {1,
     "CREATE TABLE runs ("
     "  id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, workflow TEXT NOT NULL, workflow_json TEXT NOT NULL,"
     "  mode TEXT NOT NULL, split TEXT NOT NULL, rps REAL NOT NULL, requests INTEGER NOT NULL,"
     "  nprobe INTEGER NOT NULL, slo REAL NOT NULL, finished INTEGER NOT NULL DEFAULT 0, metrics TEXT);"
     "CREATE TABLE requests ("
     "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, request_id INTEGER NOT NULL,"
     "  question TEXT NOT NULL, answer TEXT NOT NULL, gold TEXT NOT NULL, correct INTEGER NOT NULL,"
     "  ok INTEGER NOT NULL, error TEXT NOT NULL, latency REAL NOT NULL, speculations INTEGER NOT NULL,"
     "  spec_accepted INTEGER NOT NULL, rollbacks INTEGER NOT NULL, stages TEXT NOT NULL,"
     "  PRIMARY KEY (run_id, request_id));"
     "CREATE TABLE traces ("
     "  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE, lanes TEXT NOT NULL, events BLOB NOT NULL);"},
    {2,
     "CREATE TABLE bench_results ("
     "  id INTEGER PRIMARY KEY, name TEXT NOT NULL, command_line TEXT NOT NULL, started_at TEXT NOT NULL,"
     "  seconds REAL NOT NULL, json TEXT NOT NULL);"},
};

std::string utcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string stringsJson(const std::vector<std::string>& v) {
  std::ostringstream out;
  JsonWriter w(out);
  w.beginArray();
  for (const std::string& s : v) w.value(s);
  w.endArray();
  return out.str();
}

std::vector<std::string> stringsFromJson(std::string_view text) {
  std::vector<std::string> out;
  Result<JsonValue> doc = parseJson(text);
  if (!doc || !doc->isArray()) return out;
  for (const JsonValue& v : doc->asArray())
    if (v.isString()) out.push_back(v.asString());
  return out;
}

// A trace's lanes: [{"name": ..., "kind": "generation"}, ...]. Runs stored before lanes had a
// kind hold a plain array of names; their lanes read back as kind Other.
std::string lanesJson(const std::vector<TraceLane>& lanes) {
  std::ostringstream out;
  JsonWriter w(out);
  w.beginArray();
  for (const TraceLane& l : lanes) w.beginObject().key("name").value(l.name).key("kind").value(laneKindName(l.kind)).endObject();
  w.endArray();
  return out.str();
}

std::vector<TraceLane> lanesFromJson(std::string_view text) {
  std::vector<TraceLane> out;
  Result<JsonValue> doc = parseJson(text);
  if (!doc || !doc->isArray()) return out;
  for (const JsonValue& v : doc->asArray()) {
    if (v.isString()) {
      out.push_back({v.asString(), LaneKind::Other});
    } else if (v.isObject()) {
      const JsonValue* name = v.find("name");
      const JsonValue* kind = v.find("kind");
      out.push_back({name && name->isString() ? name->asString() : std::string(),
                     kind && kind->isString() ? laneKindFromName(kind->asString()) : LaneKind::Other});
    }
  }
  return out;
}

std::string stagesJson(const std::vector<StageTiming>& stages) {
  std::ostringstream out;
  JsonWriter w(out);
  w.beginArray();
  for (const StageTiming& s : stages) {
    w.beginObject().key("node").value(s.node).key("kind").value(nodeKindName(s.kind));
    w.key("begin").value(s.beginSeconds).key("end").value(s.endSeconds).key("work").value(s.work);
    w.key("speculative").value(s.speculative);
    // What a generation or compression wrote (a retrieval's passages are the corpus's, not kept).
    if (s.kind != NodeKind::Retrieval && !s.output.empty()) w.key("output").value(s.output);
    w.endObject();
  }
  w.endArray();
  return out.str();
}

std::vector<StageTiming> stagesFromJson(std::string_view text) {
  std::vector<StageTiming> out;
  Result<JsonValue> doc = parseJson(text);
  if (!doc || !doc->isArray()) return out;
  for (const JsonValue& v : doc->asArray()) {
    StageTiming s;
    auto str = [&](const char* k) { const JsonValue* x = v.find(k); return x && x->isString() ? x->asString() : std::string(); };
    auto num = [&](const char* k) { const JsonValue* x = v.find(k); return x && x->isNumber() ? x->asDouble() : 0.0; };
    s.node = str("node");
    const std::string kind = str("kind");
    s.kind = nodeKindFromName(kind).value_or(NodeKind::Generation);
    s.beginSeconds = num("begin");
    s.endSeconds = num("end");
    s.work = static_cast<int64_t>(num("work"));
    const JsonValue* spec = v.find("speculative");
    s.speculative = spec && spec->isBool() && spec->asBool();
    s.output = str("output");  // absent in runs stored before outputs were
    out.push_back(std::move(s));
  }
  return out;
}

std::string metricsJson(const RunMetrics& m) {
  std::ostringstream out;
  JsonWriter w(out);
  w.beginObject();
  w.key("requests").value(m.requests).key("completed").value(m.completed).key("failed").value(m.failed);
  w.key("mean_latency").value(m.meanLatency).key("p50_latency").value(m.p50Latency).key("p99_latency").value(m.p99Latency);
  w.key("throughput").value(m.throughput).key("slo_attainment").value(m.sloAttainment).key("accuracy").value(m.accuracy);
  w.key("speculations").value(m.speculations).key("spec_accepted").value(m.specAccepted).key("rollbacks").value(m.rollbacks);
  w.key("wall_seconds").value(m.wallSeconds);
  w.endObject();
  return out.str();
}

RunMetrics metricsFromJson(std::string_view text) {
  RunMetrics m;
  Result<JsonValue> doc = parseJson(text);
  if (!doc || !doc->isObject()) return m;
  auto num = [&](const char* k) { const JsonValue* x = doc->find(k); return x && x->isNumber() ? x->asDouble() : 0.0; };
  auto i64 = [&](const char* k) { return static_cast<int64_t>(num(k)); };
  m.requests = i64("requests");
  m.completed = i64("completed");
  m.failed = i64("failed");
  m.meanLatency = num("mean_latency");
  m.p50Latency = num("p50_latency");
  m.p99Latency = num("p99_latency");
  m.throughput = num("throughput");
  m.sloAttainment = num("slo_attainment");
  m.accuracy = num("accuracy");
  m.speculations = i64("speculations");
  m.specAccepted = i64("spec_accepted");
  m.rollbacks = i64("rollbacks");
  m.wallSeconds = num("wall_seconds");
  return m;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

RunMetrics computeRunMetrics(std::span<const RequestRecord> records, int64_t requests, double sloSeconds,
                             double wallSeconds) {
  RunMetrics m;
  m.requests = std::max<int64_t>(requests, static_cast<int64_t>(records.size()));
  m.wallSeconds = wallSeconds;
  std::vector<double> latencies;
  int64_t within = 0, correct = 0;
  for (const RequestRecord& r : records) {
    if (!r.ok) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    latencies.push_back(r.latencySeconds);
    within += r.latencySeconds <= sloSeconds;
    correct += r.correct;
    m.speculations += r.speculations;
    m.specAccepted += r.specAccepted;
    m.rollbacks += r.rollbacks;
  }
  const double n = static_cast<double>(std::max<int64_t>(1, m.requests));
  m.meanLatency = latencies.empty() ? 0 : std::accumulate(latencies.begin(), latencies.end(), 0.0) / static_cast<double>(latencies.size());
  m.p50Latency = percentile(latencies, 0.5);
  m.p99Latency = percentile(latencies, 0.99);
  m.throughput = wallSeconds > 0 ? static_cast<double>(m.completed) / wallSeconds : 0;
  m.sloAttainment = static_cast<double>(within) / n;
  m.accuracy = static_cast<double>(correct) / n;
  return m;
}

std::filesystem::path defaultRunStoreLocation() { return defaultDataDir() / "runs.db"; }

struct RunStore::Impl {
  sql::Db db;
};

RunStore::RunStore(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
RunStore::RunStore(RunStore&&) noexcept = default;
RunStore& RunStore::operator=(RunStore&&) noexcept = default;
RunStore::~RunStore() = default;

const std::filesystem::path& RunStore::path() const { return m_impl->db.path(); }

Result<RunStore> RunStore::open(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  RAG_ASSIGN_OR_RETURN(sql::Db db, sql::Db::open(path, sql::OpenMode::Create));
  RAG_RETURN_IF_ERROR(db.exec("PRAGMA foreign_keys = ON"));
  RAG_RETURN_IF_ERROR(sql::migrate(db, kMigrations, "run history " + path.string()));
  auto impl = std::make_unique<Impl>();
  impl->db = std::move(db);
  return RunStore(std::move(impl));
}

Result<int64_t> RunStore::beginRun(const RunSettings& s) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare(
      "INSERT INTO runs(started_at, workflow, workflow_json, mode, split, rps, requests, nprobe, slo) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
  st.bind(1, utcNow()).bind(2, s.workflow).bind(3, s.workflowJson).bind(4, s.mode).bind(5, s.split);
  st.bind(6, s.rps).bind(7, s.requests).bind(8, s.nprobe).bind(9, s.sloSeconds);
  RAG_RETURN_IF_ERROR(st.run());
  return m_impl->db.lastInsertRowId();
}

Status RunStore::addRequests(int64_t run, std::span<const RequestRecord> records) {
  sql::Transaction tx(m_impl->db);
  RAG_RETURN_IF_ERROR(tx.beginStatus());
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare(
      "INSERT OR REPLACE INTO requests(run_id, request_id, question, answer, gold, correct, ok, error, latency, "
      "speculations, spec_accepted, rollbacks, stages) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"));
  for (const RequestRecord& r : records) {
    st.bind(1, run).bind(2, static_cast<int64_t>(r.requestId)).bind(3, r.question).bind(4, r.answer);
    st.bind(5, stringsJson(r.goldAnswers)).bind(6, int64_t{r.correct}).bind(7, int64_t{r.ok}).bind(8, r.error);
    st.bind(9, r.latencySeconds).bind(10, int64_t{r.speculations}).bind(11, int64_t{r.specAccepted});
    st.bind(12, int64_t{r.rollbacks}).bind(13, stagesJson(r.stages));
    Status s = st.run();
    if (!s) return s.withContext("recording request " + std::to_string(r.requestId) + " of run " + std::to_string(run));
  }
  return tx.commit();
}

Status RunStore::finishRun(int64_t run, const RunMetrics& metrics, std::span<const TraceEvent> trace,
                           const std::vector<TraceLane>& lanes) {
  sql::Transaction tx(m_impl->db);
  RAG_RETURN_IF_ERROR(tx.beginStatus());
  RAG_ASSIGN_OR_RETURN(sql::Stmt up, m_impl->db.prepare("UPDATE runs SET finished = 1, metrics = ?2 WHERE id = ?1"));
  up.bind(1, run).bind(2, metricsJson(metrics));
  RAG_RETURN_IF_ERROR(up.run());
  if (m_impl->db.changes() == 0) return Status::notFound("no run " + std::to_string(run) + " in " + path().string());
  RAG_ASSIGN_OR_RETURN(sql::Stmt tr, m_impl->db.prepare("INSERT OR REPLACE INTO traces(run_id, lanes, events) VALUES (?1, ?2, ?3)"));
  // Events are stored as their packed 32-byte records (little-endian, this build's layout).
  static const uint8_t kNone = 0;  // an empty trace is a zero-length blob, not NULL
  tr.bind(1, run).bind(2, lanesJson(lanes)).bindBlob(3, trace.empty() ? static_cast<const void*>(&kNone) : trace.data(),
                                                        trace.size_bytes());
  RAG_RETURN_IF_ERROR(tr.run());
  return tx.commit();
}

Result<std::vector<RunSummary>> RunStore::listRuns() {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare(
      "SELECT id, started_at, workflow, workflow_json, mode, split, rps, requests, nprobe, slo, finished, "
      "COALESCE(metrics, '') FROM runs ORDER BY id DESC"));
  std::vector<RunSummary> out;
  while (true) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    RunSummary r;
    r.id = st.columnInt64(0);
    r.startedAt = st.columnText(1);
    r.settings.workflow = st.columnText(2);
    r.settings.workflowJson = st.columnText(3);
    r.settings.mode = st.columnText(4);
    r.settings.split = st.columnText(5);
    r.settings.rps = st.columnDouble(6);
    r.settings.requests = st.columnInt64(7);
    r.settings.nprobe = st.columnInt64(8);
    r.settings.sloSeconds = st.columnDouble(9);
    r.finished = st.columnInt64(10) != 0;
    r.metrics = metricsFromJson(st.columnTextView(11));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<RequestRecord>> RunStore::requests(int64_t run) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare(
      "SELECT request_id, question, answer, gold, correct, ok, error, latency, speculations, spec_accepted, "
      "rollbacks, stages FROM requests WHERE run_id = ?1 ORDER BY request_id"));
  st.bind(1, run);
  std::vector<RequestRecord> out;
  while (true) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    RequestRecord r;
    r.requestId = static_cast<uint32_t>(st.columnInt64(0));
    r.question = st.columnText(1);
    r.answer = st.columnText(2);
    r.goldAnswers = stringsFromJson(st.columnTextView(3));
    r.correct = st.columnInt64(4) != 0;
    r.ok = st.columnInt64(5) != 0;
    r.error = st.columnText(6);
    r.latencySeconds = st.columnDouble(7);
    r.speculations = static_cast<int32_t>(st.columnInt64(8));
    r.specAccepted = static_cast<int32_t>(st.columnInt64(9));
    r.rollbacks = static_cast<int32_t>(st.columnInt64(10));
    r.stages = stagesFromJson(st.columnTextView(11));
    out.push_back(std::move(r));
  }
  return out;
}

Result<StoredTrace> RunStore::trace(int64_t run) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare("SELECT lanes, events FROM traces WHERE run_id = ?1"));
  st.bind(1, run);
  RAG_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return Status::notFound("run " + std::to_string(run) + " has no trace (it never finished)");
  StoredTrace t;
  t.lanes = lanesFromJson(st.columnTextView(0));
  std::span<const uint8_t> blob = st.columnBlob(1);
  if (blob.size() % sizeof(TraceEvent) != 0)
    return Status::corrupt("the trace of run " + std::to_string(run) + " in " + path().string() + " is damaged (" +
                           std::to_string(blob.size()) + " bytes is not a whole number of events)");
  t.events.resize(blob.size() / sizeof(TraceEvent));
  if (!blob.empty()) std::memcpy(t.events.data(), blob.data(), blob.size());
  return t;
}

Status RunStore::deleteRun(int64_t run) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare("DELETE FROM runs WHERE id = ?1"));
  st.bind(1, run);
  RAG_RETURN_IF_ERROR(st.run());
  if (m_impl->db.changes() == 0) return Status::notFound("no run " + std::to_string(run) + " in " + path().string());
  return Status::ok();
}

Result<int64_t> RunStore::addBenchResult(const BenchResult& r) {
  if (r.name.empty()) return Status::invalidArgument("a bench result needs a name (the figure it reproduces)");
  if (Result<JsonValue> doc = parseJson(r.json); !doc)
    return Status::invalidArgument("bench result '" + r.name + "' not saved: its output is not JSON (" +
                                   doc.status().message() + ")");
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare(
      "INSERT INTO bench_results(name, command_line, started_at, seconds, json) VALUES (?1, ?2, ?3, ?4, ?5)"));
  st.bind(1, r.name).bind(2, r.commandLine).bind(3, r.startedAt.empty() ? utcNow() : r.startedAt);
  st.bind(4, r.seconds).bind(5, r.json);
  RAG_RETURN_IF_ERROR(st.run());
  return m_impl->db.lastInsertRowId();
}

Result<std::vector<BenchResult>> RunStore::listBenchResults() {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare(
      "SELECT id, name, command_line, started_at, seconds, json FROM bench_results ORDER BY id DESC"));
  std::vector<BenchResult> out;
  while (true) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    BenchResult r;
    r.id = st.columnInt64(0);
    r.name = st.columnText(1);
    r.commandLine = st.columnText(2);
    r.startedAt = st.columnText(3);
    r.seconds = st.columnDouble(4);
    r.json = st.columnText(5);
    out.push_back(std::move(r));
  }
  return out;
}

Status RunStore::deleteBenchResult(int64_t id) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare("DELETE FROM bench_results WHERE id = ?1"));
  st.bind(1, id);
  RAG_RETURN_IF_ERROR(st.run());
  if (m_impl->db.changes() == 0) return Status::notFound("no bench result " + std::to_string(id) + " in " + path().string());
  return Status::ok();
}

}  // namespace rag
