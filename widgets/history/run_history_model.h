// RunHistoryModel: one row per stored run (rag::RunSummary), newest first as RunStore lists
// them. Display text is formatted for people; Qt::UserRole gives the raw value for sorting.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "rag/run_store.h"

namespace ragwb {

class RunHistoryModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column {
    IdColumn,
    StartedColumn,
    WorkflowColumn,
    ModeColumn,
    RpsColumn,
    RequestsColumn,
    MeanLatencyColumn,
    P99LatencyColumn,
    SloColumn,
    AccuracyColumn,
    FinishedColumn,
    ColumnCount
  };

  explicit RunHistoryModel(QObject* parent = nullptr);

  void setRuns(std::vector<rag::RunSummary> runs);
  void clear();
  const std::vector<rag::RunSummary>& runs() const { return m_runs; }
  const rag::RunSummary* run(int row) const;
  int rowOfRun(qint64 id) const;  // -1 when not listed

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
  QVariant display(const rag::RunSummary& run, int column) const;
  QVariant raw(const rag::RunSummary& run, int column) const;

  std::vector<rag::RunSummary> m_runs;
};

}  // namespace ragwb
