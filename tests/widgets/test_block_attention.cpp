// The Block-Attention panel: its two models under QAbstractItemModelTester (a row per
// Block-Attention generation with its blocks' KV sources; the block store's records, reset only
// when they change), the strip delegate's colours, and end to end: requests served with Block
// attention on through the engine bridge appear with their passage blocks, the block store lists
// the passages they computed, and the same questions asked again reuse their blocks.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QImage>
#include <QPainter>
#include <QSignalSpy>
#include <QTableView>
#include <filesystem>

#include "tiny_bridge_config.h"
#include "bridge/engine_bridge.h"
#include "panels/block_attention_models.h"
#include "panels/block_attention_panel.h"

using ragwb::BlockRequestModel;
using ragwb::BlockStoreModel;
namespace fs = std::filesystem;

namespace {

rag::SegmentKvUse seg(int64_t passage, int64_t offset, int64_t tokens, int64_t cached, int64_t stored, bool reencoded) {
  rag::SegmentKvUse s;
  s.passageId = passage;
  s.offset = offset;
  s.tokens = tokens;
  s.cachedTokens = cached;
  s.storedTokens = stored;
  s.reencoded = reencoded;
  return s;
}

rag::RequestRecord record(uint32_t id, std::vector<rag::SegmentKvUse> segments) {
  rag::RequestRecord r;
  r.requestId = id;
  rag::StageTiming retrieve;
  retrieve.node = "retrieve";
  retrieve.kind = rag::NodeKind::Retrieval;
  rag::StageTiming gen;
  gen.node = "generate";
  gen.kind = rag::NodeKind::Generation;
  gen.attention = "block";
  gen.segments = std::move(segments);
  r.stages = {retrieve, gen};
  return r;
}

}  // namespace

class TestBlockAttention : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

private Q_SLOTS:
  void totalsSplitTokensBySource() {
    const auto t = ragwb::BlockKvTotals::of({seg(1, 0, 32, 32, 0, false), seg(2, 32, 40, 16, 20, true),
                                             seg(3, 72, 24, 0, 0, true)});
    QCOMPARE(t.cached, 32);
    QCOMPARE(t.reencoded, 36);
    QCOMPARE(t.computed, 4 + 24);
    QCOMPARE(t.stored, 20);
  }

  void requestModelListsBlockGenerations() {
    BlockRequestModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
    rag::RequestRecord causal = record(1, {});
    causal.stages[1].attention = "causal";
    m.addRecord(causal);  // no Block-Attention generation: no row
    QCOMPARE(m.rowCount(), 0);
    m.addRecord(record(2, {seg(7, 0, 32, 32, 0, false), seg(8, 32, 40, 16, 20, true), seg(-1, 72, 24, 0, 0, true)}));
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(m.rowCount(), 1);
    QCOMPARE(m.data(m.index(0, BlockRequestModel::Request)).toUInt(), 2u);
    QCOMPARE(m.data(m.index(0, BlockRequestModel::Node)).toString(), QString("generate"));
    QCOMPARE(m.data(m.index(0, BlockRequestModel::Blocks)).toInt(), 3);
    QCOMPARE(m.data(m.index(0, BlockRequestModel::Cached)).toInt(), 32);
    QCOMPARE(m.data(m.index(0, BlockRequestModel::Reencoded)).toInt(), 36);
    QCOMPARE(m.data(m.index(0, BlockRequestModel::Computed)).toInt(), 28);
    QCOMPARE(m.data(m.index(0, BlockRequestModel::Stored)).toInt(), 20);
    const QString tip = m.data(m.index(0, BlockRequestModel::Strip), Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains("passage 7") && tip.contains("20 from the block store") && tip.contains("re-encoded") &&
                 tip.contains("template text") && tip.contains("4 computed"),
             qPrintable(tip));
    QCOMPARE(m.segments(0).size(), size_t(3));
    QVERIFY(m.segments(5).empty());
    // The oldest rows go beyond the bound.
    QSignalSpy removed(&m, &QAbstractItemModel::rowsRemoved);
    m.setMaxRows(2);
    for (uint32_t id = 3; id <= 5; ++id) m.addRecord(record(id, {seg(id, 0, 16, 0, 0, false)}));
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.requestId(0), 4u);
    QVERIFY(removed.count() >= 1);
    m.clear();
    QCOMPARE(m.rowCount(), 0);
  }

  void storeModelResetsOnlyOnChange() {
    BlockStoreModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy resets(&m, &QAbstractItemModel::modelReset);
    std::vector<rag::BlockStoreEntry> list = {{.passageId = 11, .tokens = 40, .bytes = 2048, .hits = 3, .saved = true},
                                              {.passageId = 12, .tokens = 20, .bytes = 1024, .hits = 0, .saved = false}};
    m.setEntries(list);
    QCOMPARE(resets.count(), 1);
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.data(m.index(0, BlockStoreModel::Passage)).toInt(), 11);
    QCOMPARE(m.data(m.index(0, BlockStoreModel::Hits)).toInt(), 3);
    QCOMPARE(m.data(m.index(0, BlockStoreModel::State)).toString(), QString("on disk"));
    QCOMPARE(m.data(m.index(1, BlockStoreModel::State)).toString(), QString("pending"));
    QCOMPARE(m.totalBytes(), 3072);
    m.setEntries(list);  // the same list: the view is left alone
    QCOMPARE(resets.count(), 1);
    list[1].hits = 1;
    m.setEntries(list);
    QCOMPARE(resets.count(), 2);
    m.setEntries({});
    QCOMPARE(m.rowCount(), 0);
  }

  // The strip: each block as wide as its tokens, its reused part first (cached or re-encoded
  // colour), then its computed part.
  void stripShowsWhereEachBlockCameFrom() {
    BlockRequestModel m;
    m.addRecord(record(1, {seg(1, 0, 50, 50, 0, false), seg(2, 50, 50, 25, 0, true)}));
    ragwb::BlockStripDelegate d;
    QImage img(206, 26, QImage::Format_ARGB32);
    img.fill(Qt::white);
    QPainter p(&img);
    QStyleOptionViewItem opt;
    opt.rect = QRect(0, 0, 206, 26);
    d.paint(&p, opt, m.index(0, BlockRequestModel::Strip));
    p.end();
    // 202 px for 100 tokens from x = 2: block 1 in [2, 103), block 2 reused in [103, 153.5), computed after.
    QCOMPARE(img.pixelColor(50, 13), ragwb::BlockStripDelegate::cachedColour());
    QCOMPARE(img.pixelColor(125, 13), ragwb::BlockStripDelegate::reencodedColour());
    QCOMPARE(img.pixelColor(180, 13), ragwb::BlockStripDelegate::computedColour());
  }

  void servedBlockRequestsAppearWithTheirBlocks() {
    QVERIFY(m_dir.isValid());
    auto t = rag::testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    ragwb::EngineBridge bridge;
    ragwb::BlockAttentionPanel panel(&bridge);
    panel.resize(900, 600);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    QSignalSpy ready(&bridge, &ragwb::EngineBridge::engineReady);
    ragwb::EngineConfig config = tinyBridgeConfig(*t);
    config.blockAttention = true;
    bridge.startEngine(config);
    QVERIFY(ready.wait(60000));
    QVERIFY(panel.statusText().startsWith("Block attention on"));
    auto runOnce = [&] {
      QSignalSpy done(&bridge, &ragwb::EngineBridge::runFinished);
      ragwb::RunRequest run;
      run.graph = *rag::builtinWorkflow(rag::Workflow::OneShot);
      run.split = "test";
      run.count = 4;
      run.rps = 0;
      return bridge.startRun(run) && done.wait(120000);
    };
    QVERIFY(runOnce());
    BlockRequestModel* m = panel.requests();
    QCOMPARE(m->rowCount(), 4);  // one generation per one-shot request
    int64_t passageTokens = 0;
    for (int r = 0; r < m->rowCount(); ++r) {
      QVERIFY(!m->segments(r).empty());
      for (const rag::SegmentKvUse& s : m->segments(r)) {
        QVERIFY(s.tokens > 0);
        QVERIFY(s.computedTokens() >= 0 && s.computedTokens() <= s.tokens);
        if (s.passageId >= 0) passageTokens += s.tokens;
      }
    }
    QVERIFY(passageTokens > 0);
    // The passages computed are in the block store (pending until serving stops).
    QTRY_VERIFY_WITH_TIMEOUT(panel.store()->rowCount() > 0, 10000);
    for (const rag::BlockStoreEntry& e : panel.store()->entries()) {
      QVERIFY(e.passageId >= 0 && e.tokens > 0 && e.bytes > 0);
      QVERIFY(!e.saved);
    }
    // The same questions again: their passage blocks are reused, not computed.
    QVERIFY(runOnce());
    QCOMPARE(m->rowCount(), 8);
    int64_t reused = 0;
    for (int r = 4; r < 8; ++r)
      reused += m->data(m->index(r, BlockRequestModel::Cached)).toLongLong() +
                m->data(m->index(r, BlockRequestModel::Reencoded)).toLongLong();
    QVERIFY(reused > 0);
    QTRY_VERIFY_WITH_TIMEOUT(panel.statusText().contains("passages"), 5000);
  }
};

QTEST_MAIN(TestBlockAttention)
#include "test_block_attention.moc"
