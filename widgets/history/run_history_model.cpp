#include "history/run_history_model.h"

#include <QDateTime>

#include "history/request_table_model.h"

namespace ragwb {

namespace {

QString percent(double share) { return QStringLiteral("%1 %").arg(share * 100, 0, 'f', 1); }

}  // namespace

RunHistoryModel::RunHistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunHistoryModel::setRuns(std::vector<rag::RunSummary> runs) {
  beginResetModel();
  m_runs = std::move(runs);
  endResetModel();
}

void RunHistoryModel::clear() { setRuns({}); }

const rag::RunSummary* RunHistoryModel::run(int row) const {
  return row >= 0 && row < rowCount() ? &m_runs[static_cast<size_t>(row)] : nullptr;
}

int RunHistoryModel::rowOfRun(qint64 id) const {
  for (size_t i = 0; i < m_runs.size(); ++i)
    if (m_runs[i].id == id) return static_cast<int>(i);
  return -1;
}

int RunHistoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int RunHistoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunHistoryModel::raw(const rag::RunSummary& run, int column) const {
  const rag::RunMetrics& m = run.metrics;
  switch (column) {
    case IdColumn: return static_cast<qlonglong>(run.id);
    case StartedColumn: return QString::fromStdString(run.startedAt);
    case WorkflowColumn: return QString::fromStdString(run.settings.workflow);
    case ModeColumn: return QString::fromStdString(run.settings.mode);
    case RpsColumn: return run.settings.rps;
    case RequestsColumn: return static_cast<qlonglong>(run.settings.requests);
    case MeanLatencyColumn: return m.meanLatency;
    case P99LatencyColumn: return m.p99Latency;
    case SloColumn: return m.sloAttainment;
    case AccuracyColumn: return m.accuracy;
    case FinishedColumn: return run.finished;
    default: return {};
  }
}

QVariant RunHistoryModel::display(const rag::RunSummary& run, int column) const {
  const rag::RunMetrics& m = run.metrics;
  // An unfinished run has no metrics: show a dash rather than zeros that look measured.
  const bool measured = run.finished;
  const QString none = QStringLiteral("—");
  switch (column) {
    case StartedColumn: {
      QDateTime t = QDateTime::fromString(QString::fromStdString(run.startedAt), Qt::ISODate);
      return t.isValid() ? t.toLocalTime().toString(QStringLiteral("yyyy-MM-dd hh:mm:ss"))
                         : QString::fromStdString(run.startedAt);
    }
    case RpsColumn: return run.settings.rps > 0 ? QString::number(run.settings.rps, 'g', 4) : tr("all at once");
    case RequestsColumn:
      return measured && m.completed != run.settings.requests
                 ? tr("%1 of %2").arg(m.completed).arg(run.settings.requests)
                 : QString::number(run.settings.requests);
    case MeanLatencyColumn: return measured ? formatMilliseconds(m.meanLatency) : none;
    case P99LatencyColumn: return measured ? formatMilliseconds(m.p99Latency) : none;
    case SloColumn: return measured ? percent(m.sloAttainment) : none;
    case AccuracyColumn: return measured ? percent(m.accuracy) : none;
    case FinishedColumn: return run.finished ? QStringLiteral("✓") : tr("unfinished");
    default: return raw(run, column);
  }
}

QVariant RunHistoryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const rag::RunSummary& run = m_runs[static_cast<size_t>(index.row())];
  const int column = index.column();
  switch (role) {
    case Qt::DisplayRole: return display(run, column);
    case Qt::UserRole: return raw(run, column);
    case Qt::TextAlignmentRole:
      if (column == IdColumn || (column >= RpsColumn && column <= AccuracyColumn))
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
      if (column == FinishedColumn) return QVariant(Qt::AlignCenter);
      return {};
    case Qt::ToolTipRole:
      if (column == RequestsColumn && run.finished)
        return tr("%1 completed, %2 failed, %3 req/s throughput")
            .arg(run.metrics.completed)
            .arg(run.metrics.failed)
            .arg(run.metrics.throughput, 0, 'f', 2);
      if (column == SloColumn) return tr("SLO %1").arg(formatMilliseconds(run.settings.sloSeconds));
      if (column == FinishedColumn && !run.finished)
        return tr("The run stopped before it finished; its finished requests were kept.");
      return {};
    default: return {};
  }
}

QVariant RunHistoryModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case IdColumn: return tr("Run");
    case StartedColumn: return tr("Started");
    case WorkflowColumn: return tr("Workflow");
    case ModeColumn: return tr("Mode");
    case RpsColumn: return tr("Req/s");
    case RequestsColumn: return tr("Requests");
    case MeanLatencyColumn: return tr("Mean latency");
    case P99LatencyColumn: return tr("p99 latency");
    case SloColumn: return tr("SLO attained");
    case AccuracyColumn: return tr("Accuracy");
    case FinishedColumn: return tr("Finished");
    default: return {};
  }
}

}  // namespace ragwb
