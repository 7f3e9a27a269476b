// EngineBridge (widgets/bridge): the engine loads in the background, a run's requests arrive as
// queued signals, every finished request and the run's trace land in the run history, Stop
// cancels what is live and keeps what finished, and the GUI thread never waits on any of it.
#include <QtTest>

#include <QSignalSpy>
#include <filesystem>
#include <QSemaphore>
#include <QThreadPool>
#include <QtConcurrent/QtConcurrentRun>
#include <atomic>
#include <functional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#ifdef __linux__
#include <sys/resource.h>
#endif

#include "tiny_bridge_config.h"
#include "bridge/background.h"
#include "bridge/engine_bridge.h"
#include "bridge/gui_stall_meter.h"
#include "rag/run_store.h"

using namespace ragwb;
namespace fs = std::filesystem;

class TestEngineBridge : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  rag::testing::TinyServing m_t;

  EngineConfig config(const char* policy) const { return tinyBridgeConfig(m_t, policy); }

  static bool load(EngineBridge& b, const EngineConfig& c) {
    QSignalSpy ready(&b, &EngineBridge::engineReady);
    b.startEngine(c);
    return ready.wait(60000);
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    auto t = rag::testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    m_t = *t;
  }

  void runIsStreamedAndRecorded() {
    EngineBridge bridge;
    QVERIFY(load(bridge, config("hedra")));
    QSignalSpy finished(&bridge, &EngineBridge::requestFinished);
    QSignalSpy done(&bridge, &EngineBridge::runFinished);
    QSignalSpy trace(&bridge, &EngineBridge::traceEvents);
    QSignalSpy heat(&bridge, &EngineBridge::clusterHeat);
    QSignalSpy started(&bridge, &EngineBridge::runStarted);
    GuiStallMeter meter;
    meter.start();
    RunRequest run;
    run.graph = *rag::builtinWorkflow(rag::Workflow::Irg);
    run.split = "test";
    run.count = 6;
    run.rps = 50;
    QVERIFY(bridge.startRun(run));
    QVERIFY(bridge.running());
    QVERIFY(!bridge.startRun(run));  // one run at a time
    QVERIFY(done.wait(120000));
    meter.stop();
    QCOMPARE(finished.count(), 6);
    const qint64 runId = done.at(0).at(0).toLongLong();
    // The run is recorded off the GUI thread; runStarted carries its id and the request count.
    QCOMPARE(started.count(), 1);
    QCOMPARE(started.at(0).at(0).toLongLong(), runId);
    QCOMPARE(started.at(0).at(1).toInt(), 6);
    const auto metrics = done.at(0).at(1).value<rag::RunMetrics>();
    QCOMPARE(metrics.completed, int64_t{6});
    QVERIFY(trace.count() > 0);
    QTRY_VERIFY_WITH_TIMEOUT(heat.count() > 0, 3000);
    const auto h = heat.last().at(0).value<rag::ClusterHeat>();
    QCOMPARE(h.accesses.size(), size_t{8});  // nlist of the tiny index
    uint64_t visits = 0;
    for (uint64_t v : h.accesses) visits += v;
    QVERIFY(visits > 0);
    // The GUI thread's event loop kept running during the run (the meter's timer fired); how
    // often depends on the run's length, which the arrivals' seed decides.
    QVERIFY(meter.ticks() > 0);
    // The history has the run, its six requests with stage timings, and its trace.
    auto store = rag::RunStore::open(bridge.runStorePath());
    QVERIFY(store.isOk());
    auto runs = store->listRuns();
    QVERIFY(runs.isOk() && !runs->empty());
    QCOMPARE((*runs)[0].id, runId);
    QVERIFY((*runs)[0].finished);
    QCOMPARE((*runs)[0].settings.workflow, std::string("irg"));
    QCOMPARE((*runs)[0].settings.mode, std::string("hedra"));
    auto reqs = store->requests(runId);
    QCOMPARE(reqs->size(), size_t{6});
    for (const rag::RequestRecord& r : *reqs) {
      QVERIFY(r.ok);
      QCOMPARE(r.stages.size(), size_t{6});
      QVERIFY(!r.goldAnswers.empty());
    }
    auto t = store->trace(runId);
    QVERIFY(t.isOk());
    std::set<uint32_t> spanRequests;
    for (const rag::TraceEvent& e : t->events)
      if (e.stage == rag::TraceStage::Request) spanRequests.insert(e.requestId);
    QCOMPARE(spanRequests.size(), size_t{6});
  }

  void stopKeepsWhatFinished() {
    EngineBridge bridge;
    QVERIFY(load(bridge, config("sequential")));
    QSignalSpy finished(&bridge, &EngineBridge::requestFinished);
    QSignalSpy done(&bridge, &EngineBridge::runFinished);
    RunRequest run;
    run.graph = *rag::builtinWorkflow(rag::Workflow::Multistep);
    run.split = "test";
    run.count = 30;
    run.rps = 20;
    QVERIFY(bridge.startRun(run));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 1, 60000);
    bridge.stopRun();
    QVERIFY(done.wait(60000));
    const qint64 runId = done.at(0).at(0).toLongLong();
    const auto metrics = done.at(0).at(1).value<rag::RunMetrics>();
    QVERIFY(metrics.completed >= 1);
    QVERIFY(metrics.completed < 30);
    auto store = rag::RunStore::open(bridge.runStorePath());
    auto reqs = store->requests(runId);
    int64_t ok = 0;
    for (const rag::RequestRecord& r : *reqs) ok += r.ok;
    QCOMPARE(ok, metrics.completed);  // every finished request is in the history
    // Nothing live holds KV: what is left is the prefix cache's (reusable, evictable) blocks.
    QTRY_COMPARE_WITH_TIMEOUT(bridge.stats().kvBlocksUsed - bridge.stats().prefixCachedBlocks, 0, 5000);
  }

  // Background work runs below the GUI thread, whose own priority is left as it was.
  void backgroundTasksRunBelowTheGuiThread() {
    QCOMPARE(ragwb::runInBackground(std::plus<>(), 2, 3).result(), 5);  // arguments are passed on
#ifdef __linux__
    const int gui = getpriority(PRIO_PROCESS, 0);
    auto niceOfTask = [] { return std::pair(getpriority(PRIO_PROCESS, 0), std::this_thread::get_id()); };
    // On a pool thread: lowered. (isFinished() waits without taking the task over.)
    QFuture<std::pair<int, std::thread::id>> onPool = ragwb::runInBackground(niceOfTask);
    QTRY_VERIFY_WITH_TIMEOUT(onPool.isFinished(), 10000);
    QVERIFY(onPool.result().second != std::this_thread::get_id());
    QCOMPARE(onPool.result().first, std::max(gui, ragwb::kBackgroundNice));
    QCOMPARE(getpriority(PRIO_PROCESS, 0), gui);
    // Every pool thread busy: result() runs the task on this thread, which keeps its priority.
    QThreadPool* pool = QThreadPool::globalInstance();
    QSemaphore release;
    std::atomic<int> blocked = 0;
    std::vector<QFuture<void>> blockers;
    for (int i = 0; i < pool->maxThreadCount(); ++i)
      blockers.push_back(QtConcurrent::run([&] {
        ++blocked;
        release.acquire();
      }));
    QTRY_COMPARE_WITH_TIMEOUT(blocked.load(), pool->maxThreadCount(), 10000);
    const auto stolen = ragwb::runInBackground(niceOfTask).result();
    release.release(pool->maxThreadCount());
    for (QFuture<void>& b : blockers) b.waitForFinished();
    QCOMPARE(stolen.second, std::this_thread::get_id());
    QCOMPARE(stolen.first, gui);
    QCOMPARE(getpriority(PRIO_PROCESS, 0), gui);
#endif
  }

  void badSetUpIsReported() {
    EngineBridge bridge;
    QSignalSpy failed(&bridge, &EngineBridge::engineFailed);
    EngineConfig c = config("hedra");
    c.modelDir = fs::path(m_dir.path().toStdString()) / "missing-model";
    bridge.startEngine(c);
    QVERIFY(failed.wait(30000));
    QVERIFY2(failed.at(0).at(0).toString().contains("missing-model"), qPrintable(failed.at(0).at(0).toString()));
    QSignalSpy runFailed(&bridge, &EngineBridge::runFailed);
    RunRequest run;
    run.graph = *rag::builtinWorkflow(rag::Workflow::OneShot);
    run.split = "test";
    QVERIFY(!bridge.startRun(run));
    QCOMPARE(runFailed.count(), 1);
  }
};

QTEST_MAIN(TestEngineBridge)
#include "test_engine_bridge.moc"
