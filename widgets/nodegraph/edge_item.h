// One edge of the RAGraph canvas: a curve with an arrow from a node's output port to another
// node's input port, labelled with its condition and, when its node has several edges, its
// place in the checking order ("1 · if docs is empty", "2 · otherwise"). An edge whose direct
// curve would cross another node runs down a lane left of the boxes in between; an edge back up
// (a loop) makes a U-turn up a lane to their right. A lane is wide enough for the label.
#pragma once

#include <QGraphicsItem>
#include <QPainterPath>
#include <QStringList>

namespace ragwb {

class NodeItem;

class EdgeItem : public QGraphicsItem {
public:
  enum { Type = UserType + 0x45 };  // 'E'

  EdgeItem(int index, NodeItem* from, NodeItem* to);

  int index() const { return m_index; }  // into WorkflowGraph::edges()
  NodeItem* from() const { return m_from; }
  NodeItem* to() const { return m_to; }
  const QString& label() const { return m_label; }
  void setEnds(NodeItem* from, NodeItem* to);
  void setLabel(const QString& label);
  void setIssues(const QStringList& issues);
  // Recomputes the curve from the ends' ports; `obstacles` are the boxes of all nodes.
  void route(const QList<QRectF>& obstacles);

  int type() const override { return Type; }
  QRectF boundingRect() const override;
  QPainterPath shape() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

private:
  QSizeF labelSize() const;
  QRectF labelRect() const;

  int m_index;
  NodeItem* m_from;
  NodeItem* m_to;
  QString m_label;
  QStringList m_issues;
  QPainterPath m_path;
  QPointF m_labelCentre;
};

}  // namespace ragwb
