#include "inspectors/kg_graph_view.h"

#include <QElapsedTimer>
#include <QFontMetricsF>
#include <QGraphicsPathItem>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QMouseEvent>
#include <QPainter>
#include <QPen>
#include <QWheelEvent>
#include <cmath>
#include <unordered_set>

#include "bridge/background.h"

namespace ragwb {

namespace {

constexpr int kEntityIdKey = 0;  // QGraphicsItem::data key holding a node's entity id
constexpr double kPadX = 10, kPadY = 5;
constexpr int kMaxEdgeLabels = 120;  // beyond this many edges their names would only clutter

// A path item whose bounds are its control points widened by the pen (miter joins included),
// not the outline of its stroke: QGraphicsPathItem (and QGraphicsPolygonItem) strokes the whole
// path with QPainterPathStroker the first time the scene asks for its bounds, which for a
// layout's curved edges, arrow heads and rounded boxes was most of the scene's deferred update
// after each relayout (8.5-9.7 ms of the longest stalls of `--demo-kg`). The shape used for
// hovering and tooltips stays the exact stroke, computed when the mouse asks for it.
class PathItem final : public QGraphicsPathItem {
public:
  using QGraphicsPathItem::QGraphicsPathItem;
  QRectF boundingRect() const override {
    const qreal m = pen().style() == Qt::NoPen ? 0 : pen().widthF() + 1;  // miter limit 2: w; antialiasing: 1
    return path().controlPointRect().adjusted(-m, -m, m, m);
  }
};

QColor kindColour(rag::KgEntityKind k) {
  switch (k) {
    case rag::KgEntityKind::Synset: return QColor(0xdd, 0xe8, 0xf7);
    case rag::KgEntityKind::Lemma: return QColor(0xe2, 0xf2, 0xdc);
    case rag::KgEntityKind::Term: return QColor(0xfc, 0xe8, 0xd2);
  }
  return Qt::white;
}

QString label(const rag::KgEntity& e) {
  QString name = QString::fromStdString(e.name);
  if (name.size() > 28) name = name.left(27) + QChar(0x2026);
  return name;
}

}  // namespace

KgGraphView::KgGraphView(KgGraphModel* graph, KgRelationModel* relations, QWidget* parent)
    : QGraphicsView(parent), m_graph(graph), m_relations(relations), m_scene(new QGraphicsScene(this)) {
  // Every layout replaces all items: an index (the default BSP tree) would be rebuilt each time.
  m_scene->setItemIndexMethod(QGraphicsScene::NoIndex);
  setScene(m_scene);
  setRenderHint(QPainter::Antialiasing);
  setDragMode(QGraphicsView::ScrollHandDrag);
  setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  setBackgroundBrush(QColor(0xfb, 0xfb, 0xfb));
  connect(m_graph, &KgGraphModel::graphChanged, this, &KgGraphView::relayout);
  connect(m_relations, &KgRelationModel::filterChanged, this, &KgGraphView::relayout);
  connect(&m_watcher, &QFutureWatcher<rag::Result<KgLayout>>::finished, this, [this] {
    m_running = false;
    rag::Result<KgLayout> l = m_watcher.result();
    if (m_again) {  // the graph changed meanwhile: this layout is stale
      m_again = false;
      relayout();
      return;
    }
    if (!l) {
      m_error = QString::fromStdString(l.status().message());
      Q_EMIT layoutFailed(m_error);
      return;
    }
    m_error.clear();
    apply(*l);
  });
}

KgGraphView::~KgGraphView() { m_watcher.waitForFinished(); }

KgLayoutInput KgGraphView::layoutInput() const {
  KgLayoutInput in;
  const QFontMetricsF fm(font());
  std::unordered_set<int32_t> shown;
  for (const KgViewEdge& e : m_graph->edges()) {
    if (!m_relations->isShown(e.edge.relation)) continue;
    in.edges.push_back({e.edge.src, e.edge.dst});
    shown.insert(e.edge.src);
    shown.insert(e.edge.dst);
  }
  for (const rag::KgEntity& e : m_graph->entities()) {
    // An entity whose every edge is filtered out goes too (the centre always stays).
    if (e.id != m_graph->centre() && !shown.count(e.id)) continue;
    in.nodes.push_back({.id = e.id,
                        .width = fm.horizontalAdvance(label(e)) + 2 * kPadX,
                        .height = fm.height() + 2 * kPadY});
  }
  return in;
}

void KgGraphView::relayout() {
  if (m_running) {
    m_again = true;
    return;
  }
  m_running = true;
  m_watcher.setFuture(runInBackground(&layOutKnowledgeGraph, layoutInput()));
}

void KgGraphView::apply(const KgLayout& layout) {
  QElapsedTimer clock;
  clock.start();
  m_scene->clear();
  m_nodeItems.clear();
  m_drawnEdges = 0;
  const QFontMetricsF fm(font());
  const bool labels = static_cast<int>(layout.edges.size()) <= kMaxEdgeLabels;
  // Edges first (under the nodes); the model's edges in the layout's order (the same filter).
  size_t le = 0;
  for (const KgViewEdge& e : m_graph->edges()) {
    if (!m_relations->isShown(e.edge.relation)) continue;
    if (le >= layout.edges.size()) break;
    const KgLayout::Edge& l = layout.edges[le++];
    QColor c = KgRelationModel::colour(e.edge.relation);
    QPen pen(c, 1.4);
    if (e.use == KgEdgeUse::Kept) pen.setWidthF(2.6);
    if (e.use == KgEdgeUse::Pruned) {
      pen.setColor(QColor(0xa8, 0xa8, 0xa8));
      pen.setStyle(Qt::DashLine);
    }
    auto* path = new PathItem(l.path);
    path->setPen(pen);
    m_scene->addItem(path);
    path->setZValue(0);
    path->setToolTip(QStringLiteral("%1 —%2→ %3%4")
                         .arg(QString::fromStdString(m_graph->entity(e.edge.src) ? m_graph->entity(e.edge.src)->name : ""),
                              QString::fromStdString(e.edge.relation),
                              QString::fromStdString(m_graph->entity(e.edge.dst) ? m_graph->entity(e.edge.dst)->name : ""),
                              e.use == KgEdgeUse::Plain ? QString()
                                                        : QStringLiteral(" (%1, best path score %2)")
                                                              .arg(e.use == KgEdgeUse::Kept ? tr("kept") : tr("pruned"))
                                                              .arg(e.score, 0, 'f', 3)));
    // The arrow head.
    const QPointF d = l.head - l.headFrom;
    const double len = std::hypot(d.x(), d.y());
    if (len > 0.01) {
      const QPointF u = d / len, n(-u.y(), u.x());
      QPolygonF head;
      head << l.head << l.head - u * 8 + n * 3.5 << l.head - u * 8 - n * 3.5 << l.head;
      QPainterPath headPath;
      headPath.addPolygon(head);
      auto* h = new PathItem(headPath);
      h->setPen(QPen(pen.color(), 1));
      h->setBrush(pen.color());
      m_scene->addItem(h);
      h->setZValue(0);
    }
    if (labels) {
      auto* t = m_scene->addSimpleText(QString::fromStdString(e.edge.relation));
      QFont f = font();
      f.setPointSizeF(std::max(6.0, f.pointSizeF() * 0.8));
      t->setFont(f);
      t->setBrush(e.use == KgEdgeUse::Pruned ? QColor(0x90, 0x90, 0x90) : c.darker(140));
      const QPointF mid = l.path.pointAtPercent(0.5);
      t->setPos(mid - QPointF(t->boundingRect().width() / 2, t->boundingRect().height() / 2));
      t->setZValue(1);
    }
    ++m_drawnEdges;
  }
  for (const KgLayout::Node& n : layout.nodes) {
    const rag::KgEntity* e = m_graph->entity(n.id);
    if (!e) continue;
    const QString text = label(*e);
    const double w = fm.horizontalAdvance(text) + 2 * kPadX, h = fm.height() + 2 * kPadY;
    auto* box = new PathItem;
    QPainterPath shape;
    shape.addRoundedRect(QRectF(-w / 2, -h / 2, w, h), 6, 6);
    box->setPath(shape);
    box->setBrush(kindColour(e->kind));
    box->setPos(n.centre);
    box->setZValue(2);
    box->setData(kEntityIdKey, n.id);
    box->setToolTip(tr("%1 (%2, entity %3)%4")
                        .arg(QString::fromStdString(e->name), QString::fromLatin1(rag::kgEntityKindName(e->kind)))
                        .arg(n.id)
                        .arg(m_graph->isExpanded(n.id) ? QString() : tr("\nDouble-click to expand")));
    auto* t = new QGraphicsSimpleTextItem(text, box);
    t->setPos(-w / 2 + kPadX, -h / 2 + kPadY);
    m_scene->addItem(box);
    m_nodeItems.insert(n.id, box);
  }
  restyle();
  m_scene->setSceneRect(layout.bounds.adjusted(-40, -40, 40, 40));
  fitInView(m_scene->sceneRect(), Qt::KeepAspectRatio);
  if (transform().m11() > 1.5) setTransform(QTransform::fromScale(1.5, 1.5));  // small graphs stay readable, not huge
  m_longestApplyMs = std::max(m_longestApplyMs, static_cast<double>(clock.nsecsElapsed()) * 1e-6);
  Q_EMIT layoutApplied();
}

void KgGraphView::restyle() {
  std::unordered_set<int32_t> hi(m_highlight.begin(), m_highlight.end());
  for (auto it = m_nodeItems.begin(); it != m_nodeItems.end(); ++it) {
    auto* box = static_cast<QGraphicsPathItem*>(it.value());
    const int32_t id = it.key();
    QPen pen(QColor(0x44, 0x44, 0x44), id == m_graph->centre() ? 2.4 : 1.0);
    if (!m_graph->isExpanded(id) && !m_graph->fromRequest()) pen.setStyle(Qt::DashLine);
    if (hi.count(id)) pen = QPen(QColor(0xd6, 0x27, 0x28), 2.6);
    if (id == m_selected) pen = QPen(QColor(0x10, 0x60, 0xd0), 3.0);
    box->setPen(pen);
  }
}

void KgGraphView::setHighlightedPath(std::vector<int32_t> entities) {
  m_highlight = std::move(entities);
  restyle();
}

void KgGraphView::setSelectedEntity(int32_t id) {
  m_selected = id;
  restyle();
}

QPointF KgGraphView::nodeCentre(int32_t id) const {
  auto it = m_nodeItems.find(id);
  return it == m_nodeItems.end() ? QPointF() : it.value()->pos();
}

int32_t KgGraphView::entityAt(const QPoint& viewPos) const {
  for (QGraphicsItem* item : items(viewPos)) {
    for (QGraphicsItem* i = item; i; i = i->parentItem())
      if (i->data(kEntityIdKey).isValid()) return i->data(kEntityIdKey).toInt();
  }
  return 0;
}

void KgGraphView::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) {
    if (const int32_t id = entityAt(e->position().toPoint())) {
      setSelectedEntity(id);
      Q_EMIT entityClicked(id);
    }
  }
  QGraphicsView::mousePressEvent(e);
}

void KgGraphView::mouseDoubleClickEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) {
    if (const int32_t id = entityAt(e->position().toPoint())) {
      Q_EMIT expandRequested(id);
      return;
    }
  }
  QGraphicsView::mouseDoubleClickEvent(e);
}

void KgGraphView::wheelEvent(QWheelEvent* e) {
  const double f = std::pow(1.0015, e->angleDelta().y());
  scale(f, f);
}

}  // namespace ragwb
