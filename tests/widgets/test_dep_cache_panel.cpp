// The DepCache panel: its policy model under QAbstractItemModelTester (a row per policy, runs
// folded into totals), counters across an engine reload, and end to end: GraphRAG runs through
// the engine bridge under two eviction policies set in the Run panel (LRU, then LACR with its α)
// land in their own rows with exactly the subgraph tokens the engine looked up, and each policy
// gets its own hit-rate line.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QSignalSpy>
#include <filesystem>

#include "tiny_bridge_config.h"
#include "bridge/engine_bridge.h"
#include "panels/dep_cache_panel.h"
#include "plot/qcustomplot_include.h"
#include "run/run_panel.h"

using ragwb::CacheCounters;
using ragwb::DepCachePolicyModel;
namespace fs = std::filesystem;

namespace {

rag::ServingStats counters(int64_t dep, int64_t depHit, int64_t prompt, int64_t promptHit) {
  rag::ServingStats s;
  s.depSegmentTokens = dep;
  s.depHitTokens = depHit;
  s.prefixQueriedTokens = prompt;
  s.prefixHitTokens = promptHit;
  return s;
}

}  // namespace

class TestDepCachePanel : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

private Q_SLOTS:
  void countersDiffAndSurviveAReload() {
    const CacheCounters c = CacheCounters::between(counters(100, 40, 50, 10), counters(300, 190, 80, 10));
    QCOMPARE(c.subgraphTokens, 200);
    QCOMPARE(c.subgraphHits, 150);
    QCOMPARE(c.subgraphHitRate(), 0.75);
    QCOMPARE(c.promptHitRate(), 0.0);
    // A new engine counts from zero: its counters are the run's.
    const CacheCounters r = CacheCounters::between(counters(100, 40, 50, 10), counters(30, 3, 5, 1));
    QCOMPARE(r.subgraphTokens, 30);
    QCOMPARE(r.subgraphHits, 3);
    QCOMPARE(CacheCounters{}.subgraphHitRate(), -1.0);
  }

  void modelFoldsRunsPerPolicy() {
    DepCachePolicyModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
    m.updateRun({10, 5, 0, 0});  // no run yet: ignored
    QCOMPARE(m.rowCount(), 0);
    m.beginRun("lru");
    m.updateRun({100, 20, 40, 10});
    m.updateRun({200, 50, 80, 20});  // replaces the run's previous figures
    QCOMPARE(inserted.count(), 1);
    QVERIFY(changed.count() >= 2);
    QCOMPARE(m.totals(0).subgraphTokens, 200);
    QCOMPARE(m.data(m.index(0, DepCachePolicyModel::SubgraphHitRate)).toString(), QString("25.0 %"));
    m.beginRun("lacr α 0.20");
    m.updateRun({100, 60, 0, 0});
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.data(m.index(1, DepCachePolicyModel::PromptHitRate)).toString(), QString("–"));
    m.beginRun("lru");  // a second LRU run adds to the first
    m.updateRun({100, 50, 0, 0});
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.data(m.index(0, DepCachePolicyModel::Runs)).toInt(), 2);
    QCOMPARE(m.totals(0).subgraphTokens, 300);
    QCOMPARE(m.totals(0).subgraphHits, 100);
    QCOMPARE(m.totals(1).subgraphHits, 60);
    QCOMPARE(m.rowOf("lacr α 0.20"), 1);
    QCOMPARE(m.rowOf("pgdsf"), -1);
  }

  void graphRagRunsUnderTwoPoliciesGetTheirOwnRows() {
    QVERIFY(m_dir.isValid());
    auto t = rag::testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    ragwb::EngineBridge bridge;
    ragwb::DepCachePanel panel(&bridge);
    ragwb::RunPanel runs(&bridge);
    QSignalSpy ready(&bridge, &ragwb::EngineBridge::engineReady);
    bridge.startEngine(tinyBridgeConfig(*t));
    QVERIFY(ready.wait(60000));
    QVERIFY(panel.statusText().contains("Eviction policy: lru"));
    auto runOnce = [&](const QString& policy, double alpha) {
      QVERIFY(runs.setEviction(policy, alpha));
      runs.configure("graphrag", "hedra", 0.0, 6);
      QSignalSpy done(&bridge, &ragwb::EngineBridge::runFinished);
      runs.start();  // reloads the engine when the policy changed
      QVERIFY(done.wait(180000));
    };
    runOnce("lru", 0.2);
    DepCachePolicyModel* m = panel.policies();
    QCOMPARE(m->rowCount(), 1);
    QCOMPARE(m->label(0), QString("lru"));
    const rag::ServingStats first = bridge.stats();
    QVERIFY2(first.depSegmentTokens > 0, "GraphRAG's generations read no subgraphs");
    QCOMPARE(m->totals(0).subgraphTokens, first.depSegmentTokens);
    QCOMPARE(m->totals(0).subgraphHits, first.depHitTokens);
    QVERIFY(panel.graphOf("lru") && panel.graphOf("lru")->dataCount() >= 1);

    runOnce("lacr", 0.5);
    QCOMPARE(bridge.config().evictionPolicy, std::string("lacr"));
    QCOMPARE(bridge.config().lacrAlpha, 0.5);
    QVERIFY(runs.findChild<QDoubleSpinBox*>("lacrAlpha")->isEnabled());
    QCOMPARE(m->rowCount(), 2);
    QCOMPARE(m->label(1), QString("lacr α 0.50"));
    const rag::ServingStats second = bridge.stats();  // a new engine: its counters are this run's
    QCOMPARE(m->totals(1).subgraphTokens, second.depSegmentTokens);
    QCOMPARE(m->totals(0).subgraphTokens, first.depSegmentTokens);  // LRU's row keeps its run
    QVERIFY(panel.graphOf("lacr α 0.50")->dataCount() >= 1);
    QVERIFY(panel.statusText().contains("lacr α 0.50"));
    // LRU has no α to set.
    runs.findChild<QComboBox*>("evictionPolicy")->setCurrentText("lru");
    QVERIFY(!runs.findChild<QDoubleSpinBox*>("lacrAlpha")->isEnabled());
  }
};

QTEST_MAIN(TestDepCachePanel)
#include "test_dep_cache_panel.moc"
