// RequestTableModel: one row per request result (rag::RequestRecord), for a stored run or a
// live one (append() as requests finish). Independent of the run history panel.
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <vector>

#include "rag/engine.h"
#include "rag/run_store.h"

namespace ragwb {

// "12 ms", "3.4 ms" (one decimal below 10 ms), "0.4 ms".
QString formatMilliseconds(double seconds);

// "retrieve 12 ms → answer 30 ms" (speculative stages that were kept are marked "(spec)").
QString formatStages(const std::vector<rag::StageTiming>& stages);
// One line per stage, each with what the stage wrote when it wrote text (a generation's answer or
// sub-question, a compression's summary; a retrieval's passages are left out): the Stages
// column's tooltip, where a loop's earlier rounds can be read.
QString formatStageOutputs(const std::vector<rag::StageTiming>& stages);

class RequestTableModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column {
    IdColumn,
    QuestionColumn,
    AnswerColumn,
    CorrectColumn,
    LatencyColumn,
    SpeculationColumn,  // "speculations / rollbacks"
    StagesColumn,
    ColumnCount
  };

  explicit RequestTableModel(QObject* parent = nullptr);

  void setRecords(std::vector<rag::RequestRecord> records);
  void append(const rag::RequestRecord& record);
  void clear();
  const std::vector<rag::RequestRecord>& records() const { return m_records; }
  const rag::RequestRecord* record(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
  QVariant display(const rag::RequestRecord& r, int column) const;

  std::vector<rag::RequestRecord> m_records;
};

}  // namespace ragwb
