#include "nodegraph/graph_scene.h"

#include <QGraphicsPathItem>
#include <QGraphicsSceneDragDropEvent>
#include <QGraphicsSceneMouseEvent>
#include <QKeyEvent>
#include <QMimeData>
#include <QUndoStack>

#include "nodegraph/graph_model.h"
#include "nodegraph/palette_model.h"
#include "nodegraph/strings.h"

namespace ragwb {

namespace {

// "1 · if docs is empty" / "2 · otherwise" when the node has several edges; the condition alone
// (or nothing for an unconditional edge) when it has one.
QString edgeLabel(const rag::WorkflowGraph& g, size_t index) {
  const rag::WorkflowEdge& e = g.edges()[index];
  const std::vector<size_t> siblings = g.edgesFrom(e.from);
  const bool always = e.when.kind == rag::ConditionKind::Always;
  if (siblings.size() <= 1) return always ? QString() : toQString(rag::describeCondition(e.when));
  const auto rank = std::find(siblings.begin(), siblings.end(), index) - siblings.begin() + 1;
  const QString what = always && rank > 1 ? QStringLiteral("otherwise")
                                          : toQString(rag::describeCondition(e.when));
  return QStringLiteral("%1 · %2").arg(rank).arg(what);
}

}  // namespace

GraphScene::GraphScene(GraphModel* model, QObject* parent) : QGraphicsScene(parent), m_model(model) {
  setBackgroundBrush(QColor(0xf7, 0xf7, 0xf9));
  connect(model, &GraphModel::modelReset, this, &GraphScene::rebuild);
  connect(model, &GraphModel::nodeAdded, this, &GraphScene::syncNode);
  connect(model, &GraphModel::nodeChanged, this, &GraphScene::syncNode);
  connect(model, &GraphModel::nodeRemoved, this, &GraphScene::removeNodeItem);
  connect(model, &GraphModel::edgesChanged, this, &GraphScene::syncEdges);
  connect(model, &GraphModel::issuesChanged, this, &GraphScene::syncIssues);
  rebuild();
}

void GraphScene::rebuild() {
  m_connectFrom = nullptr;
  m_draft = nullptr;
  m_edges.clear();
  m_nodes.clear();
  clear();
  createNodeItem(toQString(rag::kStart), NodeItem::Role::Start);
  createNodeItem(toQString(rag::kEnd), NodeItem::Role::End);
  for (const rag::WorkflowNode& n : m_model->graph().nodes()) syncNode(toQString(n.id));
  syncEdges();
  syncIssues();
}

NodeItem* GraphScene::createNodeItem(const QString& id, NodeItem::Role role) {
  auto* item = new NodeItem(id, role);
  item->setPos(m_model->nodePosition(id));
  item->setOnMoved([this] { routeEdges(); });
  addItem(item);
  m_nodes.insert(id, item);
  return item;
}

void GraphScene::syncNode(const QString& id) {
  NodeItem* item = m_nodes.value(id);
  if (const rag::WorkflowNode* n = m_model->node(id)) {
    if (!item) item = createNodeItem(id, NodeItem::Role::Node);
    item->setNode(*n);
  }
  if (item && item->pos() != m_model->nodePosition(id)) item->setPos(m_model->nodePosition(id));
}

void GraphScene::removeNodeItem(const QString& id) {
  NodeItem* item = m_nodes.take(id);
  if (!item) return;
  if (m_connectFrom == item) m_connectFrom = nullptr;
  // Edges still pointing at the item go first; syncEdges() rebuilds them from the model.
  for (EdgeItem*& e : m_edges)
    if (e && (e->from() == item || e->to() == item)) {
      delete e;
      e = nullptr;
    }
  delete item;
  syncEdges();
}

void GraphScene::syncEdges() {
  const auto& edges = m_model->graph().edges();
  // Items are reused by index so that a selected edge stays selected while its condition is
  // edited; when edges come or go, the selection of edges is dropped instead of shifting.
  const bool sameCount = edges.size() == m_edges.size();
  for (size_t i = edges.size(); i < m_edges.size(); ++i) delete m_edges[i];
  m_edges.resize(edges.size(), nullptr);
  for (size_t i = 0; i < edges.size(); ++i) {
    NodeItem* from = m_nodes.value(QString::fromStdString(edges[i].from));
    NodeItem* to = m_nodes.value(QString::fromStdString(edges[i].to));
    EdgeItem*& item = m_edges[i];
    if (!from || !to) {
      delete item;
      item = nullptr;
      continue;
    }
    if (!item) {
      item = new EdgeItem(int(i), from, to);
      addItem(item);
    }
    item->setEnds(from, to);
    item->setLabel(edgeLabel(m_model->graph(), i));
    if (!sameCount) item->setSelected(false);
  }
  routeEdges();
  syncIssues();
}

void GraphScene::syncIssues() {
  for (NodeItem* item : std::as_const(m_nodes)) item->setIssues(m_model->nodeIssues(item->id()));
  for (EdgeItem* e : m_edges)
    if (e) e->setIssues(m_model->edgeIssues(e->index()));
}

void GraphScene::routeEdges() {
  QList<QRectF> boxes;
  for (NodeItem* n : std::as_const(m_nodes)) boxes << n->sceneBox();
  for (EdgeItem* e : m_edges)
    if (e) e->route(boxes);
}

QString GraphScene::selectedNodeId() const {
  const QList<QGraphicsItem*> sel = selectedItems();
  if (sel.size() != 1 || sel.front()->type() != NodeItem::Type) return {};
  return static_cast<NodeItem*>(sel.front())->id();
}

int GraphScene::selectedEdge() const {
  const QList<QGraphicsItem*> sel = selectedItems();
  if (sel.size() != 1 || sel.front()->type() != EdgeItem::Type) return -1;
  return static_cast<EdgeItem*>(sel.front())->index();
}

void GraphScene::selectNode(const QString& id) {
  clearSelection();
  if (NodeItem* item = m_nodes.value(id)) item->setSelected(true);
}

void GraphScene::selectEdge(int index) {
  clearSelection();
  if (index >= 0 && size_t(index) < m_edges.size() && m_edges[size_t(index)])
    m_edges[size_t(index)]->setSelected(true);
}

void GraphScene::deleteSelection() {
  QStringList nodes;
  QList<int> edges;
  for (QGraphicsItem* item : selectedItems()) {
    if (item->type() == NodeItem::Type) {
      auto* n = static_cast<NodeItem*>(item);
      if (n->role() == NodeItem::Role::Node) nodes << n->id();
    } else if (item->type() == EdgeItem::Type) {
      edges << static_cast<EdgeItem*>(item)->index();
    }
  }
  if (!nodes.isEmpty() || !edges.isEmpty()) report(m_model->removeItems(nodes, edges));
}

template <typename T>
T* GraphScene::topItemAt(QPointF scenePos) const {
  for (QGraphicsItem* item : items(scenePos))
    if (item->type() == T::Type) return static_cast<T*>(item);
  return nullptr;
}

void GraphScene::report(const rag::Status& status) {
  if (!status) Q_EMIT editFailed(QString::fromStdString(status.message()));
}

void GraphScene::mousePressEvent(QGraphicsSceneMouseEvent* event) {
  if (event->button() == Qt::LeftButton) {
    NodeItem* node = topItemAt<NodeItem>(event->scenePos());
    if (node && node->outputPortContains(event->scenePos())) {
      m_connectFrom = node;
      m_draft = addPath(QPainterPath(), QPen(QColor(0xe0, 0x8a, 0x00), 2, Qt::DashLine));
      m_draft->setZValue(2);
      event->accept();
      return;
    }
  }
  QGraphicsScene::mousePressEvent(event);
}

void GraphScene::mouseMoveEvent(QGraphicsSceneMouseEvent* event) {
  if (m_draft && m_connectFrom) {
    QPointF a = m_connectFrom->outputPort(), b = event->scenePos();
    QPainterPath p(a);
    p.cubicTo(a + QPointF(0, 60), b - QPointF(0, 60), b);
    m_draft->setPath(p);
    return;
  }
  QGraphicsScene::mouseMoveEvent(event);
}

void GraphScene::mouseReleaseEvent(QGraphicsSceneMouseEvent* event) {
  if (m_draft) {
    NodeItem* from = m_connectFrom;
    delete m_draft;
    m_draft = nullptr;
    m_connectFrom = nullptr;
    NodeItem* to = topItemAt<NodeItem>(event->scenePos());
    if (from && to && to != from) {
      if (!to->hasInput())
        Q_EMIT editFailed(tr("No edge can lead into START; drop it on a node or END"));
      else
        report(m_model->addEdge(from->id(), to->id()));
    }
    return;
  }
  QGraphicsScene::mouseReleaseEvent(event);
  // Commit the nodes the drag moved: one command per node, one undo step per drag.
  QList<NodeItem*> moved;
  for (NodeItem* n : std::as_const(m_nodes))
    if (n->pos() != m_model->nodePosition(n->id())) moved << n;
  if (moved.size() > 1) m_model->undoStack()->beginMacro(tr("Move %n nodes", nullptr, int(moved.size())));
  for (NodeItem* n : moved) report(m_model->moveNode(n->id(), n->pos()));
  if (moved.size() > 1) m_model->undoStack()->endMacro();
}

void GraphScene::keyPressEvent(QKeyEvent* event) {
  if ((event->key() == Qt::Key_Delete || event->key() == Qt::Key_Backspace) && !focusItem()) {
    deleteSelection();
    event->accept();
    return;
  }
  QGraphicsScene::keyPressEvent(event);
}

void GraphScene::dragEnterEvent(QGraphicsSceneDragDropEvent* event) {
  const QMimeData* mime = event->mimeData();
  event->setAccepted(mime->hasFormat(kNodeKindMime) || mime->hasFormat(kConditionMime));
  if (event->isAccepted()) event->setDropAction(Qt::CopyAction);
}

void GraphScene::dragMoveEvent(QGraphicsSceneDragDropEvent* event) {
  const QMimeData* mime = event->mimeData();
  // A condition only lands on an edge; a node anywhere.
  bool ok = mime->hasFormat(kNodeKindMime) ||
            (mime->hasFormat(kConditionMime) && topItemAt<EdgeItem>(event->scenePos()));
  event->setAccepted(ok);
  if (ok) event->setDropAction(Qt::CopyAction);
}

void GraphScene::dropEvent(QGraphicsSceneDragDropEvent* event) {
  const QMimeData* mime = event->mimeData();
  if (mime->hasFormat(kNodeKindMime)) {
    auto kind = nodeKindFromName(mime->data(kNodeKindMime));
    if (!kind) return;
    const QString id = m_model->uniqueNodeId(toQString(rag::nodeKindName(*kind)));
    report(m_model->addNode(GraphModel::defaultNode(*kind, id), event->scenePos()));
    selectNode(id);
  } else if (mime->hasFormat(kConditionMime)) {
    auto kind = conditionKindFromName(mime->data(kConditionMime));
    EdgeItem* edge = topItemAt<EdgeItem>(event->scenePos());
    if (!kind || !edge) return;
    const int index = edge->index();
    report(m_model->setEdgeCondition(index, m_model->defaultCondition(*kind, index)));
    selectEdge(index);
  } else {
    return;
  }
  event->setDropAction(Qt::CopyAction);
  event->accept();
}

}  // namespace ragwb
