#include "reproduce/bench_result_model.h"

#include "reproduce/paper_figures.h"

namespace ragwb {

BenchResultModel::BenchResultModel(QObject* parent) : QAbstractTableModel(parent) {}

void BenchResultModel::setResults(std::vector<rag::BenchResult> results) {
  beginResetModel();
  m_results = std::move(results);
  endResetModel();
}

const rag::BenchResult* BenchResultModel::result(int row) const {
  return row >= 0 && row < static_cast<int>(m_results.size()) ? &m_results[static_cast<size_t>(row)] : nullptr;
}

int BenchResultModel::rowOfId(int64_t id) const {
  for (size_t i = 0; i < m_results.size(); ++i)
    if (m_results[i].id == id) return static_cast<int>(i);
  return -1;
}

int BenchResultModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_results.size());
}

int BenchResultModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant BenchResultModel::data(const QModelIndex& index, int role) const {
  const rag::BenchResult* r = index.isValid() ? result(index.row()) : nullptr;
  if (!r) return {};
  const QString name = QString::fromStdString(r->name);
  if (role == IdRole) return QVariant::fromValue<qlonglong>(r->id);
  if (role == FigureRole) return name;
  if (role == Qt::ToolTipRole) return QString::fromStdString(r->commandLine);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Figure: {
      const PaperFigure* f = findPaperFigure(name);
      return f ? f->title.section(QLatin1Char(':'), 0, 0) : name;
    }
    case StartedAt: return QString::fromStdString(r->startedAt);
    case Seconds: return QString::number(r->seconds, 'f', 1);
    case CommandLine: return QString::fromStdString(r->commandLine);
    default: return {};
  }
}

QVariant BenchResultModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Figure: return tr("Figure");
    case StartedAt: return tr("Started (UTC)");
    case Seconds: return tr("Seconds");
    case CommandLine: return tr("Command");
    default: return {};
  }
}

}  // namespace ragwb
