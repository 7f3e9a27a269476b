// The knowledge-graph inspector's layout engine: Graphviz (libgvc: neato's stress majorization
// with overlap removal, sfdp beyond a few hundred nodes) places the nodes and routes the edges
// as splines. A pure function of its input, callable on any thread; calls are serialized,
// since Graphviz keeps global state.
//
//   KgLayoutInput in;
//   in.nodes.push_back({.id = 42, .width = 80, .height = 24});   // points, from the label's metrics
//   in.edges.push_back({.src = 42, .dst = 7});
//   Result<KgLayout> l = layOutKnowledgeGraph(in);   // l->nodes[i].centre, l->edges[j].path
#pragma once

#include <QPainterPath>
#include <QPointF>
#include <QRectF>
#include <QString>
#include <cstdint>
#include <vector>

#include "rag/status.h"

namespace ragwb {

struct KgLayoutInput {
  struct Node {
    int32_t id = 0;
    double width = 60;   // points
    double height = 22;
  };
  struct Edge {
    int32_t src = 0;
    int32_t dst = 0;
  };
  std::vector<Node> nodes;
  std::vector<Edge> edges;
};

struct KgLayout {
  struct Node {
    int32_t id = 0;
    QPointF centre;  // scene coordinates (y down)
  };
  struct Edge {
    int32_t src = 0;
    int32_t dst = 0;
    QPainterPath path;  // from src's border to dst's border
    QPointF head;       // where the arrow head points (dst's border)
    QPointF headFrom;   // a point before it, for the arrow's direction
  };
  std::vector<Node> nodes;  // in input order
  std::vector<Edge> edges;  // in input order
  QRectF bounds;
  QString engine;           // "neato" | "sfdp"
};

// InvalidArgument for an edge naming a node the input lacks or a duplicate node id; Internal
// with Graphviz's message when its layout fails.
rag::Result<KgLayout> layOutKnowledgeGraph(const KgLayoutInput& input);

}  // namespace ragwb
