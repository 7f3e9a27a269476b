// The canvas of the RAGraph editor: a QGraphicsScene that mirrors a GraphModel (one NodeItem per
// node plus START and END, one EdgeItem per edge) and turns gestures into model edits:
//   - drag a node: one moveNode per drag (consecutive drags of one node merge in the model);
//   - drag from a node's output port (the dot below it) onto another node: addEdge;
//   - Delete or Backspace: removeItems of the selection, one undo step;
//   - drop a palette entry: a node kind adds a node at the drop point, a condition kind dropped
//     on an edge sets that edge's condition.
// The scene never changes items on its own: the model's signals do.
#pragma once

#include <QGraphicsScene>
#include <QHash>
#include <vector>

#include "nodegraph/edge_item.h"
#include "nodegraph/node_item.h"

namespace ragwb {

class GraphModel;

class GraphScene : public QGraphicsScene {
  Q_OBJECT
public:
  explicit GraphScene(GraphModel* model, QObject* parent = nullptr);

  GraphModel* model() const { return m_model; }
  NodeItem* nodeItem(const QString& id) const { return m_nodes.value(id); }
  QList<NodeItem*> nodeItems() const { return m_nodes.values(); }
  // Indexed like WorkflowGraph::edges(); nullptr for an edge whose ends do not exist.
  const std::vector<EdgeItem*>& edgeItems() const { return m_edges; }

  // The one selected node's id (empty otherwise) and the one selected edge (-1 otherwise).
  QString selectedNodeId() const;
  int selectedEdge() const;
  void selectNode(const QString& id);
  void selectEdge(int index);
  // Removes the selected nodes and edges (START and END stay) as one undo step.
  void deleteSelection();

Q_SIGNALS:
  // A gesture the model refused (say, an edge into START), for the editor's status line.
  void editFailed(const QString& message);

protected:
  void mousePressEvent(QGraphicsSceneMouseEvent* event) override;
  void mouseMoveEvent(QGraphicsSceneMouseEvent* event) override;
  void mouseReleaseEvent(QGraphicsSceneMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void dragEnterEvent(QGraphicsSceneDragDropEvent* event) override;
  void dragMoveEvent(QGraphicsSceneDragDropEvent* event) override;
  void dropEvent(QGraphicsSceneDragDropEvent* event) override;

private:
  void rebuild();
  NodeItem* createNodeItem(const QString& id, NodeItem::Role role);
  void syncNode(const QString& id);
  void removeNodeItem(const QString& id);
  void syncEdges();
  void syncIssues();
  void routeEdges();
  template <typename T>
  T* topItemAt(QPointF scenePos) const;
  void report(const rag::Status& status);

  GraphModel* m_model;
  QHash<QString, NodeItem*> m_nodes;  // node id (or START/END) -> item
  std::vector<EdgeItem*> m_edges;
  NodeItem* m_connectFrom = nullptr;  // while dragging a new edge
  QGraphicsPathItem* m_draft = nullptr;
};

}  // namespace ragwb
