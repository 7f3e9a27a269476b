// The RAGraph editor's document: a rag::WorkflowGraph plus where each node sits on the canvas.
// It is the single source of truth of the editor: the scene and the property panel mirror it
// through its signals, and every edit goes through it as one QUndoCommand on undoStack().
//
//   ragwb::GraphModel model;
//   model.fromBuiltin(rag::Workflow::Hyde);                          // a new document
//   model.setNodeProperty("retrieve", GraphModel::NodeProperty::TopK, 3);
//   model.addEdge("answer", "retrieve", rag::EdgeCondition::runsBelow("answer", 2));
//   model.undoStack()->undo();                                       // the edge is gone
//   engine.submit(query, model.graph());                             // what Run sends
//
// Undo. A command stores the document (graph and layout) before and after its edit, as values,
// and applies one or the other. Applying diffs against the current document and emits only what
// changed, so undo and redo drive the scene through the same signals as the edit itself.
// Consecutive edits of one thing merge into one command: moves of one node, and changes of one
// property of one node (typing a prompt, stepping a spin box), so Undo takes back the gesture.
//
// Layout. WorkflowGraph::fromJson rejects unknown keys, so positions cannot ride in the workflow
// file: save() writes the workflow exactly as WorkflowGraph::save does and the positions to a
// sidecar "<file>.layout.json"; load() reads the sidecar when it is there and lays out every
// node it does not place (and every built-in) with layeredLayout().
#pragma once

#include <QHash>
#include <QObject>
#include <QPointF>
#include <QStringList>
#include <QUndoStack>
#include <QVariant>
#include <filesystem>
#include <functional>
#include <vector>

#include "rag/workflow.h"

namespace ragwb {

// What the editor edits: the workflow and the centre of each node's item on the canvas (keyed by
// node id; "START" and "END" place the two terminals).
struct GraphDocument {
  rag::WorkflowGraph graph;
  QHash<QString, QPointF> positions;
  bool operator==(const GraphDocument&) const = default;
};

class GraphModel : public QObject {
  Q_OBJECT
public:
  enum class NodeProperty {
    OutputVar,    // QString, every kind
    Prompt,       // QString, generation
    MaxTokens,    // integer, generation
    Temperature,  // double, generation
    Stop,         // QStringList, generation
    Query,        // QString, retrieval, knowledge, compression
    TopK,         // integer, retrieval, knowledge (subgraphs), compression (sentences)
    NProbe,       // integer, retrieval
    Method,       // QString "dense" | "bm25" | "hybrid", retrieval
    Passages,     // QString, compression: the passages variable it compresses
    CopyFrom,     // QString, generation: the variable its output must be a span of ("" : free)
    CopyFloor,    // double in [0, 1], generation: below this share of probability it stops copying
    Rerank,       // QString "none" | "bm25", retrieval: how its passages are ordered for the prompt
  };

  explicit GraphModel(QObject* parent = nullptr);

  // What Run submits. Always the current state, valid or not (issues() says which).
  const rag::WorkflowGraph& graph() const { return m_doc.graph; }
  const GraphDocument& document() const { return m_doc; }
  QUndoStack* undoStack() const { return m_undo; }

  const rag::WorkflowNode* node(const QString& id) const;
  // The centre of the node's (or terminal's) item; (0, 0) when it has none.
  QPointF nodePosition(const QString& id) const { return m_doc.positions.value(id); }

  // WorkflowGraph::issues() of the current graph, and the messages of the ones that name a node
  // or an edge (an edge's issues also show on the node it leaves when they name it).
  const std::vector<rag::WorkflowIssue>& issues() const { return m_issues; }
  QStringList nodeIssues(const QString& id) const;
  QStringList edgeIssues(int edge) const;

  // "question" and every node's output variable, sorted: the names a prompt may use.
  QStringList knownVariables() const;
  // `base`, or `base` with the smallest number appended that no node uses yet.
  QString uniqueNodeId(const QString& base) const;
  // A node of `kind` with settings that validate once its variables exist.
  static rag::WorkflowNode defaultNode(rag::NodeKind kind, const QString& id);
  // A condition of `kind` for edge `edge`, filled from the node it leaves (its output variable,
  // its id for runs_below).
  rag::EdgeCondition defaultCondition(rag::ConditionKind kind, int edge) const;

  // ---- edits: each is one undo command; InvalidArgument (and no command) when it cannot
  // apply: an unknown node or edge, a property of the other kind, a duplicate id. An edit that
  // changes nothing pushes nothing.
  rag::Status addNode(rag::WorkflowNode node, QPointF pos);
  rag::Status removeNode(const QString& id);  // with every edge touching it
  // Renames the node and every edge and runs_below condition that refers to it.
  rag::Status renameNode(const QString& id, const QString& newId);
  rag::Status setNodeProperty(const QString& id, NodeProperty property, const QVariant& value);
  rag::Status moveNode(const QString& id, QPointF pos);  // a node, "START" or "END"
  rag::Status addEdge(const QString& from, const QString& to, rag::EdgeCondition when = {});
  rag::Status removeEdge(int index);
  rag::Status setEdgeCondition(int index, rag::EdgeCondition when);
  // Moves edge `index` to position `newIndex` of edges(), changing the order in which the edges
  // leaving its node are checked.
  rag::Status moveEdge(int index, int newIndex);
  // Removes nodes (with their edges) and edges in one command: a Delete of the selection.
  rag::Status removeItems(const QStringList& nodes, const QList<int>& edges);
  // The workflow's own settings (what the file's "name", "description" and "answer" hold).
  // Consecutive changes of one of them merge into one command. InvalidArgument for an empty
  // name or answer variable.
  enum class GraphProperty { Name, Description, AnswerVar };
  rag::Status setGraphProperty(GraphProperty property, const QString& value);

  // ---- documents: each replaces the document, clears the undo stack and emits modelReset, or
  // fails with a message naming the problem and leaves the current document as it was.
  rag::Status load(const std::filesystem::path& path);
  // The workflow as WorkflowGraph::save writes it, then the layout sidecar; marks the stack clean.
  rag::Status save(const std::filesystem::path& path);
  rag::Status fromBuiltin(rag::Workflow workflow);
  // A compiled-in workflow file by its name: a built-in's or a variant's (rag::kWorkflowVariants).
  rag::Status fromBuiltin(std::string_view fileName);
  rag::Status fromJson(std::string_view json);
  // `graph` with `positions` (missing ones laid out); fails on duplicate node ids, which the
  // editor cannot tell apart.
  rag::Status setDocument(rag::WorkflowGraph graph, QHash<QString, QPointF> positions = {});
  void clear();

Q_SIGNALS:
  void nodeAdded(const QString& id);
  void nodeRemoved(const QString& id);
  void nodeChanged(const QString& id);  // a property or the position; also for START/END moves
  void edgesChanged();
  void graphPropertiesChanged();  // name, description or answer variable
  void issuesChanged();
  void modelReset();

private:
  friend class GraphEditCommand;
  // The parts an edit changes; `mutate` in edit() works on a copy of the current ones.
  struct Parts {
    std::vector<rag::WorkflowNode> nodes;
    std::vector<rag::WorkflowEdge> edges;
    QHash<QString, QPointF> positions;
  };
  rag::Status edit(const QString& text, const QString& mergeKey,
                   const std::function<rag::Status(Parts&)>& mutate);
  void push(const QString& text, const QString& mergeKey, GraphDocument after);
  void apply(const GraphDocument& doc);
  void reset(GraphDocument doc);

  GraphDocument m_doc;
  std::vector<rag::WorkflowIssue> m_issues;
  QUndoStack* m_undo;
};

}  // namespace ragwb
