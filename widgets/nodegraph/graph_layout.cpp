#include "nodegraph/graph_layout.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nodegraph/strings.h"

namespace ragwb {

namespace {

constexpr const char* kLayoutFormat = "ragraph-layout";

}  // namespace

QHash<QString, QPointF> layeredLayout(const rag::WorkflowGraph& graph) {
  const std::string start(rag::kStart), end(rag::kEnd);
  std::map<std::string, std::vector<std::string>> out;  // in edge order
  for (const rag::WorkflowEdge& e : graph.edges()) out[e.from].push_back(e.to);

  // Loop-closing edges: those reaching a vertex still on the depth-first stack.
  std::set<std::pair<std::string, std::string>> back;
  std::set<std::string> visited, onStack;
  std::function<void(const std::string&)> dfs = [&](const std::string& v) {
    visited.insert(v);
    onStack.insert(v);
    for (const std::string& w : out[v]) {
      if (onStack.count(w)) back.insert({v, w});
      else if (!visited.count(w)) dfs(w);
    }
    onStack.erase(v);
  };
  dfs(start);
  for (const rag::WorkflowNode& n : graph.nodes())
    if (!visited.count(n.id)) dfs(n.id);

  // Longest-path layers over the remaining edges (a DAG); repeated relaxation is fine for the
  // handful of nodes a workflow has, and the bound guards against a cycle missed above.
  std::map<std::string, int> layer;
  for (const rag::WorkflowNode& n : graph.nodes()) layer[n.id] = 1;
  layer[start] = 0;
  for (size_t round = 0; round <= graph.nodes().size(); ++round) {
    bool changed = false;
    for (const rag::WorkflowEdge& e : graph.edges()) {
      if (back.count({e.from, e.to}) || e.to == end || !layer.count(e.from) ||
          !layer.count(e.to) || e.to == start)
        continue;
      if (layer[e.to] < layer[e.from] + 1) {
        layer[e.to] = layer[e.from] + 1;
        changed = true;
      }
    }
    if (!changed) break;
  }
  int last = 0;
  for (const auto& [id, l] : layer) last = std::max(last, l);
  layer[end] = last + 1;

  std::map<int, std::vector<std::string>> rows;
  rows[0].push_back(start);
  for (const rag::WorkflowNode& n : graph.nodes()) rows[layer[n.id]].push_back(n.id);
  rows[last + 1].push_back(end);

  QHash<QString, QPointF> positions;
  for (const auto& [l, ids] : rows) {
    double x0 = -(static_cast<double>(ids.size()) - 1.0) * kColumnSpacing / 2.0;
    for (size_t i = 0; i < ids.size(); ++i)
      positions.insert(toQString(ids[i]), QPointF(x0 + static_cast<double>(i) * kColumnSpacing,
                                           l * kLayerSpacing));
  }
  return positions;
}

std::filesystem::path layoutPathFor(const std::filesystem::path& workflowPath) {
  std::filesystem::path p = workflowPath;
  p += ".layout.json";
  return p;
}

rag::Result<QHash<QString, QPointF>> readLayout(const std::filesystem::path& layoutPath) {
  const std::string name = layoutPath.string();
  QFile f(toQString(name));
  if (!f.exists()) return rag::Status::notFound("no layout file " + name);
  if (!f.open(QIODevice::ReadOnly))
    return rag::Status::ioError("cannot read " + name + ": " + f.errorString().toStdString());
  QJsonParseError err;
  QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &err);
  if (doc.isNull())
    return rag::Status::corrupt(name + " is not JSON: " + err.errorString().toStdString());
  QJsonObject root = doc.object();
  if (root.value("format").toString() != kLayoutFormat || root.value("version").toInt() != 1 ||
      !root.value("positions").isObject())
    return rag::Status::corrupt(name + " is not a version 1 ragraph-layout file");
  QHash<QString, QPointF> positions;
  const QJsonObject ps = root.value("positions").toObject();
  for (auto it = ps.begin(); it != ps.end(); ++it) {
    QJsonArray xy = it.value().toArray();
    if (xy.size() != 2 || !xy[0].isDouble() || !xy[1].isDouble())
      return rag::Status::corrupt(name + ": the position of \"" + it.key().toStdString() +
                                  "\" is not [x, y]");
    positions.insert(it.key(), QPointF(xy[0].toDouble(), xy[1].toDouble()));
  }
  return positions;
}

rag::Status writeLayout(const std::filesystem::path& layoutPath,
                        const QHash<QString, QPointF>& positions) {
  QJsonObject ps;
  for (auto it = positions.begin(); it != positions.end(); ++it)
    ps.insert(it.key(), QJsonArray{it.value().x(), it.value().y()});
  QJsonObject root{{"format", kLayoutFormat}, {"version", 1}, {"positions", ps}};
  QSaveFile f(toQString(layoutPath.string()));
  if (!f.open(QIODevice::WriteOnly) || f.write(QJsonDocument(root).toJson()) < 0 || !f.commit())
    return rag::Status::ioError("cannot write " + layoutPath.string() + ": " +
                                f.errorString().toStdString());
  return rag::Status::ok();
}

}  // namespace ragwb
