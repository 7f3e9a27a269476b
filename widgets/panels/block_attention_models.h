// The Block-Attention panel's data halves (no widgets):
//   BlockRequestModel: one row per Block-Attention generation of a finished request, with each
//   passage block's KV source (StageTiming::segments): reused at the positions it was computed at
//   ("cached"), reused and re-encoded to its offset in the prompt ("re-encoded"), or computed by
//   this request; the strip column is drawn by the panel's delegate from segments(row).
//   BlockStoreModel: the block store's records (rag::Engine::blockStoreEntries), most recently
//   used first.
//
//   BlockRequestModel requests;
//   connect(&bridge, &EngineBridge::requestFinished, &requests, &BlockRequestModel::addRecord);
//   BlockStoreModel store;
//   store.setEntries(bridge.blockStoreEntries());
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "rag/engine.h"
#include "rag/run_store.h"

namespace ragwb {

// Tokens of a generation's segments by where their KV came from.
struct BlockKvTotals {
  int64_t cached = 0;      // reused at the positions it was computed at
  int64_t reencoded = 0;   // reused, re-encoded to its offset
  int64_t computed = 0;    // computed by this request
  int64_t stored = 0;      // of the reused, loaded from the block store (disk)
  static BlockKvTotals of(const std::vector<rag::SegmentKvUse>& segments);
};

class BlockRequestModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Request, Node, Blocks, Cached, Reencoded, Computed, Stored, Strip, ColumnCount };
  explicit BlockRequestModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  // The segments behind row `row` (empty for a row out of range).
  const std::vector<rag::SegmentKvUse>& segments(int row) const;
  uint32_t requestId(int row) const;
  int generationCount() const { return static_cast<int>(m_rows.size()); }
  int maxRows() const { return m_maxRows; }
  void setMaxRows(int rows);  // the oldest rows go beyond it (default 2000)

public Q_SLOTS:
  // Adds a row per "block" generation stage of the record (nothing for other records).
  void addRecord(const rag::RequestRecord& record);
  void clear();

private:
  struct Row {
    uint32_t requestId = 0;
    QString node;
    std::vector<rag::SegmentKvUse> segments;
    BlockKvTotals totals;
  };
  void trim();
  std::vector<Row> m_rows;
  int m_maxRows = 2000;
};

class BlockStoreModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Passage, Tokens, Size, Hits, State, ColumnCount };
  explicit BlockStoreModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  const std::vector<rag::BlockStoreEntry>& entries() const { return m_entries; }
  int64_t totalBytes() const;
  // Replaces the list; an unchanged list changes nothing (no reset, so a scrolled view stays).
  void setEntries(std::vector<rag::BlockStoreEntry> entries);

private:
  std::vector<rag::BlockStoreEntry> m_entries;
};

}  // namespace ragwb
