#include "inspectors/kv_tree_bench.h"

#include <QElapsedTimer>
#include <QImage>
#include <QScrollBar>
#include <QTreeView>
#include <algorithm>
#include <random>

#include "inspectors/kv_tree_inspector.h"
#include "inspectors/kv_tree_model.h"

namespace ragwb {

namespace {

const char* const kWords[] = {"the",    "dog",    "is",      "a",       "kind",   "of",       "canine",  "question",
                              "answer", "passage", "retrieve", "context", "hypernym", "member", "part",   "term",
                              "computing", "protocol", "language", "which", "means",  "defined", "as",     "synset"};

}  // namespace

std::vector<rag::KvTreeNode> syntheticKvTree(int nodes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<rag::KvTreeNode> out;
  out.reserve(static_cast<size_t>(std::max(nodes, 0)));
  for (int i = 0; i < nodes; ++i) {
    rag::KvTreeNode n;
    n.id = i;
    n.ns = i < nodes / 10 ? 1 : 0;  // a tenth in a second key space (dependency segments)
    // Parents: near the root early (shared templates), then preferential attachment to recent
    // and popular nodes, so a few subtrees are wide and many are small.
    const int sameNs = n.ns == 1 ? i : i - nodes / 10;
    if (sameNs < 4) {
      n.parent = -1;
    } else {
      const int base = n.ns == 1 ? 0 : nodes / 10;
      const double u = std::uniform_real_distribution<double>(0, 1)(rng);
      n.parent = base + static_cast<int>(u * u * u * sameNs);  // skewed towards the oldest
    }
    const int len = 4 + static_cast<int>(rng() % 61);
    std::string text;
    for (int t = 0; t < len; ++t) {
      n.tokens.push_back(static_cast<int32_t>(rng() % 4096));
      if (t % 2 == 0) text += std::string(t ? " " : "") + kWords[rng() % std::size(kWords)];
    }
    n.text = std::move(text);
    n.depthTokens = (n.parent >= 0 ? out[static_cast<size_t>(n.parent)].depthTokens : 0) + len;
    n.hostTier = rng() % 5 == 0;
    n.locks = rng() % 17 == 0 ? 1 + static_cast<int>(rng() % 3) : 0;
    n.hits = static_cast<int64_t>(rng() % 50);
    n.priority = std::uniform_real_distribution<double>(0, 100)(rng);
    out.push_back(std::move(n));
  }
  return out;
}

QJsonObject KvTreeBenchResult::toJson() const {
  return {{"nodes", nodes},
          {"rows", rows},
          {"folded_rows", foldedRows},
          {"expanded_rows", expandedRows},
          {"frames", frames},
          {"frames_per_s", framesPerSecond},
          {"median_frame_ms", medianFrameMs},
          {"layout_ms", layoutMs},
          {"gui_update_ms", guiUpdateMs}};
}

KvTreeBenchResult benchmarkKvTree(int nodes, int frames, QSize size) {
  KvTreeBenchResult r;
  r.nodes = nodes;
  KvTreeInspector inspector(nullptr);
  inspector.resize(size);
  std::vector<rag::KvTreeNode> tree = syntheticKvTree(nodes);
  inspector.showSnapshot(tree);  // first snapshot: namespaces open
  QTreeView* view = inspector.view();
  // Open three levels, as a user exploring would, then time one more snapshot arriving.
  view->expandToDepth(2);
  QElapsedTimer timer;
  timer.start();
  KvTreeLayout layout = KvTreeModel::layOut(tree, inspector.model()->foldParams(), inspector.model()->unfoldedKeys());
  r.layoutMs = static_cast<double>(timer.nsecsElapsed()) * 1e-6;
  timer.restart();
  inspector.showLayout(std::move(layout));
  r.guiUpdateMs = static_cast<double>(timer.nsecsElapsed()) * 1e-6;

  const KvTreeModel* m = inspector.model();
  std::vector<QModelIndex> stack;
  for (int i = 0; i < m->rowCount(); ++i) stack.push_back(m->index(i, 0));
  while (!stack.empty()) {
    const QModelIndex i = stack.back();
    stack.pop_back();
    ++r.rows;
    if (view->isExpanded(i)) r.expandedRows += 1;
    for (int c = 0; c < m->rowCount(i); ++c) stack.push_back(m->index(c, 0, i));
  }
  r.foldedRows = m->foldedRows();

  QImage image(size, QImage::Format_ARGB32_Premultiplied);
  QScrollBar* bar = view->verticalScrollBar();
  frames = std::max(frames, 1);
  std::vector<double> ms;
  double total = 0;
  for (int f = -1; f < frames; ++f) {  // f = -1 warms up
    bar->setValue(bar->maximum() * std::max(f, 0) / frames);
    timer.restart();
    inspector.render(&image);
    const double t = static_cast<double>(timer.nsecsElapsed()) * 1e-6;
    if (f < 0) continue;
    ms.push_back(t);
    total += t;
  }
  std::sort(ms.begin(), ms.end());
  r.frames = frames;
  r.medianFrameMs = ms[ms.size() / 2];
  r.framesPerSecond = total > 0 ? frames / (total / 1000.0) : 0;
  return r;
}

}  // namespace ragwb
