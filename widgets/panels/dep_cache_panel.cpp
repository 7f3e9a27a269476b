#include "panels/dep_cache_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "bridge/engine_bridge.h"
#include "bridge/gui_stall_meter.h"
#include "plot/plot_export.h"
#include "plot/qcustomplot_include.h"

namespace ragwb {

namespace {

// Okabe–Ito, one per policy label in order of first appearance.
QColor policyColour(size_t i) {
  static const QColor kColours[] = {QColor(0x00, 0x72, 0xb2), QColor(0xd5, 0x5e, 0x00), QColor(0x00, 0x9e, 0x73),
                                    QColor(0xcc, 0x79, 0xa7), QColor(0xe6, 0x9f, 0x00), QColor(0x56, 0xb4, 0xe9)};
  return kColours[i % std::size(kColours)];
}

QString percent(double rate) { return rate < 0 ? QStringLiteral("–") : QStringLiteral("%1 %").arg(rate * 100, 0, 'f', 1); }

}  // namespace

CacheCounters CacheCounters::between(const rag::ServingStats& from, const rag::ServingStats& to) {
  // A counter below the baseline means a new engine (counting from zero): count from zero too.
  auto diff = [](int64_t a, int64_t b) { return b >= a ? b - a : b; };
  return {diff(from.depSegmentTokens, to.depSegmentTokens), diff(from.depHitTokens, to.depHitTokens),
          diff(from.prefixQueriedTokens, to.prefixQueriedTokens), diff(from.prefixHitTokens, to.prefixHitTokens)};
}

// ---- DepCachePolicyModel ----------------------------------------------------------------------

DepCachePolicyModel::DepCachePolicyModel(QObject* parent) : QAbstractTableModel(parent) {}

int DepCachePolicyModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int DepCachePolicyModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

int DepCachePolicyModel::rowOf(const QString& label) const {
  for (size_t i = 0; i < m_rows.size(); ++i)
    if (m_rows[i].label == label) return static_cast<int>(i);
  return -1;
}

QString DepCachePolicyModel::label(int row) const {
  return row >= 0 && row < rowCount() ? m_rows[static_cast<size_t>(row)].label : QString();
}

CacheCounters DepCachePolicyModel::totals(int row) const {
  if (row < 0 || row >= rowCount()) return {};
  const Row& r = m_rows[static_cast<size_t>(row)];
  return {r.done.subgraphTokens + r.current.subgraphTokens, r.done.subgraphHits + r.current.subgraphHits,
          r.done.promptTokens + r.current.promptTokens, r.done.promptHits + r.current.promptHits};
}

QVariant DepCachePolicyModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& r = m_rows[static_cast<size_t>(index.row())];
  const CacheCounters t = totals(index.row());
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Policy: return r.label;
      case Runs: return r.runs;
      case SubgraphTokens: return static_cast<qlonglong>(t.subgraphTokens);
      case SubgraphHitRate: return percent(t.subgraphHitRate());
      case PromptTokens: return static_cast<qlonglong>(t.promptTokens);
      case PromptHitRate: return percent(t.promptHitRate());
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole && index.column() == SubgraphHitRate)
    return tr("%1 of %2 subgraph tokens found in the cache").arg(t.subgraphHits).arg(t.subgraphTokens);
  if (role == Qt::ToolTipRole && index.column() == PromptHitRate)
    return tr("%1 of %2 tokens looked up in the prefix cache (prompts and segments) found there")
        .arg(t.promptHits)
        .arg(t.promptTokens);
  if (role == Qt::TextAlignmentRole && index.column() != Policy) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant DepCachePolicyModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case Policy: return tr("Policy");
    case Runs: return tr("Runs");
    case SubgraphTokens: return tr("Subgraph tokens");
    case SubgraphHitRate: return tr("Subgraph hit rate");
    case PromptTokens: return tr("All tokens looked up");
    case PromptHitRate: return tr("All hit rate");
    default: return {};
  }
}

void DepCachePolicyModel::beginRun(const QString& label) {
  if (m_current >= 0) {  // the previous run is done: fold it in
    Row& prev = m_rows[static_cast<size_t>(m_current)];
    prev.done = totals(m_current);
    prev.current = {};
  }
  int row = rowOf(label);
  if (row < 0) {
    row = rowCount();
    beginInsertRows({}, row, row);
    m_rows.push_back({label, 0, {}, {}});
    endInsertRows();
  }
  m_current = row;
  ++m_rows[static_cast<size_t>(row)].runs;
  Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

void DepCachePolicyModel::updateRun(const CacheCounters& run) {
  if (m_current < 0) return;
  m_rows[static_cast<size_t>(m_current)].current = run;
  Q_EMIT dataChanged(index(m_current, 0), index(m_current, ColumnCount - 1));
}

// ---- DepCachePanel ----------------------------------------------------------------------------

DepCachePanel::DepCachePanel(EngineBridge* bridge, QWidget* parent) : QWidget(parent), m_bridge(bridge) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  m_status = new QLabel;
  m_status->setWordWrap(true);
  layout->addWidget(m_status);
  auto* split = new QSplitter(Qt::Vertical);
  m_plot = new QCustomPlot;
  m_plot->setObjectName(QStringLiteral("depCachePlot"));  // named in the stall meter's events
  m_plot->setMinimumSize(320, 200);
  m_plot->xAxis->setLabel(tr("time since the run started (s)"));
  m_plot->yAxis->setLabel(tr("subgraph hit rate (%)"));
  m_plot->yAxis->setRange(0, 105);
  m_plot->xAxis->setRange(0, 10);
  m_plot->legend->setVisible(true);
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  auto* table = new QTableView;
  table->setModel(&m_model);
  table->verticalHeader()->hide();
  table->horizontalHeader()->setStretchLastSection(true);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);  // a few rows
  split->addWidget(m_plot);
  split->addWidget(table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  layout->addWidget(split, 1);

  connect(bridge, &EngineBridge::engineReady, this, [this] {
    m_idle = {};  // a new engine counts from zero
    m_status->setText(statusText());
  });
  connect(bridge, &EngineBridge::runStarted, this, [this](qint64, int) { runStarted(); });
  connect(bridge, &EngineBridge::runFinished, this, [this](qint64, const rag::RunMetrics&) { runFinished(); });
  connect(bridge, &EngineBridge::clusterHeat, this,
          [this](const rag::ClusterHeat&, const rag::ServingStats& s) { addStats(s); });
  m_status->setText(statusText());
}

QString DepCachePanel::policyLabel(const EngineConfig& c) {
  return c.evictionPolicy == "lacr" ? QStringLiteral("lacr α %1").arg(c.lacrAlpha, 0, 'f', 2)
                                    : QString::fromStdString(c.evictionPolicy);
}

QCPGraph* DepCachePanel::graphOf(const QString& label) const {
  for (const auto& [l, g] : m_graphs)
    if (l == label) return g;
  return nullptr;
}

QString DepCachePanel::statusText() const {
  if (!m_bridge->isEngineReady()) return tr("Waiting for the engine…");
  const EngineConfig& c = m_bridge->config();
  QString text = tr("Eviction policy: %1 (set in the Run panel; the engine reloads when it changes).")
                     .arg(policyLabel(c));
  if (!c.prefixCache) text += tr(" The prefix cache is off: nothing is cached, so nothing hits.");
  const int row = m_model.rowOf(m_label);
  if (row >= 0 && m_model.totals(row).subgraphTokens == 0 && !m_active)
    text += tr(" The last run read no subgraphs: run a workflow with a knowledge node (graphrag).");
  return text;
}

void DepCachePanel::runStarted() {
  m_label = policyLabel(m_bridge->config());
  m_baseline = m_idle;
  m_active = true;
  m_clock.start();
  m_model.beginRun(m_label);
  QCPGraph* g = graphOf(m_label);
  if (!g) {
    g = m_plot->addGraph();
    g->setName(m_label);
    g->setPen(QPen(policyColour(m_graphs.size()), 2));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
    m_graphs.emplace_back(m_label, g);
  }
  g->data()->clear();  // each policy's line is its latest run
  m_status->setText(statusText());
  replotWhenShown(m_plot);
}

void DepCachePanel::runFinished() {
  if (!m_active) return;
  update(m_bridge->stats(), m_clock.nsecsElapsed() / 1e9);
  m_active = false;
  m_idle = m_bridge->stats();
  m_status->setText(statusText());
}

void DepCachePanel::addStats(const rag::ServingStats& stats) {
  const double cpu0 = GuiStallMeter::threadCpuMs();
  if (m_active) update(stats, m_clock.nsecsElapsed() / 1e9);
  else if (!m_bridge->running()) m_idle = stats;  // a run may have been asked for: not its baseline then
  m_longestReportMs = std::max(m_longestReportMs, GuiStallMeter::threadCpuMs() - cpu0);
}

void DepCachePanel::update(const rag::ServingStats& stats, double seconds) {
  const CacheCounters run = CacheCounters::between(m_baseline, stats);
  m_model.updateRun(run);
  if (QCPGraph* g = graphOf(m_label); g && run.subgraphTokens > 0) {
    g->addData(seconds, run.subgraphHitRate() * 100);
    m_plot->xAxis->setRange(0, std::max(10.0, std::ceil(seconds)));
    replotWhenShown(m_plot);
  }
}

}  // namespace ragwb
