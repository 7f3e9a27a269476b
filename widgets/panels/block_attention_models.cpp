#include "panels/block_attention_models.h"

#include <QLocale>
#include <algorithm>

namespace ragwb {

BlockKvTotals BlockKvTotals::of(const std::vector<rag::SegmentKvUse>& segments) {
  BlockKvTotals t;
  for (const rag::SegmentKvUse& s : segments) {
    const int64_t reused = s.cachedTokens + s.storedTokens;
    (s.reencoded ? t.reencoded : t.cached) += reused;
    t.computed += s.computedTokens();
    t.stored += s.storedTokens;
  }
  return t;
}

// ---- BlockRequestModel ------------------------------------------------------------------------

BlockRequestModel::BlockRequestModel(QObject* parent) : QAbstractTableModel(parent) {}

int BlockRequestModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int BlockRequestModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

const std::vector<rag::SegmentKvUse>& BlockRequestModel::segments(int row) const {
  static const std::vector<rag::SegmentKvUse> kNone;
  return row >= 0 && row < rowCount() ? m_rows[static_cast<size_t>(row)].segments : kNone;
}

uint32_t BlockRequestModel::requestId(int row) const {
  return row >= 0 && row < rowCount() ? m_rows[static_cast<size_t>(row)].requestId : 0;
}

QVariant BlockRequestModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& r = m_rows[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Request: return static_cast<qulonglong>(r.requestId);
      case Node: return r.node;
      case Blocks: return static_cast<qulonglong>(r.segments.size());
      case Cached: return static_cast<qlonglong>(r.totals.cached);
      case Reencoded: return static_cast<qlonglong>(r.totals.reencoded);
      case Computed: return static_cast<qlonglong>(r.totals.computed);
      case Stored: return static_cast<qlonglong>(r.totals.stored);
      case Strip: return QString();  // drawn by the delegate
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole) {
    QStringList lines;
    for (size_t i = 0; i < r.segments.size(); ++i) {
      const rag::SegmentKvUse& s = r.segments[i];
      QString who = s.passageId >= 0 ? tr("passage %1").arg(s.passageId) : tr("template text");
      QString how;
      if (s.computedTokens() == s.tokens) how = tr("computed");
      else how = tr("%1 reused%2%3").arg(s.cachedTokens + s.storedTokens)
                     .arg(s.storedTokens > 0 ? tr(" (%1 from the block store)").arg(s.storedTokens) : QString())
                     .arg(s.reencoded ? tr(", re-encoded") : QString());
      if (s.computedTokens() > 0 && s.computedTokens() < s.tokens) how += tr(", %1 computed").arg(s.computedTokens());
      lines << tr("block %1: %2, %3 tokens at %4: %5").arg(i + 1).arg(who).arg(s.tokens).arg(s.offset).arg(how);
    }
    return lines.join('\n');
  }
  if (role == Qt::TextAlignmentRole && index.column() != Node && index.column() != Strip)
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant BlockRequestModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case Request: return tr("Request");
    case Node: return tr("Node");
    case Blocks: return tr("Blocks");
    case Cached: return tr("Cached");
    case Reencoded: return tr("Re-encoded");
    case Computed: return tr("Computed");
    case Stored: return tr("From store");
    case Strip: return tr("Blocks in prompt order");
    default: return {};
  }
}

void BlockRequestModel::addRecord(const rag::RequestRecord& record) {
  std::vector<Row> fresh;
  for (const rag::StageTiming& t : record.stages)
    if (t.kind == rag::NodeKind::Generation && t.attention == "block")
      fresh.push_back({record.requestId, QString::fromStdString(t.node), t.segments, BlockKvTotals::of(t.segments)});
  if (fresh.empty()) return;
  const int first = rowCount();
  beginInsertRows({}, first, first + static_cast<int>(fresh.size()) - 1);
  for (Row& r : fresh) m_rows.push_back(std::move(r));
  endInsertRows();
  trim();
}

void BlockRequestModel::setMaxRows(int rows) {
  m_maxRows = std::max(rows, 1);
  trim();
}

void BlockRequestModel::trim() {
  const int extra = rowCount() - m_maxRows;
  if (extra <= 0) return;
  beginRemoveRows({}, 0, extra - 1);
  m_rows.erase(m_rows.begin(), m_rows.begin() + extra);
  endRemoveRows();
}

void BlockRequestModel::clear() {
  if (m_rows.empty()) return;
  beginResetModel();
  m_rows.clear();
  endResetModel();
}

// ---- BlockStoreModel --------------------------------------------------------------------------

BlockStoreModel::BlockStoreModel(QObject* parent) : QAbstractTableModel(parent) {}

int BlockStoreModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_entries.size());
}

int BlockStoreModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

int64_t BlockStoreModel::totalBytes() const {
  int64_t b = 0;
  for (const rag::BlockStoreEntry& e : m_entries) b += e.bytes;
  return b;
}

QVariant BlockStoreModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const rag::BlockStoreEntry& e = m_entries[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Passage: return static_cast<qlonglong>(e.passageId);
      case Tokens: return static_cast<qlonglong>(e.tokens);
      case Size: return QLocale().formattedDataSize(e.bytes, 1, QLocale::DataSizeTraditionalFormat);
      case Hits: return static_cast<qlonglong>(e.hits);
      case State: return e.saved ? tr("on disk") : tr("pending");
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole && index.column() == State)
    return e.saved ? tr("In the block store's file") : tr("Computed this session; written when serving stops");
  if (role == Qt::TextAlignmentRole && index.column() != State) return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant BlockStoreModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  switch (section) {
    case Passage: return tr("Passage");
    case Tokens: return tr("Tokens");
    case Size: return tr("Size");
    case Hits: return tr("Hits");
    case State: return tr("State");
    default: return {};
  }
}

void BlockStoreModel::setEntries(std::vector<rag::BlockStoreEntry> entries) {
  const bool same = entries.size() == m_entries.size() &&
                    std::equal(entries.begin(), entries.end(), m_entries.begin(), [](const auto& a, const auto& b) {
                      return a.passageId == b.passageId && a.tokens == b.tokens && a.bytes == b.bytes &&
                             a.hits == b.hits && a.saved == b.saved;
                    });
  if (same) return;
  beginResetModel();
  m_entries = std::move(entries);
  endResetModel();
}

}  // namespace ragwb
