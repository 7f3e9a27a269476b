#include "nodegraph/edge_item.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPathStroker>
#include <QStyleOptionGraphicsItem>
#include <QtMath>

#include "nodegraph/node_item.h"

namespace ragwb {

namespace {

constexpr double kArrowSize = 10.0;
constexpr double kClearance = 24.0;  // between a lane and the boxes it passes
constexpr double kTurn = 22.0;       // how far a curve runs before it turns into a lane

QPainterPath cubic(QPointF a, QPointF c1, QPointF c2, QPointF b) {
  QPainterPath p(a);
  p.cubicTo(c1, c2, b);
  return p;
}

}  // namespace

EdgeItem::EdgeItem(int index, NodeItem* from, NodeItem* to)
    : m_index(index), m_from(from), m_to(to) {
  setFlags(ItemIsSelectable);
  setZValue(0);
}

void EdgeItem::setEnds(NodeItem* from, NodeItem* to) {
  m_from = from;
  m_to = to;
}

void EdgeItem::setLabel(const QString& label) {
  if (label == m_label) return;
  prepareGeometryChange();
  m_label = label;
}

void EdgeItem::setIssues(const QStringList& issues) {
  m_issues = issues;
  setToolTip(issues.isEmpty() ? m_label : m_label + QStringLiteral("\n\nProblems:\n• ") +
                                              issues.join(QStringLiteral("\n• ")));
  update();
}

void EdgeItem::route(const QList<QRectF>& obstacles) {
  prepareGeometryChange();
  const QPointF a = m_from->outputPort(), b = m_to->inputPort();
  const QRectF fromBox = m_from->sceneBox(), toBox = m_to->sceneBox();
  const double dy = b.y() - a.y();
  const double halfLabel = labelSize().width() / 2;
  if (dy > 10) {
    QPainterPath direct = cubic(a, a + QPointF(0, dy / 2), b - QPointF(0, dy / 2), b);
    bool blocked = false;
    for (const QRectF& r : obstacles)
      if (r != fromBox && r != toBox && direct.intersects(r)) blocked = true;
    if (!blocked) {
      m_path = direct;
      m_labelCentre = m_path.pointAtPercent(0.5);
      return;
    }
    // Down a lane left of every box between the ends, the label in the lane.
    double left = std::min(fromBox.left(), toBox.left());
    for (const QRectF& r : obstacles)
      if (r.bottom() > a.y() && r.top() < b.y()) left = std::min(left, r.left());
    const double lane = left - kClearance - halfLabel;
    m_path = QPainterPath(a);
    m_path.cubicTo(a + QPointF(0, kTurn), QPointF(lane, a.y()), QPointF(lane, a.y() + kTurn));
    m_path.lineTo(lane, b.y() - kTurn);
    m_path.cubicTo(QPointF(lane, b.y()), b - QPointF(0, kTurn), b);
    m_labelCentre = QPointF(lane, (a.y() + b.y()) / 2);
  } else {
    // Back up (a loop) or sideways: a U-turn up a lane right of every box between the ends.
    double right = std::max(fromBox.right(), toBox.right());
    for (const QRectF& r : obstacles)
      if (r.bottom() >= toBox.top() && r.top() <= fromBox.bottom()) right = std::max(right, r.right());
    const double lane = right + kClearance + halfLabel;
    m_path = QPainterPath(a);
    m_path.cubicTo(a + QPointF(0, kTurn), QPointF(lane, a.y() + kTurn), QPointF(lane, a.y()));
    m_path.lineTo(lane, b.y());
    m_path.cubicTo(QPointF(lane, b.y() - kTurn), b - QPointF(0, kTurn), b);
    m_labelCentre = QPointF(lane, (a.y() + b.y()) / 2);
  }
}

QSizeF EdgeItem::labelSize() const {
  if (m_label.isEmpty()) return {};
  QFont f;
  f.setPointSizeF(f.pointSizeF() - 1);
  QFontMetricsF fm(f);
  return QSizeF(fm.horizontalAdvance(m_label) + 12, fm.height() + 4);
}

QRectF EdgeItem::labelRect() const {
  if (m_label.isEmpty()) return {};
  const QSizeF s = labelSize();
  return QRectF(m_labelCentre.x() - s.width() / 2, m_labelCentre.y() - s.height() / 2, s.width(),
                s.height());
}

QRectF EdgeItem::boundingRect() const {
  return m_path.boundingRect()
      .adjusted(-kArrowSize, -kArrowSize, kArrowSize, kArrowSize)
      .united(labelRect());
}

QPainterPath EdgeItem::shape() const {
  QPainterPathStroker stroker;
  stroker.setWidth(12);
  QPainterPath s = stroker.createStroke(m_path);
  if (!m_label.isEmpty()) s.addRect(labelRect());
  return s;
}

void EdgeItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  const bool selected = option->state & QStyle::State_Selected;
  QColor color = selected              ? QColor(0xe0, 0x8a, 0x00)
                 : !m_issues.isEmpty() ? QColor(0xd3, 0x2f, 0x2f)
                                       : QColor(0x60, 0x64, 0x70);
  p->setPen(QPen(color, selected ? 2.6 : 1.6));
  p->setBrush(Qt::NoBrush);
  p->drawPath(m_path);

  // The arrow head points along the curve's last tangent.
  const QPointF tip = m_path.pointAtPercent(1.0);
  const double angle = qDegreesToRadians(m_path.angleAtPercent(0.99));
  const QPointF back(-std::cos(angle) * kArrowSize, std::sin(angle) * kArrowSize);
  const QPointF side(-back.y() * 0.5, back.x() * 0.5);
  QPolygonF head{tip, tip + back + side, tip + back - side};
  p->setPen(Qt::NoPen);
  p->setBrush(color);
  p->drawPolygon(head);

  if (!m_label.isEmpty()) {
    QRectF r = labelRect();
    p->setPen(QPen(color, 1));
    p->setBrush(QColor(0xff, 0xff, 0xff, 235));
    p->drawRoundedRect(r, 4, 4);
    QFont f = p->font();
    f.setPointSizeF(f.pointSizeF() - 1);
    p->setFont(f);
    p->setPen(selected ? color : QColor(0x30, 0x30, 0x38));
    p->drawText(r, Qt::AlignCenter, m_label);
  }
}

}  // namespace ragwb
