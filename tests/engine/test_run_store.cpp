// The run history (rag/run_store.h): runs, requests and traces round-trip through SQLite; an
// unfinished run keeps what was recorded; a newer schema is refused and left untouched; the
// metrics are the figures a user reads.
#include <QtTest>

#include <filesystem>

#include "rag/run_store.h"
#include "status_checks.h"
#include "storage/sqlite.h"

using namespace rag;
namespace fs = std::filesystem;

class TestRunStore : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path file(const char* name) const { return fs::path(m_dir.path().toStdString()) / name; }

  static RequestRecord record(uint32_t id, double latency, bool correct, bool ok = true) {
    RequestRecord r;
    r.requestId = id;
    r.question = "What is thing " + std::to_string(id) + " a kind of? \xc3\xa9";
    r.answer = correct ? "answer" : "other";
    r.goldAnswers = {"answer", "the answer"};
    r.correct = correct;
    r.ok = ok;
    r.error = ok ? "" : "request was cancelled";
    r.latencySeconds = latency;
    r.speculations = 2;
    r.specAccepted = 1;
    r.rollbacks = 1;
    r.stages = {{.node = "retrieve", .kind = NodeKind::Retrieval, .beginSeconds = 0.0, .endSeconds = 0.01, .work = 128,
                 .speculative = false, .output = "dog: a canine. kind of: canine."},
                {.node = "answer", .kind = NodeKind::Generation, .beginSeconds = 0.01, .endSeconds = 0.05, .work = 7,
                 .speculative = true, .output = "canine"}};
    return r;
  }

private Q_SLOTS:
  void metricsAreTheFiguresUsersRead() {
    std::vector<RequestRecord> rs = {record(1, 0.1, true), record(2, 0.3, false), record(3, 2.0, true),
                                     record(4, 0, false, false)};
    RunMetrics m = computeRunMetrics(rs, 5, /*slo=*/1.0, /*wall=*/4.0);
    QCOMPARE(m.requests, int64_t{5});  // one never finished
    QCOMPARE(m.completed, int64_t{3});
    QCOMPARE(m.failed, int64_t{1});
    QCOMPARE(m.meanLatency, 0.8);
    QCOMPARE(m.p50Latency, 0.3);
    QCOMPARE(m.sloAttainment, 2.0 / 5.0);
    QCOMPARE(m.accuracy, 2.0 / 5.0);
    QCOMPARE(m.throughput, 3.0 / 4.0);
    QCOMPARE(m.speculations, int64_t{6});
    QCOMPARE(m.rollbacks, int64_t{3});
  }

  void runsRoundTrip() {
    auto store = RunStore::open(file("history/runs.db"));
    QVERIFY2(store.isOk(), store.status().message().c_str());
    RunSettings s{"multistep", "{\"format\":\"ragraph-workflow\"}", "hedra", "test", 4.0, 3, 128, 1.5};
    auto run = store->beginRun(s);
    QVERIFY(run.isOk());
    std::vector<RequestRecord> rs = {record(1, 0.2, true), record(2, 0.4, false, false)};
    QVERIFY(store->addRequests(*run, rs).isOk());
    std::vector<TraceEvent> trace(3);
    for (size_t i = 0; i < trace.size(); ++i) {
      trace[i].beginNs = 100 * i;
      trace[i].endNs = 100 * i + 50;
      trace[i].requestId = static_cast<uint32_t>(i + 1);
      trace[i].stage = TraceStage::Decode;
      trace[i].flags = kTraceSpeculative;
      trace[i].arg0 = 7;
    }
    RunMetrics m = computeRunMetrics(rs, 3, 1.5, 2.0);
    QVERIFY(store->finishRun(*run, m, trace, {{"scheduler", LaneKind::Scheduler}, {"generation (cloud)", LaneKind::Generation}}).isOk());
    auto unfinished = store->beginRun(s);
    QVERIFY(unfinished.isOk());
    QVERIFY(store->addRequests(*unfinished, std::vector<RequestRecord>{record(9, 0.1, true)}).isOk());

    // Reopened, as the workbench does after a restart.
    auto again = RunStore::open(file("history/runs.db"));
    QVERIFY(again.isOk());
    auto runs = again->listRuns();
    QVERIFY(runs.isOk());
    QCOMPARE(runs->size(), size_t{2});
    QCOMPARE((*runs)[0].id, *unfinished);  // newest first
    QVERIFY(!(*runs)[0].finished);
    const RunSummary& done = (*runs)[1];
    QVERIFY(done.finished);
    QCOMPARE(done.settings.workflow, std::string("multistep"));
    QCOMPARE(done.settings.rps, 4.0);
    QCOMPARE(done.settings.sloSeconds, 1.5);
    QCOMPARE(done.metrics.completed, int64_t{1});
    QCOMPARE(done.metrics.meanLatency, 0.2);
    auto reqs = again->requests(*run);
    QVERIFY(reqs.isOk());
    QCOMPARE(reqs->size(), size_t{2});
    QCOMPARE((*reqs)[0].question, rs[0].question);
    QCOMPARE((*reqs)[0].goldAnswers, rs[0].goldAnswers);
    QCOMPARE((*reqs)[0].stages.size(), size_t{2});
    QCOMPARE((*reqs)[0].stages[1].node, std::string("answer"));
    QVERIFY((*reqs)[0].stages[1].speculative);
    QCOMPARE((*reqs)[0].stages[0].work, int64_t{128});
    // A generation's output is kept; a retrieval's passages are the corpus's and are not.
    QCOMPARE((*reqs)[0].stages[1].output, std::string("canine"));
    QVERIFY((*reqs)[0].stages[0].output.empty());
    QVERIFY(!(*reqs)[1].ok);
    QCOMPARE((*reqs)[1].error, std::string("request was cancelled"));
    auto t = again->trace(*run);
    QVERIFY(t.isOk());
    QCOMPARE(t->events.size(), size_t{3});
    QCOMPARE(t->events[2].beginNs, uint64_t{200});
    QCOMPARE(t->events[1].requestId, uint32_t{2});
    QCOMPARE(t->lanes, (std::vector<TraceLane>{{"scheduler", LaneKind::Scheduler}, {"generation (cloud)", LaneKind::Generation}}));
    QCOMPARE(again->requests(*unfinished)->size(), size_t{1});  // nothing lost
    QCOMPARE(again->trace(*unfinished).status().code(), StatusCode::NotFound);
    QVERIFY(again->deleteRun(*run).isOk());
    QCOMPARE(again->requests(*run)->size(), size_t{0});  // cascaded
    QCOMPARE(again->deleteRun(*run).code(), StatusCode::NotFound);
  }

  void newerSchemaIsRefusedUntouched() {
    const fs::path p = file("newer.db");
    QVERIFY(RunStore::open(p).isOk());
    {
      auto db = sql::Db::open(p, sql::OpenMode::ReadWrite);
      QVERIFY(db.isOk());
      QVERIFY(db->setUserVersion(99).isOk());
    }
    auto r = RunStore::open(p);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::SchemaMismatch);
    QVERIFY(mentions(r.status(), {"newer.db"}));
    auto db = sql::Db::open(p, sql::OpenMode::ReadOnly);
    QCOMPARE(*db->userVersion(), 99);
  }

  void lanesStoredAsNamesReadBack() {  // runs stored before lanes had a kind
    auto store = RunStore::open(file("old-lanes.db"));
    QVERIFY(store.isOk());
    auto run = store->beginRun(RunSettings{});
    QVERIFY(store->finishRun(*run, RunMetrics{}, {}, {}).isOk());
    {
      auto db = sql::Db::open(file("old-lanes.db"), sql::OpenMode::ReadWrite);
      QVERIFY(db->exec("UPDATE traces SET lanes = '[\"scheduler\", \"generation\"]'").isOk());
    }
    auto t = store->trace(*run);
    QVERIFY(t.isOk());
    QCOMPARE(t->lanes, (std::vector<TraceLane>{{"scheduler", LaneKind::Other}, {"generation", LaneKind::Other}}));
  }

  void damagedTraceIsCorrupt() {
    auto store = RunStore::open(file("damaged.db"));
    QVERIFY(store.isOk());
    auto run = store->beginRun(RunSettings{});
    QVERIFY(store->finishRun(*run, RunMetrics{}, {}, {}).isOk());
    {
      auto db = sql::Db::open(file("damaged.db"), sql::OpenMode::ReadWrite);
      QVERIFY(db->exec("UPDATE traces SET events = x'0102030405'").isOk());
    }
    auto t = store->trace(*run);
    QCOMPARE(t.status().code(), StatusCode::Corrupt);
  }

  void benchResultsRoundTripNewestFirst() {
    const fs::path p = file("bench.db");
    {
      // A history written before bench results existed (schema 1) gains the table on open.
      auto db = sql::Db::open(p, sql::OpenMode::Create);
      QVERIFY(db.isOk());
      QVERIFY(db->exec("CREATE TABLE runs (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, workflow TEXT NOT NULL,"
                       " workflow_json TEXT NOT NULL, mode TEXT NOT NULL, split TEXT NOT NULL, rps REAL NOT NULL,"
                       " requests INTEGER NOT NULL, nprobe INTEGER NOT NULL, slo REAL NOT NULL,"
                       " finished INTEGER NOT NULL DEFAULT 0, metrics TEXT);"
                       "CREATE TABLE requests (run_id INTEGER, request_id INTEGER);"
                       "CREATE TABLE traces (run_id INTEGER PRIMARY KEY, lanes TEXT, events BLOB);").isOk());
      QVERIFY(db->setUserVersion(1).isOk());
    }
    auto store = RunStore::open(p);
    QVERIFY(store.isOk());
    BenchResult a{0, "dragon-fig6", "ragraph bench dragon --quick --json", "", 12.5, "{\"bench\": \"dragon\", \"x\": [1, 2]}"};
    BenchResult b{0, "blocks-table2", "ragraph bench blocks --quick", "2026-11-26T03:00:00Z", 3, "{\"bench\": \"blocks\"}"};
    auto ida = store->addBenchResult(a);
    auto idb = store->addBenchResult(b);
    QVERIFY(ida.isOk() && idb.isOk());
    QVERIFY(*idb > *ida);
    auto again = RunStore::open(p);
    auto list = again->listBenchResults();
    QVERIFY(list.isOk());
    QCOMPARE(list->size(), size_t{2});
    QCOMPARE((*list)[0].name, std::string("blocks-table2"));
    QCOMPARE((*list)[0].startedAt, std::string("2026-11-26T03:00:00Z"));
    QCOMPARE((*list)[1].id, *ida);
    QCOMPARE((*list)[1].commandLine, a.commandLine);
    QCOMPARE((*list)[1].json, a.json);
    QCOMPARE((*list)[1].seconds, 12.5);
    QVERIFY(!(*list)[1].startedAt.empty());  // stamped when not given
    QVERIFY(again->listRuns().isOk());        // the runs table is untouched

    QVERIFY(again->deleteBenchResult(*ida).isOk());
    QCOMPARE(again->listBenchResults()->size(), size_t{1});
    QCOMPARE(again->deleteBenchResult(*ida).code(), StatusCode::NotFound);
  }

  void benchResultThatIsNotJsonIsRefused() {
    auto store = RunStore::open(file("bench-bad.db"));
    QVERIFY(store.isOk());
    auto half = store->addBenchResult({0, "dragon-fig6", "ragraph bench dragon", "", 1, "{\"bench\": \"dra"});
    QCOMPARE(half.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(half.status(), {"dragon-fig6", "not JSON"}));
    QCOMPARE(store->addBenchResult({0, "", "x", "", 1, "{}"}).status().code(), StatusCode::InvalidArgument);
    QCOMPARE(store->listBenchResults()->size(), size_t{0});
  }
};

QTEST_GUILESS_MAIN(TestRunStore)
#include "test_run_store.moc"
