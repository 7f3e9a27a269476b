// The KV heatmap: the series (owner counts per report, per-interval hit rates from cumulative
// counters, restarts, the two row layouts), the widget (cells are the owners, hit-rate points,
// the status line, the stack toggle, offscreen export), and end to end: requests served through
// the engine bridge leave their cached prompts as prefix blocks in the view, with every looked-up
// token accounted for in the intervals.
#include <QtTest>

#include <QCheckBox>
#include <QSignalSpy>
#include <filesystem>
#include <numeric>
#include "plot/qcustomplot_include.h"

#include "tiny_bridge_config.h"
#include "bridge/engine_bridge.h"
#include "heatmap/kv_heat_series.h"
#include "heatmap/kv_heatmap.h"

using ragwb::KvHeatSeries;
using rag::KvBlockOwner;
namespace fs = std::filesystem;

namespace {

uint8_t code(KvBlockOwner o) { return static_cast<uint8_t>(o); }

// `n` blocks: the first `seqs` a sequence's, the next `prefixes` cached prefixes, the next
// `passages` passage blocks, the rest free.
rag::KvBlockMap pool(int n, int seqs, int prefixes, int passages = 0) {
  rag::KvBlockMap m;
  m.owners.assign(static_cast<size_t>(n), code(KvBlockOwner::Free));
  int b = 0;
  for (int i = 0; i < seqs; ++i) m.owners[static_cast<size_t>(b++)] = code(KvBlockOwner::Sequence);
  for (int i = 0; i < prefixes; ++i) m.owners[static_cast<size_t>(b++)] = code(KvBlockOwner::Prefix);
  for (int i = 0; i < passages; ++i) m.owners[static_cast<size_t>(b++)] = code(KvBlockOwner::Passage);
  return m;
}

rag::ServingStats counters(int64_t queried, int64_t hit, int64_t blockTokens = 0, int64_t blockHit = 0) {
  rag::ServingStats s;
  s.prefixCacheOn = true;
  s.prefixQueriedTokens = queried;
  s.prefixHitTokens = hit;
  s.blockTokens = blockTokens;
  s.blockHitTokens = blockHit;
  return s;
}

}  // namespace

class TestKvHeatmap : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

private Q_SLOTS:
  void seriesCountsOwnersAndDiffsHitRates() {
    KvHeatSeries s(10);
    QCOMPARE(s.add(rag::KvBlockMap{}, counters(0, 0), 0.0), KvHeatSeries::AddResult::Skipped);
    QCOMPARE(s.sampleCount(), 0);
    QCOMPARE(s.add(pool(16, 2, 4), counters(100, 40), 0.5), KvHeatSeries::AddResult::Appended);
    QCOMPARE(s.sample(0).count(KvBlockOwner::Sequence), 2);
    QCOMPARE(s.sample(0).count(KvBlockOwner::Prefix), 4);
    QCOMPARE(s.sample(0).count(KvBlockOwner::Free), 10);
    QCOMPARE(s.sample(0).prefixHitRate, -1.0);  // no interval yet
    QCOMPARE(s.add(pool(16, 0, 6, 2), counters(300, 190, 50, 25), 1.0), KvHeatSeries::AddResult::Appended);
    const ragwb::KvHeatSample& b = s.sample(1);
    QCOMPARE(b.intervalSeconds, 0.5);
    QCOMPARE(b.prefixQueriedTokens, 200);
    QCOMPARE(b.prefixHitRate, 0.75);  // 150 of 200
    QCOMPARE(b.passageHitRate, 0.5);
    QCOMPARE(b.subgraphHitRate, -1.0);  // no subgraph was looked up
    QCOMPARE(s.add(pool(16, 1, 6, 2), counters(300, 190, 50, 25), 1.5), KvHeatSeries::AddResult::Appended);
    QCOMPARE(s.sample(2).prefixHitRate, -1.0);  // nothing looked up in this interval
    // A reloaded engine: its counters start again, its pool may differ.
    QCOMPARE(s.add(pool(16, 1, 0), counters(10, 0), 2.0), KvHeatSeries::AddResult::Restarted);
    QCOMPARE(s.sampleCount(), 1);
    QCOMPARE(s.add(pool(8, 1, 0), counters(20, 5), 2.5), KvHeatSeries::AddResult::Restarted);
    QCOMPARE(s.blockCount(), 8);
    for (int i = 0; i < 20; ++i) s.add(pool(8, 1, 1), counters(20 + i, 5), 3.0 + i);
    QCOMPARE(s.sampleCount(), 10);
    s.setCapacity(4);
    QCOMPARE(s.sampleCount(), 4);
    QCOMPARE(s.latest()->timeSeconds, 22.0);
  }

  void columnsShowBlocksOrStackedShares() {
    KvHeatSeries s;
    rag::KvBlockMap m = pool(10, 0, 0);
    m.owners[0] = code(KvBlockOwner::Sequence);  // bin 0 (blocks 0-4): 1 sequence, 4 free
    m.owners[5] = m.owners[6] = m.owners[7] = code(KvBlockOwner::Passage);  // bin 1: 3 passage, 2 free
    s.add(m, counters(0, 0), 0);
    QCOMPARE(s.blocksPerRow(2), 5);
    QCOMPARE(s.rowCount(2), 2);
    QCOMPARE(s.rowCount(1000), 10);
    QCOMPARE(s.column(0, 2, KvHeatSeries::Layout::ByBlock),
             (std::vector<uint8_t>{code(KvBlockOwner::Free), code(KvBlockOwner::Passage)}));
    QCOMPARE(s.column(0, 10, KvHeatSeries::Layout::ByBlock), m.owners);
    // Stacked: sequence, prefix, subgraph, passage, free, each with its share of the rows.
    const std::vector<uint8_t> stacked = s.column(0, 10, KvHeatSeries::Layout::ByOwner);
    QCOMPARE(stacked, (std::vector<uint8_t>{code(KvBlockOwner::Sequence), code(KvBlockOwner::Passage),
                                            code(KvBlockOwner::Passage), code(KvBlockOwner::Passage),
                                            code(KvBlockOwner::Free), code(KvBlockOwner::Free), code(KvBlockOwner::Free),
                                            code(KvBlockOwner::Free), code(KvBlockOwner::Free), code(KvBlockOwner::Free)}));
    // Two rows for ten blocks (1 sequence, 3 passage, 6 free): the owner furthest over its
    // share (the sequence's 0.2 rows) gives its row up.
    QCOMPARE(s.column(0, 2, KvHeatSeries::Layout::ByOwner),
             (std::vector<uint8_t>{code(KvBlockOwner::Passage), code(KvBlockOwner::Free)}));
  }

  void widgetDrawsOwnersAndHitRates() {
    ragwb::KvHeatmap w;
    QVERIFY(w.poolStatus().contains("Waiting"));
    QSignalSpy replots(w.plot(), &QCustomPlot::afterReplot);
    w.resize(700, 500);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.addSampleAt(pool(16, 2, 4), counters(100, 40), 0.5);
    w.addSampleAt(pool(16, 0, 6, 2), counters(300, 190, 50, 25), 1.0);
    QCPColorMapData* d = w.blockMap()->data();
    QCOMPARE(d->keySize(), 2);
    QCOMPARE(d->valueSize(), 16);
    QCOMPARE(d->cell(0, 0), double(code(KvBlockOwner::Sequence)));
    QCOMPARE(d->cell(1, 0), double(code(KvBlockOwner::Prefix)));
    QCOMPARE(d->cell(1, 6), double(code(KvBlockOwner::Passage)));
    QCOMPARE(d->cell(1, 15), double(code(KvBlockOwner::Free)));
    QCOMPARE(w.prefixHitGraph()->dataCount(), 1);  // one interval
    QCOMPARE(w.prefixHitGraph()->data()->at(0)->value, 75.0);
    QCOMPARE(w.passageHitGraph()->dataCount(), 1);
    QCOMPARE(w.subgraphHitGraph()->dataCount(), 0);
    QVERIFY2(w.poolStatus().contains("16 KV blocks, 8 in use") && w.poolStatus().contains("75.0 %"),
             qPrintable(w.poolStatus()));
    QVERIFY2(w.legendText().contains("6 cached prefixes") && w.legendText().contains("2 passage blocks") &&
                 w.legendText().contains("8 free"),
             qPrintable(w.legendText()));
    QTRY_VERIFY(replots.count() >= 1);  // replots are queued
    QVERIFY(w.longestReplotMs() > 0);

    // The stack toggle: prefixes (6 of 16 rows) stacked on top, free at the bottom.
    w.findChild<QCheckBox*>()->setChecked(true);
    QCOMPARE(w.blockLayout(), KvHeatSeries::Layout::ByOwner);
    QCOMPARE(d->cell(1, 0), double(code(KvBlockOwner::Prefix)));
    QCOMPARE(d->cell(1, 6), double(code(KvBlockOwner::Passage)));
    QCOMPARE(d->cell(1, 15), double(code(KvBlockOwner::Free)));

    const QString png = m_dir.filePath("kv-heat.png");
    QVERIFY(w.savePng(png, 600, 400));
    QImage img(png);
    QCOMPARE(img.size(), QSize(600, 400));
    w.clear();
    QCOMPARE(w.series().sampleCount(), 0);
    QCOMPARE(d->keySize(), 0);
  }

  // End to end: the heatmap connected to a real (tiny) engine through the bridge. Reports
  // arrive twice a second; after one-shot requests (prefix cache on), the view holds the
  // prompts the cache kept as prefix blocks, its used blocks match the engine's count, and the
  // intervals account for every token the cache was asked for.
  void servedRequestsShowAsCachedPrefixes() {
    QVERIFY(m_dir.isValid());
    auto t = rag::testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    ragwb::EngineBridge bridge;
    ragwb::KvHeatmap view;
    view.setWindowSamples(100000);
    QObject::connect(&bridge, &ragwb::EngineBridge::kvBlocks, &view, &ragwb::KvHeatmap::addSample);
    QSignalSpy reports(&bridge, &ragwb::EngineBridge::kvBlocks);
    QSignalSpy ready(&bridge, &ragwb::EngineBridge::engineReady);
    bridge.startEngine(tinyBridgeConfig(*t));
    QVERIFY(ready.wait(60000));
    // The worker maps the pool once asked: the first reports may be empty (not drawn).
    QTRY_VERIFY_WITH_TIMEOUT(view.series().sampleCount() >= 1, 10000);
    QVERIFY(reports.count() >= 1);
    const int blocks = view.series().blockCount();
    QCOMPARE(blocks, bridge.stats().kvBlocksTotal);
    QCOMPARE(view.series().latest()->count(KvBlockOwner::Sequence), 0);  // nothing served yet
    const int64_t queriedBefore = bridge.stats().prefixQueriedTokens;  // the window's first counters

    QSignalSpy done(&bridge, &ragwb::EngineBridge::runFinished);
    ragwb::RunRequest run;
    run.graph = *rag::builtinWorkflow(rag::Workflow::OneShot);
    run.split = "test";
    run.count = 6;
    run.rps = 0;
    QVERIFY(bridge.startRun(run));
    QVERIFY(done.wait(120000));
    const rag::ServingStats after = bridge.stats();
    QVERIFY(after.prefixCacheOn);
    QVERIFY(after.prefixQueriedTokens > 0);
    // Wait for a report taken after the run (no sequence left, the cache's prompts kept).
    const int seen = view.series().sampleCount();
    QTRY_VERIFY_WITH_TIMEOUT(view.series().sampleCount() >= seen + 3, 10000);
    const ragwb::KvHeatSample& last = *view.series().latest();
    QCOMPARE(last.count(KvBlockOwner::Sequence), 0);
    QVERIFY(last.count(KvBlockOwner::Prefix) > 0);
    QCOMPARE(blocks - last.count(KvBlockOwner::Free), bridge.stats().kvBlocksUsed);
    int64_t queried = 0;
    for (int i = 0; i < view.series().sampleCount(); ++i) queried += view.series().sample(i).prefixQueriedTokens;
    QCOMPARE(queried, bridge.stats().prefixQueriedTokens - queriedBefore);
    QVERIFY(view.legendText().contains(QString("%1 cached prefixes").arg(last.count(KvBlockOwner::Prefix))));
  }
};

QTEST_MAIN(TestKvHeatmap)
#include "test_kv_heatmap.moc"
