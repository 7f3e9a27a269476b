// RunHistoryPanel: the runs recorded in a run history file (rag::RunStore), newest first, with
// actions to reopen one (its trace, requests and summary go out in runOpened for the timeline
// and the request table), delete one, and export metrics as CSV or a trace as Chrome-trace JSON.
//
//   auto* history = new RunHistoryPanel;
//   connect(history, &RunHistoryPanel::runOpened, window, &MainWindow::showStoredRun);
//   history->setStorePath(bridge.runStorePath());   // lists in the background
//   connect(&bridge, &EngineBridge::runFinished, history, &RunHistoryPanel::refresh);
//
// Every database access runs on a worker thread with its own connection; the GUI thread never
// waits on SQLite. A file that cannot be opened (a newer schema, not a database) is reported
// through errorOccurred (and a message box when dialogs are on) and the shown list stays.
#pragma once

#include <QFutureWatcher>
#include <QString>
#include <QWidget>
#include <filesystem>
#include <optional>
#include <vector>

#include "history/run_history_model.h"
#include "rag/run_store.h"
#include "rag/status.h"

class QAction;
class QLabel;
class QTableView;

namespace ragwb {

class RunHistoryPanel : public QWidget {
  Q_OBJECT
public:
  explicit RunHistoryPanel(QWidget* parent = nullptr);

  // Error boxes, the delete confirmation and file choosers are shown only while dialogs are on
  // (the default); errorOccurred is emitted either way.
  void setDialogsEnabled(bool on) { m_dialogs = on; }
  bool dialogsEnabled() const { return m_dialogs; }

  // Lists the runs of `path` in the background; on failure the current file and list stay.
  void setStorePath(const std::filesystem::path& path);
  const std::filesystem::path& storePath() const { return m_path; }
  RunHistoryModel* model() { return &m_model; }
  qint64 selectedRunId() const;  // -1 when none
  void selectRun(qint64 id);
  bool isBusy() const;

  // Loads run `id` in the background, then emits runOpened (an unfinished run has no trace:
  // its trace is empty and its requests are those recorded).
  void openRun(qint64 id);
  // Deletes without asking (the toolbar's Delete asks first), then lists again.
  void deleteRun(qint64 id);
  // Writes the listed metrics of all runs, or of run `id`, to `path`; false (and
  // errorOccurred) when the file cannot be written or the run is not listed.
  bool exportMetricsCsv(const QString& path, std::optional<qint64> id = std::nullopt);
  // Loads run `id`'s trace in the background and writes it to `path` as Chrome-trace JSON,
  // then emits traceExported or errorOccurred.
  void exportTrace(qint64 id, const QString& path);

  // One header line and one line per run.
  static QByteArray metricsCsv(const std::vector<rag::RunSummary>& runs);
  // {"displayTimeUnit":"ms","traceEvents":[...]}: "M" thread_name records for the lanes, then
  // one "X" event per span ("i" per instant), ts and dur in µs from the first event.
  static QByteArray chromeTraceJson(const rag::StoredTrace& trace);

public Q_SLOTS:
  void refresh();  // lists the current file again

Q_SIGNALS:
  void runsLoaded(int count);
  void runOpened(qint64 id, const rag::StoredTrace& trace, const std::vector<rag::RequestRecord>& requests,
                 const rag::RunSummary& summary);
  void runDeleted(qint64 id);
  void traceExported(const QString& path);
  void errorOccurred(const QString& message);

private:
  struct Listed {
    std::filesystem::path path;
    rag::Result<std::vector<rag::RunSummary>> runs;
  };
  struct Opened {
    rag::RunSummary summary;
    rag::Result<std::vector<rag::RequestRecord>> requests;
    rag::Result<rag::StoredTrace> trace;
  };
  struct Done {  // a delete or an export
    qint64 id = 0;
    QString path;
    rag::Status status;
  };

  void onListed();
  void onOpened();
  void onDeleted();
  void onTraceExported();
  void fail(const QString& message);
  void updateActions();
  void chooseFile();
  void openSelected();
  void deleteSelected();
  void exportCsvDialog(bool selectedOnly);
  void exportTraceDialog();

  bool m_dialogs = true;
  std::filesystem::path m_path;
  RunHistoryModel m_model;
  QTableView* m_table;
  QLabel* m_status;
  QAction* m_openFile;
  QAction* m_refresh;
  QAction* m_open;
  QAction* m_delete;
  QAction* m_exportCsvAll;
  QAction* m_exportCsvSelected;
  QAction* m_exportTrace;
  QFutureWatcher<Listed> m_listWatcher;
  QFutureWatcher<Opened> m_openWatcher;
  QFutureWatcher<Done> m_deleteWatcher;
  QFutureWatcher<Done> m_exportWatcher;
};

}  // namespace ragwb

Q_DECLARE_METATYPE(rag::StoredTrace)
Q_DECLARE_METATYPE(std::vector<rag::RequestRecord>)
Q_DECLARE_METATYPE(rag::RunSummary)
