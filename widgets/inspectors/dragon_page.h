// The DRAGON page: a user sets the link (added latency, jitter, bandwidth), types a question and
// presses Run; a cloud and a device answer it together in this process over loopback TCP
// (rag/dragon.h), and the page shows the run live: both sides' decode lanes, the frames between
// them with their latency, accept/reject marks, rollbacks, who holds the aggregator
// (DragonTimelineView), every event in a table (DragonEventModel), the answer as its tokens are
// fixed and the run's summary.
//
//   auto* page = new ragwb::DragonPage;
//   page->setSources(rag::defaultModelDirectory(), corpusPath);
//   tools.add("dragonDock", tr("DRAGON"), page, ToolPlacement::tabbedWith("kvTreeDock"));
//
// Threading: the two sides are loaded on Qt's thread pool at the first Run (a few seconds) and
// run on their own worker threads; their events go into a locked inbox that a 30 ms timer on the
// GUI thread drains into the model in batches, so the GUI thread only appends rows and repaints.
#pragma once

#include <QFutureWatcher>
#include <QTimer>
#include <QWidget>
#include <filesystem>
#include <memory>
#include <optional>

#include "inspectors/live_loader.h"
#include "rag/dragon.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTableView;

namespace ragwb {

class DragonEventModel;
class DragonTimelineView;

class DragonPage : public QWidget {
  Q_OBJECT
public:
  explicit DragonPage(QWidget* parent = nullptr);
  ~DragonPage() override;  // waits for a run in flight (bounded by its token budget)

  // The model both sides run and the corpus they retrieve from (the cloud its WordNet passages,
  // the device its FOLDOC ones). A change drops loaded sides: the next Run loads them again.
  void setSources(std::filesystem::path modelDir, std::filesystem::path corpus);
  // The run the controls describe.
  rag::DragonRunSettings settings() const;

  DragonEventModel* model() const { return m_model; }
  DragonTimelineView* timeline() const { return m_timeline; }
  QLineEdit* questionEdit() const { return m_question; }
  QDoubleSpinBox* latencySpin() const { return m_latency; }
  QDoubleSpinBox* jitterSpin() const { return m_jitter; }
  QDoubleSpinBox* bandwidthSpin() const { return m_bandwidth; }
  QSpinBox* maxTokensSpin() const { return m_maxTokens; }
  QCheckBox* ignoreEosBox() const { return m_ignoreEos; }
  QComboBox* methodBox() const { return m_method; }
  QPushButton* runButton() const { return m_run; }
  bool busy() const { return m_loading || m_running; }
  const std::optional<rag::DragonSummary>& lastSummary() const { return m_summary; }

public Q_SLOTS:
  // The Run button: loads the sides if needed, then starts a run with the controls' settings.
  // Refused (runFinished(false, why)) without a question, while a run is in flight, or when the
  // sides cannot be loaded.
  void start();

Q_SIGNALS:
  void runStarted();
  void runFinished(bool ok, const QString& message);

private:
  struct Inbox;  // what the workers hand to the GUI thread
  using Loaded = LiveLoad<rag::DragonLive>;
  void launch();
  void drain();
  void finish(bool ok, const QString& message);
  void setBusy(bool loading, bool running);

  std::filesystem::path m_modelDir, m_corpus;
  std::shared_ptr<rag::DragonLive> m_live;
  std::shared_ptr<rag::DragonLive> m_retired;  // sides of old sources, released after their run
  std::shared_ptr<Inbox> m_inbox;
  QFutureWatcher<std::shared_ptr<Loaded>> m_loader;
  QTimer m_drainTimer;
  bool m_loading = false, m_running = false;
  std::optional<rag::DragonSummary> m_summary;
  QString m_answerSoFar;
  int m_expectedTokens = 0;

  DragonEventModel* m_model;
  DragonTimelineView* m_timeline;
  QTableView* m_table;
  QLineEdit* m_question;
  QComboBox* m_method;
  QComboBox* m_policy;
  QSpinBox* m_maxTokens;
  QSpinBox* m_docs;
  QCheckBox* m_ignoreEos;
  QDoubleSpinBox* m_latency;
  QDoubleSpinBox* m_jitter;
  QDoubleSpinBox* m_bandwidth;
  QPushButton* m_run;
  QLabel* m_status;
  QLabel* m_answer;
  QLabel* m_summaryLabel;
};

}  // namespace ragwb
