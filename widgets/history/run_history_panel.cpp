#include "history/run_history_panel.h"

#include <QAction>
#include <QFile>
#include <QFileDialog>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QSaveFile>
#include <QTableView>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <set>

#include "bridge/background.h"

namespace ragwb {

namespace {

// Runs `work(store)` on a connection of its own (RunStore is one connection per thread).
template <typename T, typename Work>
rag::Result<T> withStore(const std::filesystem::path& path, Work work) {
  rag::Result<rag::RunStore> store = rag::RunStore::open(path);
  if (!store) return store.status();
  return work(*store);
}

QString message(const rag::Status& s) { return QString::fromStdString(s.message()); }

QString csvField(const QString& s) {
  if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) && !s.contains(QLatin1Char('\n'))) return s;
  return QLatin1Char('"') + QString(s).replace(QLatin1String("\""), QLatin1String("\"\"")) + QLatin1Char('"');
}

// "1 run", "3 runs" (no translation catalogue ships, so tr's %n plural forms would show "(s)").
QString count(qsizetype n, const QString& one, const QString& many) {
  return n == 1 ? one : many.arg(n);
}

QString csvNumber(double v) { return QString::number(v, 'g', 10); }

rag::Status writeFile(const QString& path, const QByteArray& bytes) {
  QSaveFile f(path);  // written whole or not at all
  if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit())
    return rag::Status::ioError(QStringLiteral("cannot write %1: %2").arg(path, f.errorString()).toStdString());
  return rag::Status::ok();
}

}  // namespace

RunHistoryPanel::RunHistoryPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QToolBar;
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  m_openFile = bar->addAction(tr("History file…"), this, &RunHistoryPanel::chooseFile);
  m_openFile->setToolTip(tr("Show the runs of another run history file"));
  m_refresh = bar->addAction(tr("Refresh"), this, &RunHistoryPanel::refresh);
  m_refresh->setShortcut(QKeySequence::Refresh);
  bar->addSeparator();
  m_open = bar->addAction(tr("Open run"), this, &RunHistoryPanel::openSelected);
  m_open->setToolTip(tr("Reopen the selected run: its timeline, requests and metrics"));
  m_delete = bar->addAction(tr("Delete…"), this, &RunHistoryPanel::deleteSelected);
  bar->addSeparator();
  auto* csvMenu = new QMenu(this);
  m_exportCsvAll = csvMenu->addAction(tr("All runs…"), this, [this] { exportCsvDialog(false); });
  m_exportCsvSelected = csvMenu->addAction(tr("Selected run…"), this, [this] { exportCsvDialog(true); });
  auto* csvButton = new QToolButton;
  csvButton->setText(tr("Export metrics CSV"));
  csvButton->setMenu(csvMenu);
  csvButton->setPopupMode(QToolButton::InstantPopup);
  bar->addWidget(csvButton);
  m_exportTrace = bar->addAction(tr("Export trace…"), this, &RunHistoryPanel::exportTraceDialog);
  m_exportTrace->setToolTip(tr("Save the selected run's trace as Chrome-trace JSON (Perfetto, chrome://tracing)"));

  m_table = new QTableView;
  m_table->setModel(&m_model);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->setAlternatingRowColors(true);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(RunHistoryModel::WorkflowColumn, QHeaderView::Stretch);
  connect(m_table, &QTableView::doubleClicked, this, [this](const QModelIndex& i) {
    if (const rag::RunSummary* run = m_model.run(i.row())) openRun(run->id);
  });
  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, &RunHistoryPanel::updateActions);
  connect(&m_model, &QAbstractItemModel::modelReset, this, &RunHistoryPanel::updateActions);

  m_status = new QLabel;
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(bar);
  layout->addWidget(m_table, 1);
  layout->addWidget(m_status);

  connect(&m_listWatcher, &QFutureWatcher<Listed>::finished, this, &RunHistoryPanel::onListed);
  connect(&m_openWatcher, &QFutureWatcher<Opened>::finished, this, &RunHistoryPanel::onOpened);
  connect(&m_deleteWatcher, &QFutureWatcher<Done>::finished, this, &RunHistoryPanel::onDeleted);
  connect(&m_exportWatcher, &QFutureWatcher<Done>::finished, this, &RunHistoryPanel::onTraceExported);
  m_status->setText(tr("No run history file."));
  updateActions();
}

bool RunHistoryPanel::isBusy() const {
  return m_listWatcher.isRunning() || m_openWatcher.isRunning() || m_deleteWatcher.isRunning() ||
         m_exportWatcher.isRunning();
}

qint64 RunHistoryPanel::selectedRunId() const {
  const QModelIndexList rows = m_table->selectionModel()->selectedRows();
  const rag::RunSummary* run = rows.isEmpty() ? nullptr : m_model.run(rows.first().row());
  return run ? run->id : -1;
}

void RunHistoryPanel::selectRun(qint64 id) {
  const int row = m_model.rowOfRun(id);
  if (row < 0) m_table->clearSelection();
  else m_table->selectRow(row);
}

void RunHistoryPanel::updateActions() {
  const bool selected = selectedRunId() >= 0;
  const rag::RunSummary* run = selected ? m_model.run(m_model.rowOfRun(selectedRunId())) : nullptr;
  m_refresh->setEnabled(!m_path.empty());
  m_open->setEnabled(selected);
  m_delete->setEnabled(selected);
  m_exportCsvAll->setEnabled(m_model.rowCount() > 0);
  m_exportCsvSelected->setEnabled(selected);
  m_exportTrace->setEnabled(run && run->finished);  // unfinished runs have no stored trace
}

void RunHistoryPanel::fail(const QString& text) {
  m_status->setText(text);
  Q_EMIT errorOccurred(text);
  if (!m_dialogs) return;
  auto* box = new QMessageBox(QMessageBox::Warning, tr("Run history"), text, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();  // not exec(): the panel keeps working behind it
}

// ---- listing ---------------------------------------------------------------------------------

void RunHistoryPanel::setStorePath(const std::filesystem::path& path) {
  m_status->setText(tr("Reading %1…").arg(QString::fromStdString(path.string())));
  m_listWatcher.setFuture(runInBackground([path] {
    return Listed{path, withStore<std::vector<rag::RunSummary>>(path, [](rag::RunStore& s) { return s.listRuns(); })};
  }));
}

void RunHistoryPanel::refresh() {
  if (!m_path.empty()) setStorePath(m_path);
}

void RunHistoryPanel::onListed() {
  Listed listed = m_listWatcher.result();
  const QString file = QString::fromStdString(listed.path.string());
  if (!listed.runs) {
    fail(tr("Could not open the run history %1: %2").arg(file, message(listed.runs.status())));
    return;
  }
  const qint64 selected = selectedRunId();
  m_path = listed.path;
  const int runCount = static_cast<int>(listed.runs->size());
  m_model.setRuns(std::move(*listed.runs));
  selectRun(selected);
  m_status->setText(tr("%1 in %2").arg(count(runCount, tr("1 run"), tr("%1 runs")), file));
  updateActions();
  Q_EMIT runsLoaded(runCount);
}

// ---- open, delete ----------------------------------------------------------------------------

void RunHistoryPanel::openRun(qint64 id) {
  const rag::RunSummary* listedRun = m_model.run(m_model.rowOfRun(id));
  if (!listedRun) {
    fail(tr("Run %1 is not in the run history.").arg(id));
    return;
  }
  m_status->setText(tr("Loading run %1…").arg(id));
  m_openWatcher.setFuture(runInBackground([path = m_path, summary = *listedRun] {
    rag::Result<rag::RunStore> store = rag::RunStore::open(path);
    if (!store) return Opened{summary, store.status(), store.status()};
    return Opened{summary, store->requests(summary.id), store->trace(summary.id)};
  }));
}

void RunHistoryPanel::onOpened() {
  Opened opened = m_openWatcher.result();
  const qint64 id = opened.summary.id;
  if (!opened.requests) {
    fail(tr("Could not load run %1: %2").arg(id).arg(message(opened.requests.status())));
    return;
  }
  rag::StoredTrace trace;
  if (opened.trace) trace = std::move(*opened.trace);
  else if (opened.trace.status().code() != rag::StatusCode::NotFound || opened.summary.finished) {
    // Only an unfinished run may lack a trace; anything else is a damaged file.
    fail(tr("Could not load the trace of run %1: %2").arg(id).arg(message(opened.trace.status())));
    return;
  }
  m_status->setText(tr("Run %1: %2, %3 trace events")
                        .arg(id)
                        .arg(count(opened.requests->size(), tr("1 request"), tr("%1 requests")))
                        .arg(trace.events.size()));
  Q_EMIT runOpened(id, trace, *opened.requests, opened.summary);
}

void RunHistoryPanel::deleteRun(qint64 id) {
  m_deleteWatcher.setFuture(runInBackground([path = m_path, id] {
    rag::Result<rag::RunStore> store = rag::RunStore::open(path);
    return Done{id, {}, store ? store->deleteRun(id) : store.status()};
  }));
}

void RunHistoryPanel::onDeleted() {
  const Done done = m_deleteWatcher.result();
  if (!done.status) fail(tr("Could not delete run %1: %2").arg(done.id).arg(message(done.status)));
  else Q_EMIT runDeleted(done.id);
  refresh();
}

// ---- exports ---------------------------------------------------------------------------------

QByteArray RunHistoryPanel::metricsCsv(const std::vector<rag::RunSummary>& runs) {
  QStringList lines;
  lines << QStringLiteral(
      "run,started_at,workflow,mode,split,rps,requests,nprobe,slo_s,finished,completed,failed,"
      "mean_latency_s,p50_latency_s,p99_latency_s,throughput_rps,slo_attainment,accuracy,"
      "speculations,spec_accepted,rollbacks,wall_s");
  for (const rag::RunSummary& r : runs) {
    const rag::RunSettings& s = r.settings;
    const rag::RunMetrics& m = r.metrics;
    QStringList f;
    f << QString::number(r.id) << csvField(QString::fromStdString(r.startedAt))
      << csvField(QString::fromStdString(s.workflow)) << csvField(QString::fromStdString(s.mode))
      << csvField(QString::fromStdString(s.split)) << csvNumber(s.rps) << QString::number(s.requests)
      << QString::number(s.nprobe) << csvNumber(s.sloSeconds) << (r.finished ? "1" : "0")
      << QString::number(m.completed) << QString::number(m.failed) << csvNumber(m.meanLatency)
      << csvNumber(m.p50Latency) << csvNumber(m.p99Latency) << csvNumber(m.throughput)
      << csvNumber(m.sloAttainment) << csvNumber(m.accuracy) << QString::number(m.speculations)
      << QString::number(m.specAccepted) << QString::number(m.rollbacks) << csvNumber(m.wallSeconds);
    lines << f.join(QLatin1Char(','));
  }
  return (lines.join(QLatin1Char('\n')) + QLatin1Char('\n')).toUtf8();
}

bool RunHistoryPanel::exportMetricsCsv(const QString& path, std::optional<qint64> id) {
  std::vector<rag::RunSummary> runs = m_model.runs();
  if (id) {
    const rag::RunSummary* run = m_model.run(m_model.rowOfRun(*id));
    if (!run) {
      fail(tr("Run %1 is not in the run history.").arg(*id));
      return false;
    }
    runs = {*run};
  }
  const rag::Status s = writeFile(path, metricsCsv(runs));
  if (!s) fail(tr("Could not export metrics: %1").arg(message(s)));
  else m_status->setText(tr("Metrics of %1 written to %2").arg(count(runs.size(), tr("1 run"), tr("%1 runs")), path));
  return s.isOk();
}

QByteArray RunHistoryPanel::chromeTraceJson(const rag::StoredTrace& trace) {
  uint64_t origin = trace.events.empty() ? 0 : UINT64_MAX;
  std::set<uint16_t> lanes;
  for (const rag::TraceEvent& e : trace.events) {
    origin = std::min(origin, e.beginNs);
    lanes.insert(e.lane);
  }
  for (size_t i = 0; i < trace.lanes.size(); ++i) lanes.insert(static_cast<uint16_t>(i));

  QJsonArray events;
  for (uint16_t lane : lanes) {
    const QString name = lane < trace.lanes.size() ? QString::fromStdString(trace.lanes[lane].name)
                                                   : QStringLiteral("lane-%1").arg(lane);
    events.append(QJsonObject{{"name", "thread_name"},
                              {"ph", "M"},
                              {"pid", 1},
                              {"tid", lane},
                              {"args", QJsonObject{{"name", name}}}});
  }
  for (const rag::TraceEvent& e : trace.events) {
    const bool instant = (e.flags & rag::kTraceInstant) != 0;
    QJsonObject ev{{"name", QString::fromUtf8(rag::traceStageName(e.stage).data(),
                                              static_cast<qsizetype>(rag::traceStageName(e.stage).size()))},
                   {"cat", (e.flags & rag::kTraceSpeculative) ? "speculative" : "stage"},
                   {"ph", instant ? "i" : "X"},
                   {"ts", static_cast<double>(e.beginNs - origin) / 1000.0},
                   {"pid", 1},
                   {"tid", e.lane},
                   {"args", QJsonObject{{"request", static_cast<qint64>(e.requestId)},
                                        {"arg0", static_cast<qint64>(e.arg0)},
                                        {"arg1", static_cast<qint64>(e.arg1)},
                                        {"flags", e.flags}}}};
    if (instant) ev.insert("s", "t");
    else ev.insert("dur", static_cast<double>(e.endNs - e.beginNs) / 1000.0);
    events.append(ev);
  }
  return QJsonDocument(QJsonObject{{"displayTimeUnit", "ms"}, {"traceEvents", events}}).toJson(QJsonDocument::Compact);
}

void RunHistoryPanel::exportTrace(qint64 id, const QString& path) {
  m_status->setText(tr("Exporting the trace of run %1…").arg(id));
  m_exportWatcher.setFuture(runInBackground([store = m_path, id, path] {
    rag::Result<rag::StoredTrace> trace =
        withStore<rag::StoredTrace>(store, [id](rag::RunStore& s) { return s.trace(id); });
    if (!trace) return Done{id, path, trace.status()};
    return Done{id, path, writeFile(path, chromeTraceJson(*trace))};
  }));
}

void RunHistoryPanel::onTraceExported() {
  const Done done = m_exportWatcher.result();
  if (!done.status) {
    fail(tr("Could not export the trace of run %1: %2").arg(done.id).arg(message(done.status)));
    return;
  }
  m_status->setText(tr("Trace of run %1 written to %2").arg(done.id).arg(done.path));
  Q_EMIT traceExported(done.path);
}

// ---- toolbar actions (the dialogs) -----------------------------------------------------------

void RunHistoryPanel::chooseFile() {
  if (!m_dialogs) return;
  const QString start = m_path.empty() ? QString() : QString::fromStdString(m_path.string());
  const QString file = QFileDialog::getOpenFileName(this, tr("Run history file"), start,
                                                    tr("Run history (*.db *.sqlite);;All files (*)"));
  if (!file.isEmpty()) setStorePath(file.toStdString());
}

void RunHistoryPanel::openSelected() {
  if (const qint64 id = selectedRunId(); id >= 0) openRun(id);
}

void RunHistoryPanel::deleteSelected() {
  const qint64 id = selectedRunId();
  if (id < 0) return;
  if (m_dialogs &&
      QMessageBox::question(this, tr("Delete run"),
                            tr("Delete run %1 with its requests and trace from %2? This cannot be undone.")
                                .arg(id)
                                .arg(QString::fromStdString(m_path.string()))) != QMessageBox::Yes)
    return;
  deleteRun(id);
}

void RunHistoryPanel::exportCsvDialog(bool selectedOnly) {
  const qint64 id = selectedRunId();
  if (!m_dialogs || (selectedOnly && id < 0)) return;
  const QString name = selectedOnly ? QStringLiteral("run-%1-metrics.csv").arg(id) : QStringLiteral("runs-metrics.csv");
  const QString path = QFileDialog::getSaveFileName(this, tr("Export metrics"), name, tr("CSV (*.csv)"));
  if (!path.isEmpty()) exportMetricsCsv(path, selectedOnly ? std::optional<qint64>(id) : std::nullopt);
}

void RunHistoryPanel::exportTraceDialog() {
  const qint64 id = selectedRunId();
  if (!m_dialogs || id < 0) return;
  const QString path = QFileDialog::getSaveFileName(this, tr("Export trace"), QStringLiteral("run-%1-trace.json").arg(id),
                                                    tr("Chrome trace JSON (*.json)"));
  if (!path.isEmpty()) exportTrace(id, path);
}

}  // namespace ragwb
