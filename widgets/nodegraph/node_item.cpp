#include "nodegraph/node_item.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QStyleOptionGraphicsItem>

#include "nodegraph/strings.h"

namespace ragwb {

namespace {

// A node's query as a label: {question} for a variable, a template as it is written.
QString queryLabel(const std::string& query) {
  return query.find('{') == std::string::npos ? QStringLiteral("{%1}").arg(toQString(query)) : toQString(query);
}

constexpr double kPortRadius = 6.0;
constexpr double kBadgeRadius = 10.0;
const QSizeF kNodeSize(200, 64);
const QSizeF kTerminalSize(96, 30);

}  // namespace

NodeItem::NodeItem(const QString& id, Role role) : m_id(id), m_role(role) {
  setFlags(ItemIsMovable | ItemIsSelectable | ItemSendsGeometryChanges);
  setZValue(1);  // above edges
  setCursor(Qt::OpenHandCursor);
  updateToolTip();
}

QColor NodeItem::kindColor(rag::NodeKind kind) {
  switch (kind) {
    case rag::NodeKind::Generation: return QColor(0x2f, 0x6d, 0xb5);
    case rag::NodeKind::Retrieval: return QColor(0x2e, 0x8b, 0x57);
    case rag::NodeKind::Knowledge: return QColor(0x8a, 0x5a, 0x2b);
    case rag::NodeKind::Compression: return QColor(0x7a, 0x4f, 0xa8);
  }
  return QColor(0x60, 0x64, 0x70);
}

void NodeItem::setNode(const rag::WorkflowNode& node) {
  m_kind = node.kind;
  if (node.kind == rag::NodeKind::Generation) {
    m_detail = QStringLiteral("generation · max %1 tokens").arg(node.generation.maxTokens);
    m_summary = QStringLiteral("Generation node. Prompt:\n%1").arg(toQString(node.promptTemplate));
    if (!node.generation.copyFrom.empty()) {  // extractive: say what it copies from
      QString from = toQString(node.generation.copyFrom);
      if (!from.contains(QLatin1Char('{'))) from = QStringLiteral("{%1}").arg(from);  // a bare name
      m_summary += QStringLiteral("\nIts output is a span of %1 (copy floor %2).").arg(from).arg(node.generation.copyFloor);
    }
  } else if (node.kind == rag::NodeKind::Knowledge) {
    m_detail = QStringLiteral("knowledge graph · %1 subgraphs").arg(node.topk);
    m_summary = QStringLiteral("Knowledge-graph retrieval node: the %1 entities of %2, each one's %3-hop "
                               "subgraph (%4 edges per entity), its %5 paths most similar to the query")
                    .arg(node.topk)
                    .arg(queryLabel(node.query))
                    .arg(node.knowledge.hops)
                    .arg(node.knowledge.fanout)
                    .arg(node.knowledge.paths);
  } else if (node.kind == rag::NodeKind::Compression) {
    m_detail = QStringLiteral("extractive · %1 sentence%2").arg(node.topk).arg(node.topk == 1 ? "" : "s");
    m_summary = QStringLiteral("Compression node (RECOMP, extractive): the %1 sentence%2 of {%3} that share "
                               "the most words with %4")
                    .arg(node.topk)
                    .arg(node.topk == 1 ? "" : "s")
                    .arg(toQString(node.compression.passages), queryLabel(node.query));
  } else {
    const QString method = toQString(rag::retrievalMethodName(node.retrieval.method));
    const bool reranked = node.retrieval.rerank != rag::RetrievalRerank::None;
    m_detail = QStringLiteral("%1 · top-%2%3").arg(method).arg(node.topk).arg(reranked ? QStringLiteral(" · reranked") : QString());
    m_summary = QStringLiteral("Retrieval node (%1): the top %2 passages for %3%4%5")
                    .arg(method)
                    .arg(node.topk)
                    .arg(queryLabel(node.query),
                         node.retrieval.nprobe > 0
                             ? QStringLiteral(", %1 clusters probed").arg(node.retrieval.nprobe)
                             : QString(),
                         reranked ? QStringLiteral(", ordered by their BM25 score for it") : QString());
  }
  // An extractive generation shows what it copies from, as a compression shows what it reads.
  m_output = node.kind == rag::NodeKind::Generation
                 ? (node.generation.copyFrom.empty()
                        ? QStringLiteral("→ {%1}").arg(toQString(node.outputVar))
                        : QStringLiteral("copies {%1} → {%2}").arg(toQString(node.generation.copyFrom),
                                                                 toQString(node.outputVar)))
             : node.kind == rag::NodeKind::Compression
                 ? QStringLiteral("{%1} → {%2}").arg(toQString(node.compression.passages), toQString(node.outputVar))
                 : QStringLiteral("%1 → {%2}").arg(queryLabel(node.query), toQString(node.outputVar));
  updateToolTip();
  update();
}

void NodeItem::setIssues(const QStringList& issues) {
  if (issues == m_issues) return;
  prepareGeometryChange();
  m_issues = issues;
  updateToolTip();
  update();
}

void NodeItem::updateToolTip() {
  QString tip = m_role == Role::Node ? m_summary
                : m_role == Role::Start ? QStringLiteral("Where every request enters")
                                        : QStringLiteral("Where a request finishes");
  if (!m_issues.isEmpty())
    tip += QStringLiteral("\n\nProblems:\n• ") + m_issues.join(QStringLiteral("\n• "));
  setToolTip(tip);
}

QRectF NodeItem::box() const {
  QSizeF s = m_role == Role::Node ? kNodeSize : kTerminalSize;
  return QRectF(-s.width() / 2, -s.height() / 2, s.width(), s.height());
}

QPointF NodeItem::inputPort() const { return mapToScene(QPointF(0, box().top())); }
QPointF NodeItem::outputPort() const { return mapToScene(QPointF(0, box().bottom())); }

bool NodeItem::outputPortContains(QPointF scenePos) const {
  if (!hasOutput()) return false;
  QPointF d = scenePos - outputPort();
  return d.x() * d.x() + d.y() * d.y() <= (kPortRadius + 4) * (kPortRadius + 4);
}

QRectF NodeItem::boundingRect() const {
  return box().adjusted(-kBadgeRadius - 2, -kBadgeRadius - 2, kBadgeRadius + 2, kBadgeRadius + 2);
}

void NodeItem::paint(QPainter* p, const QStyleOptionGraphicsItem* option, QWidget*) {
  p->setRenderHint(QPainter::Antialiasing);
  const bool selected = option->state & QStyle::State_Selected;
  const QRectF b = box();
  const QColor accent = m_role == Role::Node ? kindColor(m_kind) : QColor(0x55, 0x55, 0x60);
  const QColor border = selected ? QColor(0xe0, 0x8a, 0x00) : accent;

  if (m_role != Role::Node) {
    p->setPen(QPen(border, selected ? 3 : 1.5));
    p->setBrush(QColor(0xee, 0xee, 0xf2));
    p->drawRoundedRect(b, b.height() / 2, b.height() / 2);
    QFont f = p->font();
    f.setBold(true);
    p->setFont(f);
    p->setPen(accent);
    p->drawText(b, Qt::AlignCenter, m_id);
  } else {
    p->setPen(QPen(border, selected ? 3 : 1.5));
    p->setBrush(Qt::white);
    p->drawRoundedRect(b, 6, 6);
    // The kind's colour as a band on the left.
    QRectF band(b.left(), b.top(), 8, b.height());
    p->setPen(Qt::NoPen);
    p->setBrush(accent);
    p->drawRoundedRect(band, 3, 3);

    QRectF text = b.adjusted(16, 5, -10, -5);
    QFont title = p->font();
    title.setBold(true);
    title.setPointSizeF(title.pointSizeF() + 1);
    p->setFont(title);
    p->setPen(QColor(0x20, 0x20, 0x28));
    const QFontMetricsF tm(title);
    p->drawText(QRectF(text.left(), text.top(), text.width(), tm.height()), Qt::AlignLeft,
                tm.elidedText(m_id, Qt::ElideRight, text.width()));
    QFont small = p->font();
    small.setBold(false);
    small.setPointSizeF(title.pointSizeF() - 2);
    p->setFont(small);
    const QFontMetricsF sm(small);
    double y = text.top() + tm.height() + 1;
    p->setPen(QColor(0x50, 0x50, 0x58));
    p->drawText(QRectF(text.left(), y, text.width(), sm.height()), Qt::AlignLeft,
                sm.elidedText(m_detail, Qt::ElideRight, text.width()));
    p->setPen(accent.darker(120));
    p->drawText(QRectF(text.left(), y + sm.height(), text.width(), sm.height()), Qt::AlignLeft,
                sm.elidedText(m_output, Qt::ElideMiddle, text.width()));
  }

  p->setPen(QPen(Qt::white, 1.5));
  p->setBrush(accent);
  if (hasInput()) p->drawEllipse(QPointF(0, b.top()), kPortRadius, kPortRadius);
  if (hasOutput()) p->drawEllipse(QPointF(0, b.bottom()), kPortRadius, kPortRadius);

  if (!m_issues.isEmpty()) {
    QPointF c(b.right() - 2, b.top() + 2);
    p->setPen(QPen(Qt::white, 1.5));
    p->setBrush(QColor(0xd3, 0x2f, 0x2f));
    p->drawEllipse(c, kBadgeRadius, kBadgeRadius);
    QFont f = p->font();
    f.setBold(true);
    p->setFont(f);
    p->setPen(Qt::white);
    p->drawText(QRectF(c.x() - kBadgeRadius, c.y() - kBadgeRadius, 2 * kBadgeRadius,
                       2 * kBadgeRadius),
                Qt::AlignCenter, m_issues.size() == 1 ? QStringLiteral("!")
                                                      : QString::number(m_issues.size()));
  }
}

QVariant NodeItem::itemChange(GraphicsItemChange change, const QVariant& value) {
  if (change == ItemPositionHasChanged && m_onMoved) m_onMoved();
  return QGraphicsItem::itemChange(change, value);
}

}  // namespace ragwb
