#include "history/request_table_model.h"

#include <QBrush>
#include <QColor>

namespace ragwb {

QString formatMilliseconds(double seconds) {
  const double ms = seconds * 1000;
  return QStringLiteral("%1 ms").arg(ms, 0, 'f', ms < 10 ? 1 : 0);
}

namespace {

QString stageLabel(const rag::StageTiming& s) {
  QString label = QString::fromStdString(s.node) + ' ' + formatMilliseconds(s.endSeconds - s.beginSeconds);
  if (s.speculative) label += QStringLiteral(" (spec)");
  return label;
}

}  // namespace

QString formatStages(const std::vector<rag::StageTiming>& stages) {
  QStringList parts;
  for (const rag::StageTiming& s : stages) parts << stageLabel(s);
  return parts.join(QStringLiteral(" → "));
}

QString formatStageOutputs(const std::vector<rag::StageTiming>& stages) {
  constexpr int kShown = 160;  // characters of an output a tooltip line shows
  QStringList lines;
  for (const rag::StageTiming& s : stages) {
    QString line = stageLabel(s);
    if (s.kind != rag::NodeKind::Retrieval && !s.output.empty()) {
      QString text = QString::fromStdString(s.output).simplified();
      if (text.size() > kShown) text = text.left(kShown - 1) + QChar(0x2026);
      line += QStringLiteral(": ") + text;
    }
    lines << line;
  }
  return lines.join('\n');
}

RequestTableModel::RequestTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void RequestTableModel::setRecords(std::vector<rag::RequestRecord> records) {
  beginResetModel();
  m_records = std::move(records);
  endResetModel();
}

void RequestTableModel::append(const rag::RequestRecord& record) {
  const int row = static_cast<int>(m_records.size());
  beginInsertRows({}, row, row);
  m_records.push_back(record);
  endInsertRows();
}

void RequestTableModel::clear() { setRecords({}); }

const rag::RequestRecord* RequestTableModel::record(int row) const {
  return row >= 0 && row < rowCount() ? &m_records[static_cast<size_t>(row)] : nullptr;
}

int RequestTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_records.size());
}

int RequestTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RequestTableModel::display(const rag::RequestRecord& r, int column) const {
  switch (column) {
    case IdColumn: return static_cast<qulonglong>(r.requestId);
    case QuestionColumn: return QString::fromStdString(r.question);
    case AnswerColumn:
      return r.ok ? QString::fromStdString(r.answer) : tr("failed: %1").arg(QString::fromStdString(r.error));
    case CorrectColumn:
      if (r.goldAnswers.empty()) return QString();  // free text: nothing to grade
      return r.correct ? QStringLiteral("✓") : QStringLiteral("✗");
    case LatencyColumn: return r.ok ? formatMilliseconds(r.latencySeconds) : QString();
    case SpeculationColumn: return QStringLiteral("%1 / %2").arg(r.speculations).arg(r.rollbacks);
    case StagesColumn: return formatStages(r.stages);
    default: return {};
  }
}

QVariant RequestTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const rag::RequestRecord& r = m_records[static_cast<size_t>(index.row())];
  const int column = index.column();
  switch (role) {
    case Qt::DisplayRole: return display(r, column);
    case Qt::UserRole:  // raw values
      switch (column) {
        case IdColumn: return static_cast<qulonglong>(r.requestId);
        case CorrectColumn: return r.goldAnswers.empty() ? QVariant() : QVariant(r.correct);
        case LatencyColumn: return r.latencySeconds;
        case SpeculationColumn: return r.speculations;
        default: return display(r, column);
      }
    case Qt::ToolTipRole:
      switch (column) {
        case QuestionColumn: return QString::fromStdString(r.question);
        case AnswerColumn: return display(r, column);
        case CorrectColumn: {
          QStringList gold;
          for (const std::string& g : r.goldAnswers) gold << QString::fromStdString(g);
          return gold.isEmpty() ? QVariant() : QVariant(tr("gold: %1").arg(gold.join(QStringLiteral("; "))));
        }
        case SpeculationColumn:
          return tr("%1 speculative generations, %2 kept, %3 rolled back")
              .arg(r.speculations)
              .arg(r.specAccepted)
              .arg(r.rollbacks);
        case StagesColumn: return formatStageOutputs(r.stages);
        default: return {};
      }
    case Qt::ForegroundRole:
      if (column == CorrectColumn && !r.goldAnswers.empty())
        return QBrush(r.correct ? QColor(0x1f, 0x9e, 0x4a) : QColor(0xd6, 0x45, 0x3d));
      if (column == AnswerColumn && !r.ok) return QBrush(QColor(0xd6, 0x45, 0x3d));
      return {};
    case Qt::TextAlignmentRole:
      if (column == IdColumn || column == LatencyColumn || column == SpeculationColumn)
        return QVariant(Qt::AlignRight | Qt::AlignVCenter);
      if (column == CorrectColumn) return QVariant(Qt::AlignCenter);
      return {};
    default: return {};
  }
}

QVariant RequestTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case IdColumn: return tr("Id");
    case QuestionColumn: return tr("Question");
    case AnswerColumn: return tr("Answer");
    case CorrectColumn: return tr("Correct");
    case LatencyColumn: return tr("Latency");
    case SpeculationColumn: return tr("Spec / rollbacks");
    case StagesColumn: return tr("Stages");
    default: return {};
  }
}

}  // namespace ragwb
