// The knowledge-graph inspector's drawing: the graph in view (KgGraphModel) with the relation
// filter (KgRelationModel), laid out by Graphviz (kg_layout.h) on Qt's thread pool; the GUI
// thread only builds the layout's input from label metrics and, when it comes back, the scene
// items. Nodes are coloured by kind (synset, lemma, term), the centre is bold, expanded nodes
// are solid and the others dashed; edges take their relation's colour, with the relation's name
// on them; a request's pruned edges are grey and dashed, kept ones thick. Double-click a node to
// expand it, click it to select it; the wheel zooms.
//
//   KgGraphView view(&graph, &relations);
//   connect(&view, &KgGraphView::expandRequested, ...);   // double-click
//   connect(&view, &KgGraphView::layoutApplied, ...);     // after each relayout
#pragma once

#include <QFutureWatcher>
#include <QGraphicsView>
#include <QHash>
#include <vector>

#include "inspectors/kg_graph_model.h"
#include "inspectors/kg_layout.h"

class QGraphicsScene;

namespace ragwb {

class KgGraphView : public QGraphicsView {
  Q_OBJECT
public:
  KgGraphView(KgGraphModel* graph, KgRelationModel* relations, QWidget* parent = nullptr);
  ~KgGraphView() override;

  // The entities and edges now drawn (what the filter lets through), after the last layout.
  int drawnNodes() const { return static_cast<int>(m_nodeItems.size()); }
  int drawnEdges() const { return m_drawnEdges; }
  bool layingOut() const { return m_running; }
  QPointF nodeCentre(int32_t id) const;  // scene coordinates; null point when not drawn
  QString lastError() const { return m_error; }
  // The longest the GUI thread spent turning a layout into scene items (ms), for the demo's report.
  double longestApplyMs() const { return m_longestApplyMs; }
  // The entities of a path to draw highlighted (a request's path row); empty: none.
  void setHighlightedPath(std::vector<int32_t> entities);
  void setSelectedEntity(int32_t id);
  int32_t selectedEntity() const { return m_selected; }

  // Builds the layout input for what the filter shows (GUI thread; pure apart from font metrics).
  KgLayoutInput layoutInput() const;

Q_SIGNALS:
  void entityClicked(int32_t id);
  void expandRequested(int32_t id);
  void layoutApplied();
  void layoutFailed(const QString& message);

protected:
  void mousePressEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;

private:
  void relayout();
  void apply(const KgLayout& layout);
  int32_t entityAt(const QPoint& viewPos) const;
  void restyle();

  KgGraphModel* m_graph;
  KgRelationModel* m_relations;
  QGraphicsScene* m_scene;
  QFutureWatcher<rag::Result<KgLayout>> m_watcher;
  bool m_running = false;
  bool m_again = false;  // the graph changed while a layout ran
  QHash<int32_t, QGraphicsItem*> m_nodeItems;
  int m_drawnEdges = 0;
  std::vector<int32_t> m_highlight;
  int32_t m_selected = 0;
  QString m_error;
  double m_longestApplyMs = 0;
};

}  // namespace ragwb
