// A two-column table (quantity, value) of a corpus's statistics, for the overview page.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "rag/corpus.h"

namespace ragwb {

class CorpusStatsModel : public QAbstractTableModel {
  Q_OBJECT
public:
  explicit CorpusStatsModel(QObject* parent = nullptr);

  void setStats(const rag::CorpusStats& stats);
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
  struct Row {
    QString label;
    qint64 value;
    bool heading;  // a group row ("QA test"), shown bold
  };
  std::vector<Row> m_rows;
};

}  // namespace ragwb
