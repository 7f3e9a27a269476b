// The DRAGON page's data half (no widgets): the events of one live run (rag/dragon.h) in the
// order they arrived, as a table (time, who recorded it, what, whose, position, token, detail),
// plus what the run's timeline draws: who held the aggregator over time and the transfers
// between the two sides with their latency.
//
//   ragwb::DragonEventModel model;
//   model.appendEvents(batch);           // one rowsInserted per batch (the page drains a buffer)
//   for (const auto& s : model.aggregatorSpans()) ...
//   for (const auto& t : model.transfers()) ... t.receivedMs - t.sentMs ...
//
// A GUI-thread object; the live run's worker threads never touch it.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "rag/dragon.h"

namespace ragwb {

// Who held the aggregator during [beginMs, endMs).
struct AggregatorSpan {
  double beginMs = 0, endMs = 0;
  rag::DragonSide side = rag::DragonSide::Device;
};

// One frame between the sides: a draft (or a stale one) or the peer's verdict.
struct DragonTransfer {
  enum class Kind : uint8_t { Draft, StaleDraft, Verdict };
  Kind kind = Kind::Draft;
  rag::DragonSide from = rag::DragonSide::Device;
  uint32_t pos = 0;
  double sentMs = 0, receivedMs = 0;
  double latencyMs() const { return receivedMs - sentMs; }
};

QString dragonSideName(rag::DragonSide s);

class DragonEventModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Time, Observer, Kind, Side, Position, Token, Detail, ColumnCount };

  explicit DragonEventModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  void appendEvents(const std::vector<rag::DragonEvent>& batch);
  void clear();

  const std::vector<rag::DragonEvent>& events() const { return m_events; }
  const rag::DragonEvent& event(int row) const { return m_events[static_cast<size_t>(row)]; }
  // The latest time any event mentions (ms since the run started).
  double endMs() const { return m_endMs; }
  // From the verdicts as their deciders recorded them: the first holder from the start, then
  // each verdict's choice of the next, one span per holding (consecutive verdicts of one holder
  // merge); the last span is open, ending at endMs().
  std::vector<AggregatorSpan> aggregatorSpans() const;
  const std::vector<DragonTransfer>& transfers() const { return m_transfers; }
  // Target tokens fixed so far (verdicts recorded by their deciders), in position order.
  int decidedPositions() const { return m_decided; }
  int count(rag::DragonEvent::Kind kind, rag::DragonSide observer) const;

private:
  QString detail(const rag::DragonEvent& e) const;
  std::vector<rag::DragonEvent> m_events;
  std::vector<DragonTransfer> m_transfers;
  std::vector<AggregatorSpan> m_closedSpans;  // up to the last decided verdict
  rag::DragonSide m_holder = rag::DragonSide::Device;
  double m_lastVerdictMs = 0;
  bool m_anyVerdict = false;
  int m_decided = 0;
  double m_endMs = 0;
};

}  // namespace ragwb
