// The bench results saved in the run history (rag::RunStore::listBenchResults), as a table for
// the Reproduce page: figure, started at, seconds, command line; newest first. Row data under
// IdRole is the result's id, under FigureRole its figure id.
//
//   ragwb::BenchResultModel model;
//   model.setResults(*store.listBenchResults());
//   const rag::BenchResult* r = model.result(view->currentIndex().row());
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "rag/run_store.h"

namespace ragwb {

class BenchResultModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Figure, StartedAt, Seconds, CommandLine, ColumnCount };
  enum Role { IdRole = Qt::UserRole + 1, FigureRole };

  explicit BenchResultModel(QObject* parent = nullptr);

  void setResults(std::vector<rag::BenchResult> results);  // newest first, as listed
  const rag::BenchResult* result(int row) const;           // nullptr out of range
  int rowOfId(int64_t id) const;                           // -1 when absent

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
  std::vector<rag::BenchResult> m_results;
};

}  // namespace ragwb
