#include "nodegraph/issue_list_model.h"

#include <QColor>

#include "nodegraph/graph_model.h"

namespace ragwb {

IssueListModel::IssueListModel(GraphModel* graph, QObject* parent)
    : QAbstractListModel(parent), m_graph(graph) {
  connect(graph, &GraphModel::issuesChanged, this, &IssueListModel::refresh);
  connect(graph, &GraphModel::modelReset, this, &IssueListModel::refresh);
  m_issues = graph->issues();
}

void IssueListModel::refresh() {
  beginResetModel();
  m_issues = m_graph->issues();
  endResetModel();
}

int IssueListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_issues.size());
}

QVariant IssueListModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const rag::WorkflowIssue& issue = m_issues[size_t(index.row())];
  switch (role) {
    case Qt::DisplayRole:
    case Qt::ToolTipRole: return QString::fromStdString(issue.message);
    case Qt::ForegroundRole: return QColor(0xb0, 0x20, 0x20);
    case NodeRole: return QString::fromStdString(issue.node);
    case EdgeRole: return int(issue.edge);
    default: return {};
  }
}

}  // namespace ragwb
