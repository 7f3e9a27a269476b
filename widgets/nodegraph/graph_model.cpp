#include "nodegraph/graph_model.h"

#include <QUndoCommand>
#include <algorithm>
#include <set>

#include "nodegraph/graph_layout.h"
#include "nodegraph/strings.h"

namespace ragwb {

namespace {

bool isTerminal(const QString& id) {
  return id == toQString(rag::kStart) || id == toQString(rag::kEnd);
}

// The graph with `meta`'s settings and these nodes and edges. WorkflowGraph has builders only,
// so every edit rebuilds it; addNode stores each node as given, so nothing is lost (before it
// did, a knowledge node came back from an edit as a retrieval node).
rag::WorkflowGraph rebuilt(const rag::WorkflowGraph& meta,
                           const std::vector<rag::WorkflowNode>& nodes,
                           const std::vector<rag::WorkflowEdge>& edges) {
  rag::WorkflowGraph g(meta.name(), meta.description());
  g.setAnswerVar(meta.answerVar());
  g.setMaxNodeRuns(meta.maxNodeRuns());
  for (const rag::WorkflowNode& n : nodes) g.addNode(n);
  for (const rag::WorkflowEdge& e : edges) g.addEdge(e.from, e.to, e.when);
  return g;
}

// Which node kinds have `p`.
bool propertyBelongsTo(GraphModel::NodeProperty p, rag::NodeKind k) {
  using P = GraphModel::NodeProperty;
  using K = rag::NodeKind;
  switch (p) {
    case P::OutputVar: return true;
    case P::Prompt:
    case P::MaxTokens:
    case P::Temperature:
    case P::Stop:
    case P::CopyFrom:
    case P::CopyFloor: return k == K::Generation;
    case P::Query:
    case P::TopK: return k != K::Generation;
    case P::NProbe:
    case P::Method:
    case P::Rerank: return k == K::Retrieval;
    case P::Passages: return k == K::Compression;
  }
  return false;
}

std::string propertyOwners(GraphModel::NodeProperty p) {
  std::string out;
  for (rag::NodeKind k : rag::kAllNodeKinds)
    if (propertyBelongsTo(p, k)) out += (out.empty() ? "" : ", ") + std::string(rag::nodeKindName(k));
  return out;
}

bool sameIssues(const std::vector<rag::WorkflowIssue>& a, const std::vector<rag::WorkflowIssue>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.node == y.node && x.edge == y.edge && x.message == y.message;
  });
}

rag::Status unknownNode(const QString& id) {
  return rag::Status::invalidArgument("there is no node \"" + id.toStdString() + "\"");
}

rag::Status unknownEdge(int index, size_t count) {
  return rag::Status::invalidArgument("there is no edge " + std::to_string(index) + " (the graph has " +
                                      std::to_string(count) + " edges)");
}

rag::WorkflowNode* findIn(std::vector<rag::WorkflowNode>& nodes, const QString& id) {
  auto it = std::find_if(nodes.begin(), nodes.end(),
                         [&](const rag::WorkflowNode& n) { return toQString(n.id) == id; });
  return it == nodes.end() ? nullptr : &*it;
}

// Reads an integer property value; InvalidArgument naming the property otherwise.
rag::Result<int64_t> integerValue(const QVariant& v, int64_t min, const char* what) {
  bool ok = false;
  qlonglong x = v.toLongLong(&ok);
  if (!ok || x < min)
    return rag::Status::invalidArgument(std::string(what) + " must be an integer >= " +
                                        std::to_string(min));
  return static_cast<int64_t>(x);
}

}  // namespace

// One user intent: the document before and after it. Commands with the same non-empty merge
// key merge when pushed one after the other (the later "after" wins).
class GraphEditCommand : public QUndoCommand {
public:
  GraphEditCommand(GraphModel* model, GraphDocument before, GraphDocument after,
                   const QString& text, QString mergeKey)
      : QUndoCommand(text), m_model(model), m_before(std::move(before)),
        m_after(std::move(after)), m_mergeKey(std::move(mergeKey)) {}

  void redo() override { m_model->apply(m_after); }
  void undo() override { m_model->apply(m_before); }
  int id() const override { return m_mergeKey.isEmpty() ? -1 : kMergeId; }
  bool mergeWith(const QUndoCommand* other) override {
    const auto* o = static_cast<const GraphEditCommand*>(other);
    if (o->m_mergeKey != m_mergeKey) return false;
    m_after = o->m_after;
    setObsolete(m_after == m_before);  // moved back to where it was: nothing to undo
    return true;
  }

private:
  static constexpr int kMergeId = 0x52477261;  // "RGra"
  GraphModel* m_model;
  GraphDocument m_before, m_after;
  QString m_mergeKey;
};

GraphModel::GraphModel(QObject* parent) : QObject(parent), m_undo(new QUndoStack(this)) {
  m_doc.positions = layeredLayout(m_doc.graph);
  m_issues = m_doc.graph.issues();
}

const rag::WorkflowNode* GraphModel::node(const QString& id) const {
  return m_doc.graph.findNode(id.toStdString());
}

QStringList GraphModel::nodeIssues(const QString& id) const {
  QStringList out;
  for (const rag::WorkflowIssue& i : m_issues)
    if (toQString(i.node) == id) out << toQString(i.message);
  return out;
}

QStringList GraphModel::edgeIssues(int edge) const {
  QStringList out;
  for (const rag::WorkflowIssue& i : m_issues)
    if (i.edge == edge) out << toQString(i.message);
  return out;
}

QStringList GraphModel::knownVariables() const {
  QStringList vars{toQString(rag::kQuestionVar)};
  for (const rag::WorkflowNode& n : m_doc.graph.nodes())
    if (!vars.contains(toQString(n.outputVar))) vars << toQString(n.outputVar);
  vars.sort();
  return vars;
}

QString GraphModel::uniqueNodeId(const QString& base) const {
  if (!node(base) && !isTerminal(base)) return base;
  for (int i = 2;; ++i)
    if (!node(base + QString::number(i))) return base + QString::number(i);
}

rag::WorkflowNode GraphModel::defaultNode(rag::NodeKind kind, const QString& id) {
  rag::WorkflowNode n;
  n.id = id.toStdString();
  n.kind = kind;
  if (kind == rag::NodeKind::Generation) {
    n.promptTemplate = "{docs}Question: {question}\nAnswer:";
    n.outputVar = "answer";
    n.generation.stop = {"\n"};
  } else if (kind == rag::NodeKind::Knowledge) {
    n.topk = 5;
    n.query = std::string(rag::kQuestionVar);
    n.outputVar = "graph";
  } else if (kind == rag::NodeKind::Compression) {
    n.topk = 1;
    n.query = std::string(rag::kQuestionVar);
    n.compression.passages = "docs";
    n.outputVar = "summary";
  } else {
    n.topk = 5;
    n.query = std::string(rag::kQuestionVar);
    n.outputVar = "docs";
  }
  return n;
}

rag::EdgeCondition GraphModel::defaultCondition(rag::ConditionKind kind, int edge) const {
  const auto& edges = m_doc.graph.edges();
  const rag::WorkflowNode* from =
      edge >= 0 && size_t(edge) < edges.size() ? m_doc.graph.findNode(edges[size_t(edge)].from)
                                               : nullptr;
  std::string var = from ? from->outputVar : std::string(rag::kQuestionVar);
  switch (kind) {
    case rag::ConditionKind::Always: return rag::EdgeCondition::always();
    case rag::ConditionKind::Empty: return rag::EdgeCondition::empty(var);
    case rag::ConditionKind::NonEmpty: return rag::EdgeCondition::nonEmpty(var);
    case rag::ConditionKind::Contains: return rag::EdgeCondition::contains(var, "DONE");
    case rag::ConditionKind::RunsBelow:
      return rag::EdgeCondition::runsBelow(from ? from->id : std::string(), 3);
  }
  return {};
}

// ---- edits -------------------------------------------------------------------------------

rag::Status GraphModel::edit(const QString& text, const QString& mergeKey,
                             const std::function<rag::Status(Parts&)>& mutate) {
  Parts parts{m_doc.graph.nodes(), m_doc.graph.edges(), m_doc.positions};
  RAG_RETURN_IF_ERROR(mutate(parts));
  push(text, mergeKey, GraphDocument{rebuilt(m_doc.graph, parts.nodes, parts.edges), std::move(parts.positions)});
  return rag::Status::ok();
}

// An edit that changes nothing pushes nothing.
void GraphModel::push(const QString& text, const QString& mergeKey, GraphDocument after) {
  if (after == m_doc) return;
  m_undo->push(new GraphEditCommand(this, m_doc, std::move(after), text, mergeKey));
}

rag::Status GraphModel::setGraphProperty(GraphProperty property, const QString& value) {
  GraphDocument after = m_doc;
  const std::string trimmed = value.trimmed().toStdString();  // names; a description keeps its spaces
  switch (property) {
    case GraphProperty::Name:
      if (trimmed.empty())
        return rag::Status::invalidArgument("a workflow needs a name (it names the file and the runs)");
      after.graph.setName(trimmed);
      push(tr("Rename workflow"), QStringLiteral("graph:name"), std::move(after));
      break;
    case GraphProperty::Description:
      after.graph.setDescription(value.toStdString());
      push(tr("Edit description"), QStringLiteral("graph:description"), std::move(after));
      break;
    case GraphProperty::AnswerVar:
      if (trimmed.empty())
        return rag::Status::invalidArgument("the answer variable cannot be empty: name the variable "
                                            "whose value at END is the answer, e.g. answer");
      after.graph.setAnswerVar(trimmed);
      push(tr("Set answer variable"), QStringLiteral("graph:answer"), std::move(after));
      break;
  }
  return rag::Status::ok();
}

rag::Status GraphModel::addNode(rag::WorkflowNode n, QPointF pos) {
  const QString id = toQString(n.id);
  if (id.isEmpty() || isTerminal(id) || node(id))
    return rag::Status::invalidArgument("a new node needs an id that is not empty, START, END "
                                        "or the id of another node; got \"" + n.id + "\"");
  return edit(tr("Add %1").arg(id), {}, [&](Parts& p) {
    p.nodes.push_back(std::move(n));
    p.positions.insert(id, pos);
    return rag::Status::ok();
  });
}

rag::Status GraphModel::removeNode(const QString& id) { return removeItems({id}, {}); }

rag::Status GraphModel::removeEdge(int index) { return removeItems({}, {index}); }

rag::Status GraphModel::removeItems(const QStringList& nodes, const QList<int>& edges) {
  for (const QString& id : nodes)
    if (!node(id)) return unknownNode(id);
  for (int e : edges)
    if (e < 0 || size_t(e) >= m_doc.graph.edges().size())
      return unknownEdge(e, m_doc.graph.edges().size());
  QString text = nodes.size() == 1 && edges.isEmpty() ? tr("Remove %1").arg(nodes.front())
                 : nodes.isEmpty() && edges.size() == 1 ? tr("Remove edge")
                                                         : tr("Remove selection");
  return edit(text, {}, [&](Parts& p) {
    std::erase_if(p.nodes, [&](const rag::WorkflowNode& n) { return nodes.contains(toQString(n.id)); });
    std::vector<rag::WorkflowEdge> kept;
    for (size_t i = 0; i < p.edges.size(); ++i) {
      const rag::WorkflowEdge& e = p.edges[i];
      if (!edges.contains(int(i)) && !nodes.contains(toQString(e.from)) && !nodes.contains(toQString(e.to)))
        kept.push_back(e);
    }
    p.edges = std::move(kept);
    for (const QString& id : nodes) p.positions.remove(id);
    return rag::Status::ok();
  });
}

rag::Status GraphModel::renameNode(const QString& id, const QString& newId) {
  if (!node(id)) return unknownNode(id);
  if (newId == id) return rag::Status::ok();
  if (newId.isEmpty() || isTerminal(newId) || node(newId))
    return rag::Status::invalidArgument("cannot rename \"" + id.toStdString() + "\" to \"" +
                                        newId.toStdString() +
                                        "\": ids must be unique and not empty, START or END");
  return edit(tr("Rename %1 to %2").arg(id, newId), {}, [&](Parts& p) {
    const std::string from = id.toStdString(), to = newId.toStdString();
    findIn(p.nodes, id)->id = to;
    for (rag::WorkflowEdge& e : p.edges) {
      if (e.from == from) e.from = to;
      if (e.to == from) e.to = to;
      if (e.when.kind == rag::ConditionKind::RunsBelow && e.when.node == from) e.when.node = to;
    }
    p.positions.insert(newId, p.positions.take(id));
    return rag::Status::ok();
  });
}

rag::Status GraphModel::setNodeProperty(const QString& id, NodeProperty property,
                                        const QVariant& value) {
  const rag::WorkflowNode* current = node(id);
  if (!current) return unknownNode(id);
  if (!propertyBelongsTo(property, current->kind))
    return rag::Status::invalidArgument("\"" + id.toStdString() + "\" is a " +
                                        std::string(rag::nodeKindName(current->kind)) +
                                        " node; that property belongs to " + propertyOwners(property) + " nodes");

  rag::WorkflowNode n = *current;
  switch (property) {
    case NodeProperty::OutputVar: n.outputVar = value.toString().toStdString(); break;
    case NodeProperty::Prompt: n.promptTemplate = value.toString().toStdString(); break;
    case NodeProperty::Query: n.query = value.toString().toStdString(); break;
    case NodeProperty::Passages: n.compression.passages = value.toString().toStdString(); break;
    case NodeProperty::MaxTokens: {
      RAG_ASSIGN_OR_RETURN(n.generation.maxTokens, integerValue(value, 1, "max tokens"));
      break;
    }
    case NodeProperty::TopK: {
      RAG_ASSIGN_OR_RETURN(n.topk, integerValue(value, 1, "top-k"));
      break;
    }
    case NodeProperty::NProbe: {
      RAG_ASSIGN_OR_RETURN(n.retrieval.nprobe, integerValue(value, 0, "nprobe"));
      break;
    }
    case NodeProperty::Method: {
      const std::optional<rag::RetrievalMethod> m = rag::retrievalMethodFromName(value.toString().toStdString());
      if (!m)
        return rag::Status::invalidArgument("\"" + value.toString().toStdString() +
                                            "\" is not a retrieval method; use dense, bm25 or hybrid");
      n.retrieval.method = *m;
      break;
    }
    case NodeProperty::Rerank: {
      const std::optional<rag::RetrievalRerank> r = rag::retrievalRerankFromName(value.toString().toStdString());
      if (!r)
        return rag::Status::invalidArgument("\"" + value.toString().toStdString() + "\" is not a rerank; use none or bm25");
      n.retrieval.rerank = *r;
      break;
    }
    case NodeProperty::Temperature: {
      bool ok = false;
      double t = value.toDouble(&ok);
      if (!ok || !std::isfinite(t) || t < 0)
        return rag::Status::invalidArgument("temperature must be a finite number >= 0");
      n.generation.temperature = t;
      break;
    }
    case NodeProperty::Stop: {
      n.generation.stop.clear();
      for (const QString& s : value.toStringList()) n.generation.stop.push_back(s.toStdString());
      break;
    }
    case NodeProperty::CopyFrom: {
      n.generation.copyFrom = value.toString().trimmed().toStdString();
      break;
    }
    case NodeProperty::CopyFloor: {
      bool ok = false;
      const double f = value.toDouble(&ok);
      if (!ok || !(f >= 0 && f <= 1)) return rag::Status::invalidArgument("copy floor must be a number in [0, 1]");
      n.generation.copyFloor = f;
      break;
    }
  }
  const QString key = QStringLiteral("property:%1:%2").arg(id).arg(int(property));
  return edit(tr("Edit %1").arg(id), key, [&](Parts& p) {
    *findIn(p.nodes, id) = n;
    return rag::Status::ok();
  });
}

rag::Status GraphModel::moveNode(const QString& id, QPointF pos) {
  if (!node(id) && !isTerminal(id)) return unknownNode(id);
  return edit(tr("Move %1").arg(id), QStringLiteral("move:") + id, [&](Parts& p) {
    p.positions.insert(id, pos);
    return rag::Status::ok();
  });
}

rag::Status GraphModel::addEdge(const QString& from, const QString& to, rag::EdgeCondition when) {
  const QString start = toQString(rag::kStart), end = toQString(rag::kEnd);
  if (from != start && !node(from))
    return rag::Status::invalidArgument("an edge must leave START or a node; \"" +
                                        from.toStdString() + "\" is neither");
  if (to != end && !node(to))
    return rag::Status::invalidArgument("an edge must reach END or a node; \"" +
                                        to.toStdString() + "\" is neither");
  return edit(tr("Connect %1 to %2").arg(from, to), {}, [&](Parts& p) {
    p.edges.push_back({from.toStdString(), to.toStdString(), std::move(when)});
    return rag::Status::ok();
  });
}

rag::Status GraphModel::setEdgeCondition(int index, rag::EdgeCondition when) {
  if (index < 0 || size_t(index) >= m_doc.graph.edges().size())
    return unknownEdge(index, m_doc.graph.edges().size());
  return edit(tr("Edit condition"), QStringLiteral("condition:%1").arg(index), [&](Parts& p) {
    p.edges[size_t(index)].when = std::move(when);
    return rag::Status::ok();
  });
}

rag::Status GraphModel::moveEdge(int index, int newIndex) {
  const size_t n = m_doc.graph.edges().size();
  if (index < 0 || size_t(index) >= n) return unknownEdge(index, n);
  if (newIndex < 0 || size_t(newIndex) >= n) return unknownEdge(newIndex, n);
  return edit(tr("Reorder edges"), {}, [&](Parts& p) {
    rag::WorkflowEdge e = p.edges[size_t(index)];
    p.edges.erase(p.edges.begin() + index);
    p.edges.insert(p.edges.begin() + newIndex, std::move(e));
    return rag::Status::ok();
  });
}

// ---- documents ---------------------------------------------------------------------------

rag::Status GraphModel::setDocument(rag::WorkflowGraph graph, QHash<QString, QPointF> positions) {
  std::set<std::string> ids;
  for (const rag::WorkflowNode& n : graph.nodes())
    if (!ids.insert(n.id).second)
      return rag::Status::invalidArgument("the workflow has two nodes with the id \"" + n.id +
                                          "\"; give each node its own id");
  QHash<QString, QPointF> placed = layeredLayout(graph);
  for (auto it = positions.begin(); it != positions.end(); ++it)
    if (placed.contains(it.key())) placed.insert(it.key(), it.value());
  reset({std::move(graph), std::move(placed)});
  return rag::Status::ok();
}

rag::Status GraphModel::load(const std::filesystem::path& path) {
  rag::Result<rag::WorkflowGraph> g = rag::WorkflowGraph::load(path);
  if (!g) return g.status();
  // A missing or broken sidecar only costs the positions: the workflow is what matters.
  rag::Result<QHash<QString, QPointF>> layout = readLayout(layoutPathFor(path));
  rag::Status s = setDocument(std::move(*g), layout.valueOr({}));
  if (!s) return s.withContext(path.string());
  m_undo->setClean();
  return rag::Status::ok();
}

rag::Status GraphModel::save(const std::filesystem::path& path) {
  RAG_RETURN_IF_ERROR(m_doc.graph.save(path));
  RAG_RETURN_IF_ERROR(writeLayout(layoutPathFor(path), m_doc.positions));
  m_undo->setClean();
  return rag::Status::ok();
}

rag::Status GraphModel::fromBuiltin(rag::Workflow workflow) { return fromBuiltin(rag::workflowName(workflow)); }

rag::Status GraphModel::fromBuiltin(std::string_view fileName) {
  rag::Result<rag::WorkflowGraph> g = rag::builtinWorkflowFile(fileName);
  if (!g) return g.status();
  return setDocument(std::move(*g));
}

rag::Status GraphModel::fromJson(std::string_view json) {
  rag::Result<rag::WorkflowGraph> g = rag::WorkflowGraph::fromJson(json);
  if (!g) return g.status();
  return setDocument(std::move(*g));
}

void GraphModel::clear() { reset({}); }

void GraphModel::reset(GraphDocument doc) {
  if (doc.positions.isEmpty()) doc.positions = layeredLayout(doc.graph);
  m_doc = std::move(doc);
  m_issues = m_doc.graph.issues();
  m_undo->clear();
  Q_EMIT modelReset();
  Q_EMIT issuesChanged();
}

void GraphModel::apply(const GraphDocument& doc) {
  GraphDocument old = std::exchange(m_doc, doc);
  std::vector<rag::WorkflowIssue> oldIssues = std::exchange(m_issues, m_doc.graph.issues());
  for (const rag::WorkflowNode& n : old.graph.nodes())
    if (!m_doc.graph.findNode(n.id)) Q_EMIT nodeRemoved(toQString(n.id));
  for (const rag::WorkflowNode& n : m_doc.graph.nodes()) {
    const QString id = toQString(n.id);
    const rag::WorkflowNode* was = old.graph.findNode(n.id);
    if (!was)
      Q_EMIT nodeAdded(id);
    else if (*was != n || old.positions.value(id) != m_doc.positions.value(id))
      Q_EMIT nodeChanged(id);
  }
  for (std::string_view t : {rag::kStart, rag::kEnd}) {
    const QString id = toQString(t);
    if (old.positions.value(id) != m_doc.positions.value(id)) Q_EMIT nodeChanged(id);
  }
  if (old.graph.edges() != m_doc.graph.edges()) Q_EMIT edgesChanged();
  if (old.graph.name() != m_doc.graph.name() || old.graph.description() != m_doc.graph.description() ||
      old.graph.answerVar() != m_doc.graph.answerVar())
    Q_EMIT graphPropertiesChanged();
  if (!sameIssues(oldIssues, m_issues)) Q_EMIT issuesChanged();
}

}  // namespace ragwb
