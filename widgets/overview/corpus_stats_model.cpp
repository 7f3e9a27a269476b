#include "overview/corpus_stats_model.h"

#include <QFont>
#include <QLocale>

namespace ragwb {

CorpusStatsModel::CorpusStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void CorpusStatsModel::setStats(const rag::CorpusStats& s) {
  beginResetModel();
  m_rows.clear();
  m_rows.push_back({tr("Passages"), s.passages, false});
  m_rows.push_back({tr("Entities"), s.entities, false});
  m_rows.push_back({tr("Relations"), s.relations, false});
  for (const char* split : {"train", "dev", "test"}) {
    auto it = s.qa.find(split);
    if (it == s.qa.end()) continue;
    m_rows.push_back({tr("QA %1").arg(QString::fromLatin1(split)), s.qaTotal(split), true});
    for (const auto& [type, count] : it->second)
      m_rows.push_back({QStringLiteral("    ") + QString::fromStdString(type).replace('_', ' '), count, false});
  }
  endResetModel();
}

void CorpusStatsModel::clear() {
  beginResetModel();
  m_rows.clear();
  endResetModel();
}

int CorpusStatsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int CorpusStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 2; }

QVariant CorpusStatsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& r = m_rows[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return index.column() == 0 ? QVariant(r.label) : QVariant(QLocale().toString(r.value));
    case Qt::UserRole:  // raw value for sorting and tests
      return index.column() == 0 ? QVariant(r.label) : QVariant(r.value);
    case Qt::TextAlignmentRole:
      return index.column() == 1 ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter))
                                 : QVariant(int(Qt::AlignLeft | Qt::AlignVCenter));
    case Qt::FontRole:
      if (r.heading) {
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
    default:
      return {};
  }
}

QVariant CorpusStatsModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  return section == 0 ? tr("Quantity") : tr("Count");
}

}  // namespace ragwb
