// The run panel: choose a workflow, a QA split, a serving mode, a rate and a request count;
// start and stop; watch progress, latency, throughput and SLO attainment live; read every
// request's answer, correctness and stage timings in a table. Runs go through the EngineBridge,
// which reloads the engine when the mode or nprobe changed.
#pragma once

#include <QTimer>
#include <QWidget>

#include <optional>

#include "bridge/engine_bridge.h"
#include "rag/workflow.h"

class QCheckBox;
class QComboBox;
class QSpinBox;
class QDoubleSpinBox;
class QPushButton;
class QProgressBar;
class QLabel;
class QTableView;
class QCustomPlot;

namespace ragwb {

class GraphModel;
class RequestTableModel;

class RunPanel : public QWidget {
  Q_OBJECT
public:
  explicit RunPanel(EngineBridge* bridge, QWidget* parent = nullptr);

  // The editor's graph, offered as the first workflow choice ("editor: <name>") and selected,
  // unless the user picked a built-in in this panel since (the panel follows the editor until
  // then; picking the editor entry again resumes following). `select`: select it anyway and
  // follow the editor again (the editor's own Run).
  void setEditorGraph(const rag::WorkflowGraph& graph, bool select = false);
  // Offers `model`'s graph through setEditorGraph now and whenever it changes (a template or a
  // file loaded, any edit), so Start runs what the editor shows until the user picks a built-in
  // here. `model` must outlive the panel or be destroyed with it.
  void followEditor(const GraphModel* model);
  // What Start would run now, as the Workflow box and Start's tooltip say it ("editor: multistep").
  QString chosenWorkflowLabel() const;
  // The graph Start would run now; nullopt (and `error` set) for an unknown built-in.
  std::optional<rag::WorkflowGraph> chosenGraph(QString* error) const;
  // Selects a built-in workflow, mode, rate and count (the demo and tests use this).
  void configure(const QString& workflow, const QString& mode, double rps, int requests);
  // The KV switches the next Start serves with (the engine reloads when they changed): the
  // prefix cache, and Block-Attention (passages as blocks whose KV is computed once and reused).
  void setKvSwitches(bool prefixCache, bool blockAttention);
  // The prefix cache's eviction policy (lru, lfu, pgdsf, lacr) and LACR's α; false for an unknown
  // policy (nothing changes).
  bool setEviction(const QString& policy, double lacrAlpha);
  RequestTableModel* requests() const { return m_model; }
  QCustomPlot* plot() const { return m_plot; }

public Q_SLOTS:
  void start();
  void stop();

Q_SIGNALS:
  void runFinished(qint64 runId);

private:
  void launch();
  void onRequestFinished(const rag::RequestRecord& r);
  void setRunning(bool running);

  EngineBridge* m_bridge;
  std::optional<rag::WorkflowGraph> m_editorGraph;
  bool m_userPickedBuiltin = false;  // the user chose a built-in in the Workflow box
  void updateStartTooltip();
  QComboBox *m_workflow, *m_mode, *m_split;
  QSpinBox *m_requests, *m_nprobe;
  QCheckBox *m_prefixCache, *m_blocks;
  QDoubleSpinBox *m_rps, *m_slo;
  QComboBox* m_eviction;
  QDoubleSpinBox* m_alpha;
  QPushButton *m_start, *m_stop;
  QProgressBar* m_progress;
  QLabel* m_status;
  QCustomPlot* m_plot;
  // Finished requests replot m_plot at most every kReplotMs (a replot is 6–9 ms of GUI work under
  // Xvfb, measured): the first request starts this single-shot timer, later ones join it.
  QTimer* m_replotTimer;
  static constexpr int kReplotMs = 200;
  QTableView* m_table;
  RequestTableModel* m_model;
  bool m_waitingForEngine = false;
  double m_runStartSeconds = 0;
  int m_finished = 0, m_within = 0;
};

}  // namespace ragwb
