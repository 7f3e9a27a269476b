#include "inspectors/dragon_event_model.h"

#include <QBrush>
#include <QColor>
#include <algorithm>

namespace ragwb {

using rag::DragonEvent;
using rag::DragonSide;

QString dragonSideName(DragonSide s) { return s == DragonSide::Device ? QStringLiteral("device") : QStringLiteral("cloud"); }

DragonEventModel::DragonEventModel(QObject* parent) : QAbstractTableModel(parent) {}

int DragonEventModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_events.size());
}

int DragonEventModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant DragonEventModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Time: return tr("ms");
    case Observer: return tr("Recorded by");
    case Kind: return tr("Event");
    case Side: return tr("Side");
    case Position: return tr("Pos");
    case Token: return tr("Token");
    case Detail: return tr("Detail");
    default: return {};
  }
}

QString DragonEventModel::detail(const DragonEvent& e) const {
  switch (e.kind) {
    case DragonEvent::Kind::Decoded:
      return tr("drafted in %1 ms").arg(e.decodeMs, 0, 'f', 2);
    case DragonEvent::Kind::Arrived:
    case DragonEvent::Kind::Stale:
      return tr("%1 → %2: sent %3, received %4 ms (%5 ms on the link)%6")
          .arg(dragonSideName(e.side), dragonSideName(e.observer))
          .arg(e.sentMs, 0, 'f', 1)
          .arg(e.receivedMs, 0, 'f', 1)
          .arg(e.receivedMs - e.sentMs, 0, 'f', 1)
          .arg(e.kind == DragonEvent::Kind::Stale ? tr("; dropped, drafted before a rollback") : QString());
    case DragonEvent::Kind::Verdict: {
      auto mark = [&](DragonSide s) {
        return dragonSideName(s) + (e.accepted[static_cast<int>(s)] ? QStringLiteral(" ✓") : QStringLiteral(" ✗"));
      };
      QString d = tr("%1, %2; next aggregator: %3").arg(mark(DragonSide::Device), mark(DragonSide::Cloud), dragonSideName(e.next));
      if (e.sentMs >= 0) d += tr(" (from the %1, %2 ms on the link)").arg(dragonSideName(e.side)).arg(e.receivedMs - e.sentMs, 0, 'f', 1);
      return d;
    }
    case DragonEvent::Kind::Rollback:
      return tr("dropped the drafts from position %1 on, continues from the target token").arg(e.pos);
  }
  return {};
}

QVariant DragonEventModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const DragonEvent& e = m_events[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Time: return QString::number(e.endMs, 'f', 1);
      case Observer: return dragonSideName(e.observer);
      case Kind: return QString::fromUtf8(std::string(rag::dragonEventKindName(e.kind)).c_str());
      case Side: return dragonSideName(e.side);
      case Position: return static_cast<qulonglong>(e.pos);
      case Token: return QString::fromStdString(e.text).replace('\n', QStringLiteral("\\n"));
      case Detail: return detail(e);
      default: return {};
    }
  }
  if (role == Qt::ForegroundRole) {
    if (e.kind == DragonEvent::Kind::Rollback || e.kind == DragonEvent::Kind::Stale) return QBrush(QColor(190, 40, 40));
    if (e.kind == DragonEvent::Kind::Verdict && !(e.accepted[0] && e.accepted[1])) return QBrush(QColor(170, 90, 0));
    return {};
  }
  if (role == Qt::TextAlignmentRole && (index.column() == Time || index.column() == Position))
    return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

void DragonEventModel::appendEvents(const std::vector<DragonEvent>& batch) {
  if (batch.empty()) return;
  const int first = rowCount();
  beginInsertRows({}, first, first + static_cast<int>(batch.size()) - 1);
  for (const DragonEvent& e : batch) {
    m_events.push_back(e);
    m_endMs = std::max({m_endMs, e.endMs, e.receivedMs});
    const bool fromPeer = e.sentMs >= 0 && e.receivedMs >= 0;
    if (fromPeer && e.kind == DragonEvent::Kind::Arrived)
      m_transfers.push_back({DragonTransfer::Kind::Draft, e.side, e.pos, e.sentMs, e.receivedMs});
    else if (fromPeer && e.kind == DragonEvent::Kind::Stale)
      m_transfers.push_back({DragonTransfer::Kind::StaleDraft, e.side, e.pos, e.sentMs, e.receivedMs});
    else if (fromPeer && e.kind == DragonEvent::Kind::Verdict)
      m_transfers.push_back({DragonTransfer::Kind::Verdict, e.side, e.pos, e.sentMs, e.receivedMs});
    if (e.kind == DragonEvent::Kind::Verdict && e.observer == e.side) {  // as its decider recorded it
      if (!m_closedSpans.empty() && m_closedSpans.back().side == e.side) m_closedSpans.back().endMs = e.endMs;
      else m_closedSpans.push_back({m_lastVerdictMs, e.endMs, e.side});
      m_holder = e.next;
      m_lastVerdictMs = e.endMs;
      m_anyVerdict = true;
      ++m_decided;
    }
  }
  endInsertRows();
}

void DragonEventModel::clear() {
  beginResetModel();
  m_events.clear();
  m_transfers.clear();
  m_closedSpans.clear();
  m_holder = DragonSide::Device;
  m_lastVerdictMs = 0;
  m_anyVerdict = false;
  m_decided = 0;
  m_endMs = 0;
  endResetModel();
}

std::vector<AggregatorSpan> DragonEventModel::aggregatorSpans() const {
  std::vector<AggregatorSpan> out = m_closedSpans;
  if (m_anyVerdict && m_endMs > m_lastVerdictMs) {
    if (out.back().side == m_holder) out.back().endMs = m_endMs;
    else out.push_back({m_lastVerdictMs, m_endMs, m_holder});
  }
  return out;
}

int DragonEventModel::count(DragonEvent::Kind kind, DragonSide observer) const {
  return static_cast<int>(std::count_if(m_events.begin(), m_events.end(),
                                        [&](const DragonEvent& e) { return e.kind == kind && e.observer == observer; }));
}

}  // namespace ragwb
