// The run history panel and its models: listing a RunStore newest first (in the background),
// reopening a run, refusing a newer-schema or damaged file without losing the shown list,
// deleting, and exporting metrics CSV and Chrome-trace JSON. With RAGWB_SCREENSHOT_DIR set,
// renders the panel and a request table there for review.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTableView>
#include <filesystem>

#include "history/request_table_model.h"
#include "history/run_history_model.h"
#include "history/run_history_panel.h"
#include "rag/run_store.h"

namespace fs = std::filesystem;
using ragwb::RequestTableModel;
using ragwb::RunHistoryModel;
using ragwb::RunHistoryPanel;

namespace {

rag::StageTiming stage(std::string node, rag::NodeKind kind, double begin, double end, bool spec = false) {
  rag::StageTiming s;
  s.node = std::move(node);
  s.kind = kind;
  s.beginSeconds = begin;
  s.endSeconds = end;
  s.speculative = spec;
  return s;
}

rag::RequestRecord record(uint32_t id, std::string question, std::string answer, std::vector<std::string> gold,
                          double latency) {
  rag::RequestRecord r;
  r.requestId = id;
  r.question = std::move(question);
  r.answer = std::move(answer);
  r.goldAnswers = std::move(gold);
  r.correct = !r.goldAnswers.empty() && r.answer.find(r.goldAnswers[0]) != std::string::npos;
  r.latencySeconds = latency;
  r.speculations = 2;
  r.specAccepted = 1;
  r.rollbacks = 1;
  r.stages = {stage("retrieve", rag::NodeKind::Retrieval, 0.001, 0.013),
              stage("answer", rag::NodeKind::Generation, 0.013, 0.043, true)};
  r.stages[0].output = "dog: a domestic canine.\n";  // passages: not shown
  r.stages[1].output = r.answer;
  return r;
}

rag::TraceEvent span(uint64_t begin, uint64_t end, uint32_t request, uint16_t lane, rag::TraceStage stage,
                     uint8_t flags = 0) {
  rag::TraceEvent e;
  e.beginNs = begin;
  e.endNs = end;
  e.requestId = request;
  e.lane = lane;
  e.stage = stage;
  e.flags = flags;
  e.arg0 = 7;
  e.arg1 = 3;
  return e;
}

// Patches SQLite's header field "user_version" (big-endian at byte 60), as a newer build that
// migrated the file would have left it.
bool setUserVersion(const QString& path, quint32 version) {
  QFile f(path);
  if (!f.open(QIODevice::ReadWrite) || !f.seek(60)) return false;
  const char bytes[4] = {char(version >> 24), char(version >> 16), char(version >> 8), char(version)};
  return f.write(bytes, 4) == 4;
}

}  // namespace

class TestRunHistory : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString m_store;
  qint64 m_finished = 0, m_unfinished = 0;

  QString file(const QString& name) const { return m_dir.filePath(name); }

  // A panel listing m_store, with dialogs off.
  void loadPanel(RunHistoryPanel& panel) {
    panel.setDialogsEnabled(false);
    QSignalSpy loaded(&panel, &RunHistoryPanel::runsLoaded);
    panel.setStorePath(m_store.toStdString());
    QTRY_COMPARE(loaded.count(), 1);
    QCOMPARE(panel.model()->rowCount(), 2);
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_store = file("runs.db");
    auto store = rag::RunStore::open(m_store.toStdString());
    QVERIFY(store.isOk());
    rag::RunSettings settings;
    settings.workflow = "one-shot";
    settings.mode = "hedra";
    settings.split = "test";
    settings.rps = 4;
    settings.requests = 2;
    settings.nprobe = 128;
    settings.sloSeconds = 1;
    auto run = store->beginRun(settings);
    QVERIFY(run.isOk());
    m_finished = *run;
    std::vector<rag::RequestRecord> recs = {record(1, "What is a dog a kind of?", "a canine", {"canine"}, 0.043),
                                            record(2, "Define RAM", "memory", {"random-access memory"}, 1.5)};
    QVERIFY(store->addRequests(m_finished, recs).isOk());
    const rag::RunMetrics metrics = rag::computeRunMetrics(recs, 2, 1.0, 2.0);
    std::vector<rag::TraceEvent> trace = {span(1'000'000, 13'000'000, 1, 1, rag::TraceStage::RetrievalStep),
                                          span(13'000'000, 43'000'000, 1, 0, rag::TraceStage::Decode,
                                               rag::kTraceSpeculative),
                                          span(20'000'000, 20'000'000, 2, 0, rag::TraceStage::User,
                                               rag::kTraceInstant)};
    QVERIFY(store->finishRun(m_finished, metrics, trace, {{"generation", rag::LaneKind::Generation}, {"retrieval", rag::LaneKind::Retrieval}}).isOk());

    settings.workflow = "multi, hop";  // a comma: CSV must quote it
    settings.mode = "flashrag";
    settings.requests = 5;
    auto unfinished = store->beginRun(settings);
    QVERIFY(unfinished.isOk());
    m_unfinished = *unfinished;
    QVERIFY(store->addRequests(m_unfinished, std::vector{record(1, "Who?", "nobody", {}, 0.2)}).isOk());
  }

  void requestModelShowsResults() {
    RequestTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model.columnCount(), int(RequestTableModel::ColumnCount));
    model.append(record(7, "What is a dog a kind of?", "a canine", {"canine"}, 0.0427));
    model.append(record(8, "Define RAM", "memory", {"random-access memory"}, 1.5));
    rag::RequestRecord failed = record(9, "Why?", "", {}, 0);
    failed.ok = false;
    failed.error = "request was cancelled";
    model.append(failed);
    QCOMPARE(model.rowCount(), 3);
    auto text = [&](int row, int col) { return model.index(row, col).data().toString(); };
    QCOMPARE(text(0, RequestTableModel::IdColumn), QString("7"));
    QCOMPARE(text(0, RequestTableModel::CorrectColumn), QString("✓"));
    QCOMPARE(text(1, RequestTableModel::CorrectColumn), QString("✗"));
    QCOMPARE(text(2, RequestTableModel::CorrectColumn), QString());  // free text: not graded
    QCOMPARE(text(0, RequestTableModel::LatencyColumn), QString("43 ms"));
    QCOMPARE(text(0, RequestTableModel::SpeculationColumn), QString("2 / 1"));
    QCOMPARE(text(0, RequestTableModel::StagesColumn), QString("retrieve 12 ms → answer 30 ms (spec)"));
    // Its tooltip: a line per stage with what a generation wrote.
    QCOMPARE(model.index(0, RequestTableModel::StagesColumn).data(Qt::ToolTipRole).toString(),
             QString("retrieve 12 ms\nanswer 30 ms (spec): a canine"));
    QVERIFY(text(2, RequestTableModel::AnswerColumn).contains("cancelled"));
    QCOMPARE(model.index(1, RequestTableModel::LatencyColumn).data(Qt::UserRole).toDouble(), 1.5);
    model.setRecords({record(1, "q", "a", {}, 0.004)});
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(text(0, RequestTableModel::LatencyColumn), QString("4.0 ms"));
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  void historyModelShowsRuns() {
    auto store = rag::RunStore::open(m_store.toStdString());
    QVERIFY(store.isOk());
    auto runs = store->listRuns();
    QVERIFY(runs.isOk());
    RunHistoryModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setRuns(*runs);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.columnCount(), int(RunHistoryModel::ColumnCount));
    auto text = [&](int row, int col) { return model.index(row, col).data().toString(); };
    const int fin = model.rowOfRun(m_finished);
    const int unf = model.rowOfRun(m_unfinished);
    QCOMPARE(text(fin, RunHistoryModel::WorkflowColumn), QString("one-shot"));
    QCOMPARE(text(fin, RunHistoryModel::ModeColumn), QString("hedra"));
    QCOMPARE(text(fin, RunHistoryModel::FinishedColumn), QString("✓"));
    QCOMPARE(text(fin, RunHistoryModel::SloColumn), QString("50.0 %"));  // 1.5 s > 1 s SLO
    QCOMPARE(text(fin, RunHistoryModel::AccuracyColumn), QString("50.0 %"));
    QCOMPARE(model.index(fin, RunHistoryModel::MeanLatencyColumn).data(Qt::UserRole).toDouble(),
             (0.043 + 1.5) / 2);
    QCOMPARE(text(unf, RunHistoryModel::FinishedColumn), QString("unfinished"));
    QCOMPARE(text(unf, RunHistoryModel::MeanLatencyColumn), QString("—"));  // no metrics yet
    QCOMPARE(model.rowOfRun(12345), -1);
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  void panelListsNewestFirst() {
    RunHistoryPanel panel;
    QAbstractItemModelTester tester(panel.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    loadPanel(panel);
    QCOMPARE(panel.model()->run(0)->id, m_unfinished);
    QCOMPARE(panel.model()->run(1)->id, m_finished);
    QVERIFY(!panel.model()->run(0)->finished);
    QCOMPARE(panel.storePath(), fs::path(m_store.toStdString()));
  }

  void openEmitsTheStoredRun() {
    RunHistoryPanel panel;
    loadPanel(panel);
    QSignalSpy opened(&panel, &RunHistoryPanel::runOpened);
    panel.openRun(m_finished);
    QTRY_COMPARE(opened.count(), 1);
    QCOMPARE(opened.at(0).at(0).toLongLong(), m_finished);
    const auto trace = qvariant_cast<rag::StoredTrace>(opened.at(0).at(1));
    const auto requests = qvariant_cast<std::vector<rag::RequestRecord>>(opened.at(0).at(2));
    const auto summary = qvariant_cast<rag::RunSummary>(opened.at(0).at(3));
    QCOMPARE(trace.events.size(), size_t{3});
    QCOMPARE(trace.events[1].stage, rag::TraceStage::Decode);
    QCOMPARE(rag::laneNames(trace.lanes), (std::vector<std::string>{"generation", "retrieval"}));
    QCOMPARE(requests.size(), size_t{2});
    QCOMPARE(requests[0].question, std::string("What is a dog a kind of?"));
    QCOMPARE(requests[0].stages.size(), size_t{2});
    QCOMPARE(summary.id, m_finished);
    QCOMPARE(summary.settings.workflow, std::string("one-shot"));
    QVERIFY(summary.finished);

    // An unfinished run opens with the requests it recorded and no trace.
    panel.openRun(m_unfinished);
    QTRY_COMPARE(opened.count(), 2);
    QVERIFY(qvariant_cast<rag::StoredTrace>(opened.at(1).at(1)).events.empty());
    QCOMPARE(qvariant_cast<std::vector<rag::RequestRecord>>(opened.at(1).at(2)).size(), size_t{1});
  }

  void newerSchemaOrDamagedFileKeepsTheList() {
    const QString newer = file("newer.db");
    QVERIFY(QFile::copy(m_store, newer));
    QVERIFY(setUserVersion(newer, 99));
    const QString garbage = file("garbage.db");
    {
      QFile f(garbage);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QByteArray(8192, 'z'));
    }

    RunHistoryPanel panel;
    loadPanel(panel);
    QSignalSpy errors(&panel, &RunHistoryPanel::errorOccurred);
    QSignalSpy loaded(&panel, &RunHistoryPanel::runsLoaded);
    panel.setStorePath(newer.toStdString());
    QTRY_COMPARE(errors.count(), 1);
    const QString why = errors.at(0).at(0).toString();
    QVERIFY2(why.contains("newer") && why.contains("schema"), qPrintable(why));
    QVERIFY(why.contains("newer.db"));
    QCOMPARE(panel.model()->rowCount(), 2);  // the previous list stays
    QCOMPARE(panel.storePath(), fs::path(m_store.toStdString()));

    panel.setStorePath(garbage.toStdString());
    QTRY_COMPARE(errors.count(), 2);
    QVERIFY(errors.at(1).at(0).toString().contains("garbage.db"));
    QCOMPARE(panel.model()->rowCount(), 2);
    QCOMPARE(loaded.count(), 0);
    panel.refresh();  // still the good file
    QTRY_COMPARE(loaded.count(), 1);
    QCOMPARE(panel.model()->rowCount(), 2);
    // The newer file was not touched (no downgrade, no migration).
    QFile f(newer);
    QVERIFY(f.open(QIODevice::ReadOnly) && f.seek(60));
    QCOMPARE(f.read(4), QByteArray("\0\0\0\x63", 4));
  }

  void exportsMetricsCsv() {
    RunHistoryPanel panel;
    loadPanel(panel);
    const QString all = file("all.csv");
    QVERIFY(panel.exportMetricsCsv(all));
    QFile f(all);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 3);  // header + one line per run
    QVERIFY(lines[0].startsWith("run,started_at,workflow,mode"));
    QVERIFY(lines[0].contains("p99_latency_s") && lines[0].contains("slo_attainment"));
    QVERIFY(lines[1].startsWith(QString::number(m_unfinished) + ","));
    QVERIFY(lines[1].contains("\"multi, hop\""));
    QVERIFY(lines[2].contains(",one-shot,hedra,test,4,2,128,1,1,2,0,"));

    const QString one = file("one.csv");
    QVERIFY(panel.exportMetricsCsv(one, m_finished));
    QFile g(one);
    QVERIFY(g.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(g.readAll()).split('\n', Qt::SkipEmptyParts).size(), 2);

    QSignalSpy errors(&panel, &RunHistoryPanel::errorOccurred);
    QVERIFY(!panel.exportMetricsCsv(file("none.csv"), 9999));
    QVERIFY(!panel.exportMetricsCsv(file("no/such/dir/x.csv")));
    QCOMPARE(errors.count(), 2);
  }

  void exportsChromeTrace() {
    RunHistoryPanel panel;
    loadPanel(panel);
    QSignalSpy exported(&panel, &RunHistoryPanel::traceExported);
    const QString path = file("trace.json");
    panel.exportTrace(m_finished, path);
    QTRY_COMPARE(exported.count(), 1);
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QJsonParseError err;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &err);
    QVERIFY2(!doc.isNull(), qPrintable(err.errorString()));
    const QJsonArray events = doc.object().value("traceEvents").toArray();
    QCOMPARE(events.size(), 5);  // 2 lane names + 3 events
    QStringList lanes;
    QList<QJsonObject> spans;
    for (const QJsonValue& v : events) {
      const QJsonObject e = v.toObject();
      QCOMPARE(e.value("pid").toInt(), 1);
      if (e.value("ph").toString() == "M") lanes << e.value("args").toObject().value("name").toString();
      else spans << e;
    }
    QCOMPARE(lanes, (QStringList{"generation", "retrieval"}));
    QCOMPARE(spans.size(), 3);
    const QJsonObject decode = spans[1];
    QCOMPARE(decode.value("ph").toString(), QString("X"));
    QCOMPARE(decode.value("ts").toDouble(), 12000.0);  // µs after the first event
    QCOMPARE(decode.value("dur").toDouble(), 30000.0);
    QCOMPARE(decode.value("tid").toInt(), 0);
    QCOMPARE(decode.value("args").toObject().value("request").toInt(), 1);
    QCOMPARE(decode.value("args").toObject().value("arg0").toInt(), 7);
    QCOMPARE(decode.value("args").toObject().value("flags").toInt(), int(rag::kTraceSpeculative));
    QCOMPARE(spans[0].value("tid").toInt(), 1);
    QCOMPARE(spans[2].value("ph").toString(), QString("i"));  // the instant

    // An unfinished run has no trace to export.
    QSignalSpy errors(&panel, &RunHistoryPanel::errorOccurred);
    panel.exportTrace(m_unfinished, file("none.json"));
    QTRY_COMPARE(errors.count(), 1);
    QVERIFY(!QFile::exists(file("none.json")));
  }

  void deleteRemovesTheRun() {
    const QString copy = file("delete.db");
    QVERIFY(QFile::copy(m_store, copy));
    RunHistoryPanel panel;
    panel.setDialogsEnabled(false);
    QSignalSpy loaded(&panel, &RunHistoryPanel::runsLoaded);
    QSignalSpy deleted(&panel, &RunHistoryPanel::runDeleted);
    panel.setStorePath(copy.toStdString());
    QTRY_COMPARE(loaded.count(), 1);
    panel.deleteRun(m_finished);
    QTRY_COMPARE(loaded.count(), 2);  // listed again after the delete
    QCOMPARE(deleted.count(), 1);
    QCOMPARE(panel.model()->rowCount(), 1);
    QCOMPARE(panel.model()->run(0)->id, m_unfinished);
  }

  void rendersPanelAndRequests() {
    RunHistoryPanel panel;
    loadPanel(panel);
    panel.resize(1100, 320);
    panel.selectRun(m_finished);
    QCOMPARE(panel.selectedRunId(), m_finished);
    QVERIFY(!panel.grab().isNull());
    RequestTableModel requests;
    requests.append(record(1, "What is a dog a kind of?", "a canine", {"canine"}, 0.043));
    requests.append(record(2, "Define RAM", "memory", {"random-access memory"}, 1.5));
    QTableView view;
    view.setModel(&requests);
    view.verticalHeader()->hide();
    view.horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view.horizontalHeader()->setStretchLastSection(true);
    view.resize(1100, 160);
    const QString dir = qEnvironmentVariable("RAGWB_SCREENSHOT_DIR");
    if (!dir.isEmpty()) {
      QVERIFY(panel.grab().save(dir + "/run-history.png"));
      QVERIFY(view.grab().save(dir + "/request-table.png"));
    }
  }
};

QTEST_MAIN(TestRunHistory)
#include "test_run_history.moc"
