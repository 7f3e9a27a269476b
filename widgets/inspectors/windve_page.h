// The WindVE page: the embedding service of papers/windve.txt run live on the shipped embedder
// (rag/windve.h), so a user sees the auxiliary device absorb the peak load the main one cannot
// answer within the SLO. Calibrate profiles each device alone and plots latency against
// concurrency: the measured bursts, the fit α·C + β, the SLO line and the queue depth where the
// fit crosses it. Run starts closed-loop clients against a service with those depths and plots,
// live, each queue's load (queued + running) under its depth, and the answers served and
// refused BUSY per second; a summary says the depths, the throughput, the BUSY share and the
// latency against the SLO. Run calibrates first when the SLO or the cap changed since the last
// calibration (or there was none).
//
//   auto* page = new ragwb::WindVePage;
//   page->setSources(rag::defaultEmbedderDirectory(), corpusPath);
//   tools.add("windveDock", tr("WindVE"), page, ToolPlacement::tabbedWith("dragonDock"));
//
// Threading: the two embedder instances are loaded on Qt's thread pool at the first Calibrate
// or Run; calibration and load run on the facade's worker thread. Calibration samples and
// results go into a locked inbox; a 100 ms timer on the GUI thread drains it and polls the
// load's snapshot, so the GUI thread only appends points and repaints.
#pragma once

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QTimer>
#include <QWidget>
#include <filesystem>
#include <memory>
#include <optional>

#include "inspectors/live_loader.h"
#include "rag/windve.h"

class QCheckBox;
class QCPAxisRect;
class QCPGraph;
class QCPLegend;
class QCustomPlot;
class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QSpinBox;

namespace ragwb {

class WindVePage : public QWidget {
  Q_OBJECT
public:
  explicit WindVePage(QWidget* parent = nullptr);
  ~WindVePage() override;  // stops a calibration or load and waits for it (about one SLO)

  // The embedder both instances load and the corpus whose test questions are the queries. A
  // change drops the loaded instances (and the calibration): the next action loads them again.
  void setSources(std::filesystem::path embedderDir, std::filesystem::path corpus);

  rag::WindVeCalibrationSettings calibrationSettings() const;
  rag::WindVeLoadSettings loadSettings() const;

  QDoubleSpinBox* sloSpin() const { return m_slo; }
  QSpinBox* maxConcurrencySpin() const { return m_cap; }
  QSpinBox* clientsSpin() const { return m_clients; }
  QSpinBox* secondsSpin() const { return m_seconds; }
  QCheckBox* heterogeneousBox() const { return m_hetero; }
  QPushButton* calibrateButton() const { return m_calibrate; }
  QPushButton* runButton() const { return m_run; }
  QCustomPlot* fitPlot() const { return m_fitPlot; }
  QCustomPlot* livePlot() const { return m_livePlot; }
  QLabel* summaryLabel() const { return m_summary; }
  bool busy() const { return m_loading || m_working; }
  const std::optional<rag::WindVeCalibration>& lastCalibration() const { return m_calibration; }
  const std::optional<rag::WindVeLoadSummary>& lastSummary() const { return m_lastSummary; }
  // The longest the page's own GUI-thread work took for one timer tick (drain + poll + plot).
  double longestTickMs() const { return m_longestTickMs; }
  // The longest replot of either plot (the GUI thread's drawing, apart from the ticks).
  double longestReplotMs() const { return m_longestReplotMs; }

public Q_SLOTS:
  // Profiles both devices with the controls' SLO and cap. Refused (calibrationFinished(false,
  // why)) while something is in flight or when the embedder cannot be loaded.
  void calibrate();
  // Runs the load with the controls' settings, calibrating first when needed. The Run button
  // is Stop while a calibration or a load runs.
  void start();
  // Ends a calibration (which then fails as stopped) or a load (which ends with what it did).
  void stop();

Q_SIGNALS:
  void calibrationFinished(bool ok, const QString& message);
  void runStarted();
  void runFinished(bool ok, const QString& message);

private:
  enum class Next { Calibrate, Run };
  struct Inbox;  // what the worker hands to the GUI thread
  using Loaded = LiveLoad<rag::WindVeLive>;  // modelDir: the embedder's directory
  void load(Next next);
  void launchCalibration(bool thenRun);
  void launchRun();
  void tick();
  void drawCalibration();
  void addCalibrationSample(rag::WindVeDevice device, const rag::WindVeSample& s);
  void addSnapshot(const rag::WindVeSnapshot& s);
  void showSummary(const rag::WindVeLoadSummary& s);
  void setBusy(bool loading, bool working);
  void fail(Next what, const QString& message);
  bool calibrationMatchesControls() const;

  std::filesystem::path m_embedderDir, m_corpus;
  std::shared_ptr<rag::WindVeLive> m_live;
  std::shared_ptr<Inbox> m_inbox;
  QFutureWatcher<std::shared_ptr<Loaded>> m_loader;
  QTimer m_timer;
  bool m_loading = false, m_working = false, m_running = false, m_runAfterCalibration = false;
  std::optional<rag::WindVeCalibration> m_calibration;
  std::optional<rag::WindVeLoadSummary> m_lastSummary;
  double m_longestTickMs = 0, m_longestReplotMs = 0;

  QDoubleSpinBox* m_slo;
  QSpinBox* m_cap;
  QSpinBox* m_clients;
  QSpinBox* m_seconds;
  QCheckBox* m_hetero;
  QPushButton* m_calibrate;
  QPushButton* m_run;
  QLabel* m_status;
  QLabel* m_summary;

  QCustomPlot* m_fitPlot;
  QCPGraph* m_points[2];   // measured bursts: main, auxiliary
  QCPGraph* m_fits[2];     // α·C + β
  QCustomPlot* m_livePlot;
  QCPAxisRect* m_queueRect;
  QCPAxisRect* m_rateRect;
  QCPLegend* m_rateLegend;
  QCPGraph* m_load[2];     // queued + running
  QCPGraph* m_depth[2];    // the queue's depth (dashed)
  QCPGraph* m_servedRate;
  QCPGraph* m_busyRate;
};

}  // namespace ragwb
