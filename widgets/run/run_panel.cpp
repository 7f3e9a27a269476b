#include "run/run_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <chrono>
#include "plot/qcustomplot_include.h"

#include "history/request_table_model.h"
#include "nodegraph/graph_model.h"
#include "plot/plot_export.h"

#include <cmath>

namespace ragwb {

namespace {

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The Workflow box's fixed entries: the built-ins, then their compiled-in variants; the editor's
// graph, when there is one, is an entry before them.
constexpr int kListedWorkflows = static_cast<int>(rag::kAllWorkflows.size() + rag::kWorkflowVariants.size());

}  // namespace

RunPanel::RunPanel(EngineBridge* bridge, QWidget* parent) : QWidget(parent), m_bridge(bridge) {
  m_workflow = new QComboBox;
  m_workflow->setObjectName("workflow");
  for (rag::Workflow w : rag::kAllWorkflows) m_workflow->addItem(QString::fromUtf8(rag::workflowName(w).data()));
  for (std::string_view v : rag::kWorkflowVariants) m_workflow->addItem(QString::fromUtf8(v.data(), static_cast<qsizetype>(v.size())));
  m_mode = new QComboBox;
  for (const std::string& n : rag::servePolicyNames()) m_mode->addItem(QString::fromStdString(n));
  m_mode->setCurrentText("hedra");
  m_split = new QComboBox;
  m_split->addItems({"test", "dev", "train"});
  m_requests = new QSpinBox;
  m_requests->setRange(1, 5000);
  m_requests->setValue(20);
  m_rps = new QDoubleSpinBox;
  m_rps->setRange(0.0, 500.0);
  m_rps->setDecimals(1);
  m_rps->setValue(8.0);
  m_rps->setSpecialValueText(tr("all at once"));
  m_rps->setSuffix(tr(" req/s"));
  m_nprobe = new QSpinBox;
  m_nprobe->setRange(1, 4096);
  m_nprobe->setValue(128);
  m_slo = new QDoubleSpinBox;
  m_slo->setRange(0.05, 600.0);
  m_slo->setValue(1.0);
  m_slo->setSuffix(tr(" s"));

  m_prefixCache = new QCheckBox(tr("Prefix cache"));
  m_prefixCache->setObjectName("prefixCache");
  m_prefixCache->setChecked(true);
  m_prefixCache->setToolTip(tr("Reuse the KV of prompt prefixes earlier requests computed (RadixAttention)"));
  m_blocks = new QCheckBox(tr("Block attention"));
  m_blocks->setObjectName("blockAttention");
  m_blocks->setToolTip(tr("Block-Attention: each retrieved passage is a block whose KV is computed once, kept in "
                          "the prefix cache and the block store, and re-encoded to its place; only the question "
                          "is prefilled. Serves the block-fine-tuned model (rag-llama-block). Needs the prefix cache."));
  connect(m_blocks, &QCheckBox::toggled, this, [this](bool on) {
    if (on) m_prefixCache->setChecked(true);
  });
  connect(m_prefixCache, &QCheckBox::toggled, this, [this](bool on) {
    if (!on) m_blocks->setChecked(false);
  });
  auto* kv = new QHBoxLayout;
  kv->addWidget(m_prefixCache);
  kv->addWidget(m_blocks);
  m_eviction = new QComboBox;
  m_eviction->setObjectName("evictionPolicy");
  m_eviction->addItems({"lru", "lfu", "pgdsf", "lacr"});
  m_eviction->setToolTip(tr("The prefix cache's eviction policy: least recently used, least frequently used, "
                            "PGDSF (recompute cost, frequency and size) or LACR (DepCache: look-ahead accesses "
                            "of waiting requests, weighted by α). The engine reloads when it changes."));
  m_alpha = new QDoubleSpinBox;
  m_alpha->setObjectName("lacrAlpha");
  m_alpha->setRange(0.0, 1.0);
  m_alpha->setSingleStep(0.05);
  m_alpha->setDecimals(2);
  m_alpha->setValue(0.2);
  m_alpha->setPrefix(QStringLiteral("α "));
  m_alpha->setToolTip(tr("LACR's weight of the waiting requests' look-ahead accesses (DepCache uses 0.2)"));
  m_alpha->setEnabled(false);
  connect(m_eviction, &QComboBox::currentTextChanged, this,
          [this](const QString& p) { m_alpha->setEnabled(p == QLatin1String("lacr")); });
  auto* eviction = new QHBoxLayout;
  eviction->addWidget(m_eviction, 1);
  eviction->addWidget(m_alpha);

  auto* form = new QFormLayout;
  form->addRow(tr("&Workflow"), m_workflow);
  form->addRow(tr("&Mode"), m_mode);
  form->addRow(tr("QA &split"), m_split);
  form->addRow(tr("&Requests"), m_requests);
  form->addRow(tr("&Rate"), m_rps);
  form->addRow(tr("&nprobe"), m_nprobe);
  form->addRow(tr("S&LO"), m_slo);
  form->addRow(tr("KV"), kv);
  form->addRow(tr("Eviction"), eviction);

  m_start = new QPushButton(tr("&Start"));
  m_start->setObjectName("start");
  m_start->setToolTip(tr("Send the requests to the engine (Poisson arrivals at the rate)"));
  m_stop = new QPushButton(tr("S&top"));
  m_stop->setEnabled(false);
  auto* exportPlot = new QPushButton(tr("Export &plot…"));
  exportPlot->setToolTip(tr("Save the latency/throughput plot as PNG or SVG"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_start);
  buttons->addWidget(m_stop);
  buttons->addWidget(exportPlot);
  m_progress = new QProgressBar;
  m_progress->setRange(0, 1);
  m_progress->setValue(0);
  m_status = new QLabel(tr("Loading the engine…"));
  m_status->setObjectName("status");
  m_status->setWordWrap(true);

  m_plot = new QCustomPlot;
  m_plot->setObjectName(QStringLiteral("runPlot"));  // named in the stall meter's events
  m_replotTimer = new QTimer(this);
  m_replotTimer->setSingleShot(true);
  m_replotTimer->setInterval(kReplotMs);
  connect(m_replotTimer, &QTimer::timeout, m_plot, [this] { replotWhenShown(m_plot); });
  m_plot->setMinimumHeight(160);
  m_plot->addGraph();  // 0: latency per request
  m_plot->graph(0)->setName(tr("latency"));
  m_plot->graph(0)->setLineStyle(QCPGraph::lsNone);
  m_plot->graph(0)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(40, 110, 200), 5));
  m_plot->addGraph(m_plot->xAxis, m_plot->yAxis2);  // 1: throughput
  m_plot->graph(1)->setName(tr("throughput"));
  m_plot->graph(1)->setPen(QPen(QColor(220, 120, 30), 2));
  m_plot->addGraph();  // 2: the SLO
  m_plot->graph(2)->setName(tr("SLO"));
  m_plot->graph(2)->setPen(QPen(QColor(200, 40, 40), 1, Qt::DashLine));
  m_plot->xAxis->setLabel(tr("time since start (s)"));
  m_plot->yAxis->setLabel(tr("latency (s)"));
  m_plot->yAxis2->setLabel(tr("completed / s"));
  m_plot->yAxis2->setVisible(true);
  m_plot->legend->setVisible(true);
  m_plot->legend->setFont(QFont(font().family(), 8));
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);

  m_model = new RequestTableModel(this);
  m_table = new QTableView;
  m_table->setModel(m_model);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->verticalHeader()->hide();
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setAlternatingRowColors(true);

  auto* left = new QVBoxLayout;
  left->addLayout(form);
  left->addLayout(buttons);
  left->addWidget(m_progress);
  left->addWidget(m_status);
  left->addStretch();
  auto* leftBox = new QWidget;
  leftBox->setLayout(left);
  leftBox->setMaximumWidth(300);
  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(m_plot);
  right->addWidget(m_table);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(leftBox);
  layout->addWidget(right, 1);

  connect(m_start, &QPushButton::clicked, this, &RunPanel::start);
  // A choice the user makes here sticks: a built-in stops the panel following the editor.
  connect(m_workflow, &QComboBox::activated, this, [this](int index) {
    const bool editorEntry = m_editorGraph && m_workflow->count() > kListedWorkflows && index == 0;
    m_userPickedBuiltin = !editorEntry;
  });
  connect(m_workflow, &QComboBox::currentIndexChanged, this, [this] { updateStartTooltip(); });
  updateStartTooltip();
  connect(m_stop, &QPushButton::clicked, this, &RunPanel::stop);
  connect(exportPlot, &QPushButton::clicked, this, [this] {
    QString error;
    const QString path = exportPlotDialog(this, m_plot, QStringLiteral("run-latency.png"), &error);
    if (!error.isEmpty()) m_status->setText(error);
    else if (!path.isEmpty()) m_status->setText(tr("Plot saved to %1").arg(path));
  });
  connect(m_bridge, &EngineBridge::engineLoading, this, [this](const QString& what) {
    m_status->setText(what);
    m_start->setEnabled(false);
  });
  connect(m_bridge, &EngineBridge::engineReady, this, [this](const QString& mode) {
    m_status->setText(tr("Engine ready (%1).").arg(mode));
    m_start->setEnabled(true);
    if (m_waitingForEngine) {
      m_waitingForEngine = false;
      launch();
    }
  });
  connect(m_bridge, &EngineBridge::engineFailed, this, [this](const QString& message) {
    m_waitingForEngine = false;
    m_status->setText(tr("<b>Engine not available:</b> %1").arg(message.toHtmlEscaped()));
    setRunning(false);
  });
  connect(m_bridge, &EngineBridge::runStarted, this, [this](qint64 id, int total) {
    m_progress->setRange(0, total);
    m_progress->setValue(0);
    m_status->setText(tr("Run %1: %2 requests…").arg(id).arg(total));
  });
  connect(m_bridge, &EngineBridge::requestFinished, this, &RunPanel::onRequestFinished);
  connect(m_bridge, &EngineBridge::runProgress, this, [this](int done, int) {
    // QProgressBar::setValue repaints at once when the shown value changes (2.6 ms median, 9 ms
    // at worst per finished request under Xvfb, measured): with updates off around it, the
    // repaint joins the next paint event instead.
    m_progress->setUpdatesEnabled(false);
    m_progress->setValue(done);
    m_progress->setUpdatesEnabled(true);  // schedules an update()
  });
  connect(m_bridge, &EngineBridge::runFailed, this, [this](const QString& message) {
    m_status->setText(tr("<b>Run failed:</b> %1").arg(message.toHtmlEscaped()));
    if (!m_bridge->running()) setRunning(false);
  });
  connect(m_bridge, &EngineBridge::runFinished, this, [this](qint64 id, const rag::RunMetrics& m) {
    setRunning(false);
    m_status->setText(tr("Run %1 done: %2 of %3 answered, mean latency %4 s (p99 %5 s), %6 req/s, "
                         "SLO attainment %7 %, accuracy %8 %, %9 speculations (%10 kept).")
                          .arg(id)
                          .arg(m.completed)
                          .arg(m.requests)
                          .arg(m.meanLatency, 0, 'f', 3)
                          .arg(m.p99Latency, 0, 'f', 3)
                          .arg(m.throughput, 0, 'f', 2)
                          .arg(100.0 * m.sloAttainment, 0, 'f', 0)
                          .arg(100.0 * m.accuracy, 0, 'f', 1)
                          .arg(m.speculations)
                          .arg(m.specAccepted));
    Q_EMIT runFinished(id);
  });
}

void RunPanel::setEditorGraph(const rag::WorkflowGraph& graph, bool select) {
  m_editorGraph = graph;
  if (select) m_userPickedBuiltin = false;
  const QString label = tr("editor: %1").arg(QString::fromStdString(graph.name().empty() ? "untitled" : graph.name()));
  const bool hadEntry = m_workflow->count() > kListedWorkflows;
  if (hadEntry) {
    m_workflow->setItemText(0, label);
  } else {
    const int current = m_workflow->currentIndex();
    m_workflow->insertItem(0, label);
    m_workflow->setCurrentIndex(current + 1);  // inserting shifted the user's choice
  }
  if (!m_userPickedBuiltin) m_workflow->setCurrentIndex(0);
  updateStartTooltip();
}

void RunPanel::followEditor(const GraphModel* model) {
  auto offer = [this, model] { setEditorGraph(model->graph()); };
  for (auto signal : {&GraphModel::modelReset, &GraphModel::edgesChanged, &GraphModel::graphPropertiesChanged})
    connect(model, signal, this, offer);
  for (auto signal : {&GraphModel::nodeAdded, &GraphModel::nodeRemoved, &GraphModel::nodeChanged})
    connect(model, signal, this, offer);
  offer();
}

QString RunPanel::chosenWorkflowLabel() const { return m_workflow->currentText(); }

void RunPanel::updateStartTooltip() {
  // The Workflow box shows the choice; the button's tooltip repeats it (its text stays short).
  m_start->setToolTip(tr("Send the requests of %1 to the engine (Poisson arrivals at the rate)").arg(chosenWorkflowLabel()));
}

void RunPanel::configure(const QString& workflow, const QString& mode, double rps, int requests) {
  m_workflow->setCurrentText(workflow);
  m_userPickedBuiltin = m_workflow->currentIndex() > 0 || m_workflow->count() == kListedWorkflows;
  m_mode->setCurrentText(mode);
  m_rps->setValue(rps);
  m_requests->setValue(requests);
}

std::optional<rag::WorkflowGraph> RunPanel::chosenGraph(QString* error) const {
  const bool editorFirst = m_editorGraph && m_workflow->count() > kListedWorkflows;
  if (editorFirst && m_workflow->currentIndex() == 0) return m_editorGraph;
  const std::string name = m_workflow->currentText().toStdString();
  if (!rag::isCompiledInWorkflow(name)) {
    *error = tr("Unknown workflow %1").arg(m_workflow->currentText());
    return std::nullopt;
  }
  auto g = rag::builtinWorkflowFile(name);  // a built-in's file or a variant's
  if (!g) {
    *error = QString::fromStdString(g.status().message());
    return std::nullopt;
  }
  return *g;
}

void RunPanel::start() {
  if (m_bridge->running()) return;
  auto policy = rag::parseServePolicy(m_mode->currentText().toStdString());
  if (!policy) {
    m_status->setText(QString::fromStdString(policy.status().message()));
    return;
  }
  setRunning(true);
  const EngineConfig& cur = m_bridge->config();
  if (!m_bridge->isEngineReady() || !(cur.policy == *policy) || cur.nprobe != m_nprobe->value() ||
      cur.prefixCache != m_prefixCache->isChecked() || cur.blockAttention != m_blocks->isChecked() ||
      cur.evictionPolicy != m_eviction->currentText().toStdString() || std::abs(cur.lacrAlpha - m_alpha->value()) > 1e-9) {
    EngineConfig c = cur;
    c.policy = *policy;
    c.nprobe = m_nprobe->value();
    c.prefixCache = m_prefixCache->isChecked();
    c.blockAttention = m_blocks->isChecked();
    c.evictionPolicy = m_eviction->currentText().toStdString();
    c.lacrAlpha = m_alpha->value();
    m_waitingForEngine = true;
    m_bridge->startEngine(c);
    return;
  }
  launch();
}

void RunPanel::launch() {
  QString error;
  std::optional<rag::WorkflowGraph> graph = chosenGraph(&error);
  if (!graph) {
    m_status->setText(error);
    setRunning(false);
    return;
  }
  RunRequest run;
  run.graph = std::move(*graph);
  run.split = m_split->currentText();
  run.count = m_requests->value();
  run.rps = m_rps->value();
  run.sloSeconds = m_slo->value();
  m_model->clear();
  for (int g = 0; g < m_plot->graphCount(); ++g) m_plot->graph(g)->data()->clear();
  m_finished = m_within = 0;
  m_runStartSeconds = nowSeconds();
  if (!m_bridge->startRun(run)) setRunning(false);
}

void RunPanel::setKvSwitches(bool prefixCache, bool blockAttention) {
  m_prefixCache->setChecked(prefixCache);
  m_blocks->setChecked(blockAttention);
}

bool RunPanel::setEviction(const QString& policy, double lacrAlpha) {
  const int i = m_eviction->findText(policy);
  if (i < 0) return false;
  m_eviction->setCurrentIndex(i);
  m_alpha->setValue(lacrAlpha);
  return true;
}

void RunPanel::stop() {
  m_bridge->stopRun();
  m_status->setText(tr("Stopping: cancelling the requests still running…"));
}

void RunPanel::onRequestFinished(const rag::RequestRecord& r) {
  m_model->append(r);
  const double t = nowSeconds() - m_runStartSeconds;
  ++m_finished;
  if (r.ok) {
    m_plot->graph(0)->addData(t, r.latencySeconds);
    m_within += r.latencySeconds <= m_slo->value();
  }
  m_plot->graph(1)->addData(t, t > 0 ? m_finished / t : 0.0);
  m_plot->graph(2)->data()->clear();
  m_plot->graph(2)->addData(0, m_slo->value());
  m_plot->graph(2)->addData(std::max(t, 1.0), m_slo->value());
  m_plot->rescaleAxes();
  m_plot->yAxis->setRangeLower(0);
  m_plot->yAxis2->setRangeLower(0);
  if (!m_replotTimer->isActive()) m_replotTimer->start();
  m_table->scrollToBottom();
}

void RunPanel::setRunning(bool running) {
  m_start->setEnabled(!running);
  m_stop->setEnabled(running);
  for (QWidget* w : {static_cast<QWidget*>(m_workflow), static_cast<QWidget*>(m_mode), static_cast<QWidget*>(m_split),
                     static_cast<QWidget*>(m_requests), static_cast<QWidget*>(m_rps), static_cast<QWidget*>(m_nprobe)})
    w->setEnabled(!running);
}

}  // namespace ragwb
