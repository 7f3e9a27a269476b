// The problems WorkflowGraph::issues() finds in the edited graph, one row each, for the list
// under the canvas (clicking a row selects the node or edge it names).
#pragma once

#include <QAbstractListModel>
#include <vector>

#include "rag/workflow.h"

namespace ragwb {

class GraphModel;

class IssueListModel : public QAbstractListModel {
  Q_OBJECT
public:
  enum Role { NodeRole = Qt::UserRole, EdgeRole };  // QString id ("" graph-wide); int (-1 none)

  // Follows `graph`'s issuesChanged and modelReset.
  explicit IssueListModel(GraphModel* graph, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

private:
  void refresh();

  GraphModel* m_graph;
  std::vector<rag::WorkflowIssue> m_issues;
};

}  // namespace ragwb
