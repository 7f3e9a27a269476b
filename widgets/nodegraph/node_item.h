// One node of the RAGraph canvas, or one of the START/END terminals: a box coloured by kind
// with the node's id, what it does and what it writes, an input port on top, an output port
// below, and a red badge when validation names the node. Its position is the box's centre.
#pragma once

#include <QGraphicsItem>
#include <QStringList>
#include <functional>

#include "rag/workflow.h"

namespace ragwb {

class NodeItem : public QGraphicsItem {
public:
  enum class Role { Node, Start, End };
  enum { Type = UserType + 0x4e };  // 'N'

  NodeItem(const QString& id, Role role);

  const QString& id() const { return m_id; }
  Role role() const { return m_role; }
  void setNode(const rag::WorkflowNode& node);
  void setIssues(const QStringList& issues);
  const QStringList& issues() const { return m_issues; }
  // Called after the item moved (a drag or setPos), so edges can follow.
  void setOnMoved(std::function<void()> onMoved) { m_onMoved = std::move(onMoved); }

  bool hasInput() const { return m_role != Role::Start; }
  bool hasOutput() const { return m_role != Role::End; }
  // Port centres in scene coordinates.
  QPointF inputPort() const;
  QPointF outputPort() const;
  bool outputPortContains(QPointF scenePos) const;
  // The box in scene coordinates, for routing edges around it.
  QRectF sceneBox() const { return mapRectToScene(box()); }

  int type() const override { return Type; }
  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;

  static QColor kindColor(rag::NodeKind kind);

protected:
  QVariant itemChange(GraphicsItemChange change, const QVariant& value) override;

private:
  QRectF box() const;
  void updateToolTip();

  QString m_id;
  Role m_role;
  rag::NodeKind m_kind = rag::NodeKind::Generation;
  QString m_detail;  // "retrieval · top-5"
  QString m_output;  // "{subquestion} → {docs}"
  QString m_summary;  // the tooltip's description of the node
  QStringList m_issues;
  std::function<void()> m_onMoved;
};

}  // namespace ragwb
