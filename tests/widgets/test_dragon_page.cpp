// The DRAGON page: its event model (QAbstractItemModelTester; who held the aggregator, the
// transfers, what the columns say), the timeline's hover texts, the page's refusals (no question,
// a missing model), and end to end: a real DRAGON exchange between an in-process cloud and device
// over loopback TCP (the shipped model, a tiny corpus split between WordNet and FOLDOC) whose
// events are found in the page's model, then DRDG/TW on the same question giving the same answer.
// No timings asserted; the GUI thread's longest stall during the live run is printed.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <filesystem>

#include "../fixtures/workload/tiny_corpus.h"
#include "bridge/gui_stall_meter.h"
#include "inspectors/dragon_event_model.h"
#include "inspectors/dragon_page.h"
#include "inspectors/dragon_timeline_view.h"
#include "storage/sqlite.h"

using rag::DragonEvent;
using rag::DragonSide;
using ragwb::DragonEventModel;

namespace {

DragonEvent ev(DragonEvent::Kind k, DragonSide observer, DragonSide side, uint32_t pos, double t) {
  DragonEvent e;
  e.kind = k;
  e.observer = observer;
  e.side = side;
  e.pos = pos;
  e.startMs = e.endMs = t;
  e.text = " tok" + std::to_string(pos);
  return e;
}

// Two positions: the device decides position 0 (its draft accepted, the cloud's rejected) and
// hands the aggregator to the cloud, which rolls back and decides position 1.
std::vector<DragonEvent> twoPositions() {
  using K = DragonEvent::Kind;
  const DragonSide D = DragonSide::Device, C = DragonSide::Cloud;
  std::vector<DragonEvent> v;
  DragonEvent d0 = ev(K::Decoded, D, D, 0, 1);
  d0.startMs = 0;
  d0.decodeMs = 1;
  v.push_back(d0);
  DragonEvent c0 = ev(K::Decoded, C, C, 0, 1.2);
  c0.startMs = 0.5;
  v.push_back(c0);
  DragonEvent a = ev(K::Arrived, C, D, 0, 51);  // the device's draft reaches the cloud
  a.sentMs = 1;
  a.receivedMs = 51;
  v.push_back(a);
  DragonEvent b = ev(K::Arrived, D, C, 0, 51.2);
  b.sentMs = 1.2;
  b.receivedMs = 51.2;
  v.push_back(b);
  DragonEvent v0 = ev(K::Verdict, D, D, 0, 52);
  v0.accepted[0] = true;
  v0.next = C;
  v.push_back(v0);
  DragonEvent v0c = v0;  // the cloud learns of it
  v0c.observer = C;
  v0c.sentMs = 52;
  v0c.receivedMs = v0c.startMs = v0c.endMs = 102;
  v.push_back(v0c);
  v.push_back(ev(K::Rollback, C, C, 0, 102));
  DragonEvent stale = ev(K::Stale, D, C, 1, 110);
  stale.sentMs = 60;
  stale.receivedMs = 110;
  v.push_back(stale);
  DragonEvent v1 = ev(K::Verdict, C, C, 1, 150);
  v1.accepted[0] = v1.accepted[1] = true;
  v1.next = D;
  v.push_back(v1);
  return v;
}

}  // namespace

class TestDragonPage : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString corpus() const { return m_dir.filePath("corpus.db"); }
  static QString shippedModel() { return QStringLiteral(RAGWB_SOURCE_DIR "/datasets/models/rag-llama"); }

private Q_SLOTS:
  void modelKeepsEventsAndDerivesTheTimeline() {
    DragonEventModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
    const std::vector<DragonEvent> events = twoPositions();
    m.appendEvents({events.begin(), events.begin() + 4});
    m.appendEvents({events.begin() + 4, events.end()});
    QCOMPARE(inserted.count(), 2);  // one insert per batch
    QCOMPARE(m.rowCount(), static_cast<int>(events.size()));
    QCOMPARE(m.decidedPositions(), 2);  // each verdict counted once, as its decider recorded it
    QCOMPARE(m.count(DragonEvent::Kind::Verdict, DragonSide::Cloud), 2);
    // The aggregator: the device until its verdict at 52 ms, then the cloud until 150 ms.
    const auto spans = m.aggregatorSpans();
    QCOMPARE(spans.size(), size_t{2});
    QCOMPARE(spans[0].side, DragonSide::Device);
    QCOMPARE(spans[0].endMs, 52.0);
    QCOMPARE(spans[1].side, DragonSide::Cloud);
    QCOMPARE(spans[1].beginMs, 52.0);
    QCOMPARE(spans[1].endMs, 150.0);
    // Frames: two drafts, the device's verdict to the cloud, one stale draft; local events none.
    QCOMPARE(m.transfers().size(), size_t{4});
    QCOMPARE(m.transfers()[2].kind, ragwb::DragonTransfer::Kind::Verdict);
    QCOMPARE(m.transfers()[2].latencyMs(), 50.0);
    QCOMPARE(m.transfers()[3].kind, ragwb::DragonTransfer::Kind::StaleDraft);
    // What the table says.
    auto cell = [&](int row, int col) { return m.data(m.index(row, col)).toString(); };
    QCOMPARE(cell(2, DragonEventModel::Kind), QStringLiteral("arrived"));
    QVERIFY(cell(2, DragonEventModel::Detail).contains("device → cloud"));
    QVERIFY(cell(2, DragonEventModel::Detail).contains("50.0 ms on the link"));
    QVERIFY(cell(4, DragonEventModel::Detail).contains("cloud ✗"));
    QVERIFY(cell(4, DragonEventModel::Detail).contains("next aggregator: cloud"));
    QCOMPARE(cell(6, DragonEventModel::Kind), QStringLiteral("rollback"));
    QVERIFY(m.data(m.index(6, 0), Qt::ForegroundRole).isValid());  // rollbacks stand out
    // Two more verdicts decided by the device, which keeps the aggregator: one holding span.
    DragonEvent v2 = ev(DragonEvent::Kind::Verdict, DragonSide::Device, DragonSide::Device, 2, 200);
    DragonEvent v3 = ev(DragonEvent::Kind::Verdict, DragonSide::Device, DragonSide::Device, 3, 250);
    v2.next = v3.next = DragonSide::Device;
    m.appendEvents({v2, v3});
    const auto merged = m.aggregatorSpans();
    QCOMPARE(merged.size(), size_t{3});
    QCOMPARE(merged[2].side, DragonSide::Device);
    QCOMPARE(merged[2].beginMs, 150.0);
    QCOMPARE(merged[2].endMs, 250.0);
    QSignalSpy reset(&m, &QAbstractItemModel::modelReset);
    m.clear();
    QCOMPARE(reset.count(), 1);
    QCOMPARE(m.rowCount(), 0);
    QVERIFY(m.aggregatorSpans().empty());
    QVERIFY(m.transfers().empty());
  }

  void timelineSaysWhatIsUnderTheMouse() {
    DragonEventModel m;
    m.appendEvents(twoPositions());
    ragwb::DragonTimelineView view(&m);
    view.resize(800, 260);
    QVERIFY(!view.grab().isNull());  // paints (and lays out its hover items)
    // Geometry of the view: labels 92 px, then 696 px for 150 × 1.03 ms; device lane from y 8.
    auto x = [](double ms) { return 92 + ms / (150 * 1.03) * 696; };
    QVERIFY(view.toolTipAt(QPointF(x(0.5), 25)).contains("device drafted position 0"));
    QVERIFY(view.toolTipAt(QPointF(x(100), 8 + 34 + 70 + 34 + 8 + 9)).contains("the cloud held the aggregator"));
    QVERIFY(view.toolTipAt(QPointF(x(52), 12)).contains("the device's draft accepted"));
    QVERIFY(view.toolTipAt(QPointF(x(52), 8 + 34 + 70 + 30)).contains("the cloud's draft rejected"));
    QVERIFY(view.toolTipAt(QPointF(x(130), 25)).isEmpty());  // nothing happened there
  }

  void refusesWithoutAQuestionOrAModel() {
    ragwb::DragonPage page;
    QSignalSpy finished(&page, &ragwb::DragonPage::runFinished);
    page.questionEdit()->clear();
    page.start();
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished[0][0].toBool(), false);
    QVERIFY(finished[0][1].toString().contains("question"));
    QVERIFY(!page.busy());
    page.setSources("/nonexistent/model-dir", "/nonexistent/corpus.db");
    page.questionEdit()->setText("What is a compiler?");
    page.start();
    QVERIFY(page.busy());
    QVERIFY(!page.runButton()->isEnabled());
    QVERIFY(finished.wait(20000));
    QCOMPARE(finished[1][0].toBool(), false);
    QVERIFY2(finished[1][1].toString().contains("no model in /nonexistent/model-dir"), qPrintable(finished[1][1].toString()));
    QVERIFY(page.runButton()->isEnabled());
  }

  void aLiveRunOnLoopbackFillsTheModel() {
    if (!std::filesystem::exists(shippedModel().toStdString() + "/model.safetensors"))
      QSKIP("the shipped model datasets/models/rag-llama is missing");
    QVERIFY(m_dir.isValid());
    rag::testing::TinyCorpusSpec spec;
    spec.entities = 40;
    spec.passages = true;
    rag::Status s = rag::testing::makeTinyCorpus(corpus().toStdString(), spec);
    QVERIFY2(s.isOk(), s.message().c_str());
    {  // every other passage becomes a FOLDOC one: the device's private documents
      auto db = rag::sql::Db::open(corpus().toStdString(), rag::sql::OpenMode::ReadWrite);
      QVERIFY(db.isOk());
      QVERIFY(db->exec("UPDATE passages SET source = 'foldoc' WHERE id % 2 = 0").isOk());
    }
    ragwb::DragonPage page;
    page.resize(1200, 800);
    page.show();
    QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    page.setSources(shippedModel().toStdString(), corpus().toStdString());
    page.questionEdit()->setText("What are thing 5 and thing 4 a kind of?");
    page.latencySpin()->setValue(20);
    page.maxTokensSpin()->setValue(8);
    page.ignoreEosBox()->setChecked(true);
    QSignalSpy started(&page, &ragwb::DragonPage::runStarted);
    QSignalSpy finished(&page, &ragwb::DragonPage::runFinished);
    QSignalSpy rows(page.model(), &QAbstractItemModel::rowsInserted);
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    QTest::qWait(100);  // the page's first paint is not the run's
    ragwb::GuiStallMeter meter;
    meter.start();
    page.start();
    QVERIFY(finished.wait(240000));
    meter.stop();
    QVERIFY2(finished[0][0].toBool(), qPrintable(finished[0][1].toString()));
    QCOMPARE(started.count(), 1);
    QVERIFY(rows.count() >= 1);
    qInfo("longest GUI stall during the live run: %.1f ms (GUI thread working %.1f ms of it)", meter.maxStallMs(),
          meter.maxStallBusyMs());
    QVERIFY(page.lastSummary().has_value());
    const rag::DragonSummary summary = *page.lastSummary();
    QCOMPARE(summary.tokens, 8u);
    QVERIFY(summary.bytesSent > 0 && summary.bytesReceived > 0);
    // Both sides' own events are in the model: their drafts, and a verdict per position each.
    const DragonEventModel& m = *page.model();
    QVERIFY(m.count(DragonEvent::Kind::Decoded, DragonSide::Device) >= 8);
    QVERIFY(m.count(DragonEvent::Kind::Decoded, DragonSide::Cloud) >= 8);
    QCOMPARE(m.count(DragonEvent::Kind::Verdict, DragonSide::Device), 8);
    QCOMPARE(m.count(DragonEvent::Kind::Verdict, DragonSide::Cloud), 8);
    QCOMPARE(m.decidedPositions(), 8);
    // Every draft that was accepted or rejected crossed the link: frames both ways, each received
    // after it was sent (one clock for both sides).
    int down = 0, up = 0;
    for (const ragwb::DragonTransfer& t : m.transfers()) {
      QVERIFY(t.receivedMs >= t.sentMs);
      (t.from == DragonSide::Device ? down : up) += 1;
    }
    QVERIFY(down >= 1 && up >= 1);
    // A rollback is recorded exactly where its side's draft was rejected (device's view).
    int64_t rejectedDevice = 0;
    for (const DragonEvent& e : m.events())
      if (e.kind == DragonEvent::Kind::Verdict && e.observer == e.side) rejectedDevice += e.accepted[0] ? 0 : 1;
    QCOMPARE(static_cast<int64_t>(m.count(DragonEvent::Kind::Rollback, DragonSide::Device)), rejectedDevice);
    QCOMPARE(rejectedDevice, summary.rejected[0]);
    // Who aggregated: contiguous spans from the first verdict's decider on.
    const auto spans = m.aggregatorSpans();
    QVERIFY(!spans.empty());
    for (size_t i = 1; i < spans.size(); ++i) QCOMPARE(spans[i].beginMs, spans[i - 1].endMs);
    // The answer is the device's verdict tokens, in position order.
    std::vector<uint32_t> fromVerdicts;
    for (const DragonEvent& e : m.events())
      if (e.kind == DragonEvent::Kind::Verdict && e.observer == DragonSide::Device) {
        QCOMPARE(e.pos, static_cast<uint32_t>(fromVerdicts.size()));
        fromVerdicts.push_back(e.token);
      }
    QCOMPARE(fromVerdicts, summary.tokenIds);
    QVERIFY(!page.timeline()->grab().isNull());

    // The same question token-wise synchronised: the same answer (greedy, deterministic), and
    // the page refuses a second Run while one is in flight.
    page.methodBox()->setCurrentIndex(page.methodBox()->findData("drdg_tw"));
    page.start();
    QVERIFY(page.busy());
    page.start();
    QCOMPARE(finished.count(), 2);
    QVERIFY(finished[1][1].toString().contains("in flight"));
    QVERIFY(finished.wait(240000));
    QVERIFY2(finished[2][0].toBool(), qPrintable(finished[2][1].toString()));
    QCOMPARE(page.lastSummary()->tokenIds, summary.tokenIds);
    QCOMPARE(page.lastSummary()->handovers, int64_t{0});  // DRDG/TW keeps the aggregator on the device
  }
};

QTEST_MAIN(TestDragonPage)
#include "test_dragon_page.moc"
