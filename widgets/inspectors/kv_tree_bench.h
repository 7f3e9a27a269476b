// A synthetic prefix KV tree shaped like a serving run's (a few namespaces; shared template
// prefixes near the root, then passages and questions branching below, skewed fan-out), and the
// KV-tree inspector's frame-rate benchmark over it (`ragraph-workbench --bench-kvtree`).
//
//   QApplication app(argc, argv);   // the benchmark paints a widget: needs a QApplication
//   ragwb::KvTreeBenchResult r = ragwb::benchmarkKvTree(20000);
//   std::cout << QJsonDocument(r.toJson()).toJson().toStdString();
#pragma once

#include <QJsonObject>
#include <QSize>
#include <vector>

#include "rag/engine.h"

namespace ragwb {

// `nodes` nodes (ids 0..nodes-1, parents before children), edges of 4-64 tokens with readable
// text, hits, locks, both tiers and priorities. Deterministic for a given seed.
std::vector<rag::KvTreeNode> syntheticKvTree(int nodes, uint64_t seed = 1);

struct KvTreeBenchResult {
  int nodes = 0;
  int rows = 0;             // rows in the model after folding (all levels)
  int foldedRows = 0;
  int expandedRows = 0;     // rows the view has open
  int frames = 0;
  double framesPerSecond = 0;  // frames painted (scrolling through the open tree) per second
  double medianFrameMs = 0;
  double layoutMs = 0;     // laying the whole tree out in rows (off the GUI thread in the inspector)
  double guiUpdateMs = 0;  // showing that layout: model reset, open rows re-opened (GUI thread)
  QJsonObject toJson() const;
};

KvTreeBenchResult benchmarkKvTree(int nodes = 20000, int frames = 120, QSize size = {1200, 800});

}  // namespace ragwb
