// The Reproduce page: the papers' headline figures (paper_figures.h) in a list; Run starts the
// figure's `ragraph bench ... --quick` as a child process (BenchProcess) with a progress bar and
// the bench's latest stderr line, Cancel kills it (nothing saved). A finished run's JSON goes
// into the run history (rag::RunStore bench_results) and is plotted with QCustomPlot: the
// paper's reported numbers beside ours, per category. Saved results are listed below the plot
// (BenchResultModel); clicking one (or Enter on it) plots it again.
//
//   auto* page = new ragwb::ReproducePage;
//   page->setStorePath(rag::defaultRunStoreLocation());
//   tools.add("reproduceDock", tr("Reproduce"), page, ToolPlacement::tabbedWith("dragonDock"));
//
// Threading: GUI thread only; the bench runs in its own process, so the GUI thread only reads
// its pipes and writes one row to SQLite when it ends.
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <optional>

#include "rag/run_store.h"
#include "reproduce/paper_figures.h"

class QCustomPlot;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QTableView;

namespace ragwb {

class BenchProcess;
struct BenchOutcome;
class BenchResultModel;

class ReproducePage : public QWidget {
  Q_OBJECT
public:
  explicit ReproducePage(QWidget* parent = nullptr);
  ~ReproducePage() override;

  // The run history the results are saved into and listed from (created when missing). The
  // history is opened, written and read on Qt's thread pool, never on the GUI thread.
  void setStorePath(const QString& path);
  // The `ragraph` binary to run (default: next to this executable).
  void setRagraphBinary(const QString& path) { m_binary = path; }

  const PaperFigure* currentFigure() const;
  bool selectFigure(const QString& id);  // false for an unknown id
  bool busy() const;  // a bench running, or its result being saved

  QListWidget* figureList() const { return m_figures; }
  QLineEdit* extraArgsEdit() const { return m_extraArgs; }  // appended to the figure's arguments
  QPushButton* runButton() const { return m_run; }
  QPushButton* cancelButton() const { return m_cancel; }
  QProgressBar* progressBar() const { return m_progress; }
  QCustomPlot* plot() const { return m_plot; }
  BenchResultModel* results() const { return m_results; }
  QTableView* resultsView() const { return m_resultsView; }
  // What the plot shows now: ours (from the run or the reopened result) and the paper's.
  const FigurePoints& plottedOurs() const { return m_ours; }
  const FigurePoints& plottedPaper() const { return m_paper; }

public Q_SLOTS:
  void start();   // refused (runFinished(false, why)) while a run is in flight
  void cancel();
  void refreshResults();

Q_SIGNALS:
  void runStarted();
  // ok: the result was parsed, plotted and saved (savedId its id in the history).
  void runFinished(bool ok, const QString& message, qint64 savedId);

private:
  struct StoreWork;  // what a pool thread did with the history
  void onFinished(const BenchOutcome& o);
  // On the pool: adds `add` (when it has a name) to the history, then lists every result; the
  // GUI thread gets the outcome in `then`.
  void withStore(rag::BenchResult add, std::function<void(StoreWork&)> then);
  void showFigure();
  void openResult(int row);
  // Plots `figure`'s paper numbers and ours from `json` ("" : the paper's alone).
  QString plotResult(const PaperFigure& figure, const QString& json);
  QStringList arguments() const;

  QListWidget* m_figures;
  QLabel* m_title;
  QLabel* m_citation;
  QLabel* m_command;
  QLineEdit* m_extraArgs;
  QPushButton* m_run;
  QPushButton* m_cancel;
  QProgressBar* m_progress;
  QLabel* m_status;
  QCustomPlot* m_plot;
  QTableView* m_resultsView;
  BenchResultModel* m_results;
  BenchProcess* m_process;
  QString m_binary;
  QString m_storePath;
  QString m_runningFigure;
  FigurePoints m_ours, m_paper;
  bool m_saving = false;
};

}  // namespace ragwb
