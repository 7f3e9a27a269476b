// The RAGraph editor's document model: every edit is one undo step that restores the exact
// engine JSON, signals say what changed, files round-trip in the engine's format, and bad files
// are refused without touching the document.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QMimeData>
#include <QSignalSpy>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nodegraph/graph_layout.h"
#include "nodegraph/graph_model.h"
#include "nodegraph/issue_list_model.h"
#include "nodegraph/palette_model.h"

namespace fs = std::filesystem;
using ragwb::GraphModel;
using Prop = ragwb::GraphModel::NodeProperty;

namespace {

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const fs::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

}  // namespace

class TestGraphModel : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

  fs::path tmp(const char* name) const { return fs::path(m_dir.path().toStdString()) / name; }

private Q_SLOTS:
  void addNodeIsOneUndoStepRestoringExactJson() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::OneShot).isOk());
    const std::string before = m.graph().toJson();
    QSignalSpy added(&m, &GraphModel::nodeAdded);
    QSignalSpy removed(&m, &GraphModel::nodeRemoved);
    QSignalSpy edges(&m, &GraphModel::edgesChanged);

    QVERIFY(m.addNode(GraphModel::defaultNode(rag::NodeKind::Generation, "critic"), {300, 40}).isOk());
    QCOMPARE(added.count(), 1);
    QCOMPARE(added.at(0).at(0).toString(), QString("critic"));
    QCOMPARE(edges.count(), 0);
    QVERIFY(m.node("critic"));
    QCOMPARE(m.nodePosition("critic"), QPointF(300, 40));
    QCOMPARE(m.undoStack()->count(), 1);
    const std::string after = m.graph().toJson();

    m.undoStack()->undo();
    QCOMPARE(m.graph().toJson(), before);
    QCOMPARE(removed.count(), 1);
    QVERIFY(!m.node("critic"));
    m.undoStack()->redo();
    QCOMPARE(m.graph().toJson(), after);
    QCOMPARE(m.nodePosition("critic"), QPointF(300, 40));
    QCOMPARE(added.count(), 2);

    // Refused edits push nothing.
    QVERIFY(!m.addNode(GraphModel::defaultNode(rag::NodeKind::Retrieval, "critic"), {}).isOk());
    QVERIFY(!m.addNode(GraphModel::defaultNode(rag::NodeKind::Retrieval, "END"), {}).isOk());
    QCOMPARE(m.undoStack()->count(), 1);
    QCOMPARE(m.uniqueNodeId("critic"), QString("critic2"));
  }

  void removeNodeTakesItsEdgesAndUndoPutsAllBack() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::OneShot).isOk());
    const std::string before = m.graph().toJson();
    const QPointF where = m.nodePosition("retrieve");
    QSignalSpy removed(&m, &GraphModel::nodeRemoved);
    QSignalSpy edges(&m, &GraphModel::edgesChanged);

    QVERIFY(m.removeNode("retrieve").isOk());
    QCOMPARE(removed.count(), 1);
    QCOMPARE(edges.count(), 1);
    QCOMPARE(m.graph().nodes().size(), size_t(1));
    QCOMPARE(m.graph().edges().size(), size_t(1));  // answer -> END
    QCOMPARE(m.graph().edges()[0].from, std::string("answer"));

    m.undoStack()->undo();
    QCOMPARE(m.graph().toJson(), before);  // node order and edge order as they were
    QCOMPARE(m.nodePosition("retrieve"), where);
    QVERIFY(!m.removeNode("nope").isOk());
  }

  void connectSetConditionAndReorderEdges() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::OneShot).isOk());
    const std::string before = m.graph().toJson();
    QSignalSpy edges(&m, &GraphModel::edgesChanged);

    QVERIFY(m.addEdge("answer", "retrieve").isOk());
    QCOMPARE(edges.count(), 1);
    QCOMPARE(m.graph().edges().back().to, std::string("retrieve"));
    const int loop = int(m.graph().edges().size()) - 1;
    QVERIFY(m.setEdgeCondition(loop, rag::EdgeCondition::runsBelow("answer", 2)).isOk());
    QCOMPARE(m.graph().edges()[size_t(loop)].when, rag::EdgeCondition::runsBelow("answer", 2));
    // The loop edge is checked after answer -> END (unconditional), so it can never be taken.
    QVERIFY(!m.edgeIssues(loop).isEmpty());
    QVERIFY(m.moveEdge(loop, 2).isOk());  // before answer -> END
    QCOMPARE(m.graph().edges()[2].to, std::string("retrieve"));
    QVERIFY(m.edgeIssues(2).isEmpty());
    QCOMPARE(edges.count(), 3);

    QVERIFY(!m.addEdge("END", "answer").isOk());
    QVERIFY(!m.addEdge("answer", "START").isOk());
    QVERIFY(!m.setEdgeCondition(99, {}).isOk());
    QCOMPARE(m.undoStack()->count(), 3);
    while (m.undoStack()->canUndo()) m.undoStack()->undo();
    QCOMPARE(m.graph().toJson(), before);
    while (m.undoStack()->canRedo()) m.undoStack()->redo();
    QCOMPARE(m.graph().edges()[2].when, rag::EdgeCondition::runsBelow("answer", 2));
  }

  void consecutiveMovesOfOneNodeMerge() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::Hyde).isOk());
    const QPointF start = m.nodePosition("retrieve");
    QSignalSpy changed(&m, &GraphModel::nodeChanged);
    for (int i = 1; i <= 4; ++i) QVERIFY(m.moveNode("retrieve", start + QPointF(10 * i, 0)).isOk());
    QCOMPARE(changed.count(), 4);
    QCOMPARE(m.undoStack()->count(), 1);
    QVERIFY(m.moveNode("answer", {0, 999}).isOk());  // another node: a new step
    QVERIFY(m.moveNode("retrieve", {5, 5}).isOk());  // not consecutive with the first drag
    QCOMPARE(m.undoStack()->count(), 3);
    m.undoStack()->undo();
    m.undoStack()->undo();
    QCOMPARE(m.nodePosition("retrieve"), start + QPointF(40, 0));
    m.undoStack()->undo();
    QCOMPARE(m.nodePosition("retrieve"), start);
    // Terminals move too, and moves never touch the workflow itself.
    const std::string json = m.graph().toJson();
    QVERIFY(m.moveNode("END", {0, 900}).isOk());
    QCOMPARE(m.graph().toJson(), json);
    QVERIFY(!m.moveNode("ghost", {}).isOk());
  }

  void propertyEditsMergePerFieldAndCheckTheKind() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::OneShot).isOk());
    QSignalSpy changed(&m, &GraphModel::nodeChanged);
    QSignalSpy edges(&m, &GraphModel::edgesChanged);
    QVERIFY(m.setNodeProperty("retrieve", Prop::TopK, 3).isOk());
    QVERIFY(m.setNodeProperty("retrieve", Prop::TopK, 4).isOk());
    QCOMPARE(m.undoStack()->count(), 1);
    QCOMPARE(m.node("retrieve")->topk, int64_t(4));
    QVERIFY(m.setNodeProperty("retrieve", Prop::NProbe, 8).isOk());
    QVERIFY(m.setNodeProperty("answer", Prop::MaxTokens, 16).isOk());
    QVERIFY(m.setNodeProperty("answer", Prop::Temperature, 0.5).isOk());
    QVERIFY(m.setNodeProperty("answer", Prop::Stop, QStringList{"\n", "Question:"}).isOk());
    QCOMPARE(m.undoStack()->count(), 5);
    QCOMPARE(changed.count(), 6);
    QCOMPARE(edges.count(), 0);
    QCOMPARE(m.node("answer")->generation.stop, (std::vector<std::string>{"\n", "Question:"}));
    QCOMPARE(m.node("retrieve")->retrieval.nprobe, int64_t(8));

    QVERIFY(m.setNodeProperty("retrieve", Prop::Method, "bm25").isOk());
    QCOMPARE(m.node("retrieve")->retrieval.method, rag::RetrievalMethod::Bm25);
    QVERIFY(!m.setNodeProperty("retrieve", Prop::Method, "sparse").isOk());  // not a method
    QVERIFY(!m.setNodeProperty("answer", Prop::Method, "bm25").isOk());      // wrong kind
    QVERIFY(m.undoStack()->canUndo());
    m.undoStack()->undo();  // the method edit is one undo step
    QCOMPARE(m.node("retrieve")->retrieval.method, rag::RetrievalMethod::Hybrid);
    m.undoStack()->redo();
    QVERIFY(!m.setNodeProperty("retrieve", Prop::Prompt, "x").isOk());  // wrong kind
    QVERIFY(!m.setNodeProperty("answer", Prop::TopK, 2).isOk());
    QVERIFY(!m.setNodeProperty("retrieve", Prop::TopK, 0).isOk());  // out of range
    QVERIFY(!m.setNodeProperty("answer", Prop::Temperature, -1.0).isOk());
    QCOMPARE(m.undoStack()->count(), 6);
    // Setting what is already there is no edit.
    QVERIFY(m.setNodeProperty("answer", Prop::MaxTokens, 16).isOk());
    QCOMPARE(m.undoStack()->count(), 6);
    QVERIFY(!m.setNodeProperty("retrieve", Prop::Rerank, "cross").isOk());  // not a rerank
    QVERIFY(!m.setNodeProperty("answer", Prop::Rerank, "bm25").isOk());     // wrong kind
    QCOMPARE(m.node("retrieve")->retrieval.rerank, rag::RetrievalRerank::Bm25);  // the built-in's
    QVERIFY(m.setNodeProperty("retrieve", Prop::Rerank, "none").isOk());
    QCOMPARE(m.node("retrieve")->retrieval.rerank, rag::RetrievalRerank::None);
    m.undoStack()->undo();  // one undo step
    QCOMPARE(m.node("retrieve")->retrieval.rerank, rag::RetrievalRerank::Bm25);
    for (int i = 0; i < 5; ++i) m.undoStack()->undo();  // method, stop, temperature, max tokens, nprobe
    QCOMPARE(m.node("retrieve")->topk, int64_t(4));
    m.undoStack()->undo();
    QCOMPARE(m.node("retrieve")->topk, int64_t(5));
  }

  // An edit rebuilds the graph: every node keeps its kind (a knowledge node once came back as a
  // retrieval node), and a compression node's own properties are edited like the others.
  void editsKeepEveryKindAndCompressionProperties() {
    GraphModel g;
    QVERIFY(g.fromBuiltin(rag::Workflow::GraphRag).isOk());
    const rag::WorkflowNode* kg = nullptr;
    for (const rag::WorkflowNode& n : g.graph().nodes())
      if (n.kind == rag::NodeKind::Knowledge) kg = &n;
    QVERIFY(kg);
    const QString kgId = QString::fromStdString(kg->id);
    const rag::KnowledgeOptions options = kg->knowledge;
    QVERIFY(g.setNodeProperty(kgId, Prop::TopK, 3).isOk());
    QCOMPARE(g.node(kgId)->kind, rag::NodeKind::Knowledge);
    QVERIFY(g.node(kgId)->knowledge == options);
    QCOMPARE(g.node(kgId)->topk, int64_t(3));
    QVERIFY(!g.setNodeProperty(kgId, Prop::Method, "bm25").isOk());  // the passage search's, not a knowledge node's

    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::Recomp).isOk());
    QCOMPARE(m.node("compress")->kind, rag::NodeKind::Compression);
    QVERIFY(m.setNodeProperty("compress", Prop::TopK, 2).isOk());
    QVERIFY(m.setNodeProperty("answer", Prop::MaxTokens, 8).isOk());
    QCOMPARE(m.node("compress")->kind, rag::NodeKind::Compression);
    QCOMPARE(m.node("compress")->topk, int64_t(2));
    QVERIFY(m.setNodeProperty("compress", Prop::Passages, "elsewhere").isOk());
    QCOMPARE(m.node("compress")->compression.passages, std::string("elsewhere"));
    QVERIFY(!m.issues().empty());  // nothing writes "elsewhere"
    m.undoStack()->undo();
    QCOMPARE(m.node("compress")->compression.passages, std::string("docs"));
    QVERIFY(m.issues().empty());
    const rag::Status wrong = m.setNodeProperty("compress", Prop::Prompt, "{docs}");
    QVERIFY(!wrong.isOk());
    QVERIFY(wrong.message().find("belongs to generation nodes") != std::string::npos);
    QVERIFY(!m.setNodeProperty("retrieve", Prop::Passages, "docs").isOk());
    QVERIFY(!m.setNodeProperty("compress", Prop::NProbe, 8).isOk());
    const rag::WorkflowNode fresh = GraphModel::defaultNode(rag::NodeKind::Compression, "squeeze");
    QCOMPARE(fresh.compression.passages, std::string("docs"));
    QCOMPARE(fresh.topk, int64_t(1));
    QCOMPARE(fresh.outputVar, std::string("summary"));
  }

  void renameFollowsEdgesAndLoopCounters() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::Multistep).isOk());
    const std::string before = m.graph().toJson();
    QSignalSpy removed(&m, &GraphModel::nodeRemoved);
    QSignalSpy added(&m, &GraphModel::nodeAdded);
    QVERIFY(m.renameNode("subanswer", "sub").isOk());
    QCOMPARE(removed.count(), 1);
    QCOMPARE(added.count(), 1);
    QVERIFY(m.issues().empty());  // still valid: every reference followed
    bool counter = false;
    for (const rag::WorkflowEdge& e : m.graph().edges()) {
      QVERIFY(e.from != "subanswer" && e.to != "subanswer");
      if (e.when.kind == rag::ConditionKind::RunsBelow) counter = e.when.node == "sub";
    }
    QVERIFY(counter);
    QVERIFY(!m.renameNode("sub", "next").isOk());
    QVERIFY(!m.renameNode("sub", "START").isOk());
    m.undoStack()->undo();
    QCOMPARE(m.graph().toJson(), before);
  }

  void removingASelectionIsOneStep() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::Multistep).isOk());
    const std::string before = m.graph().toJson();
    QVERIFY(m.removeItems({"next", "decompose"}, {2}).isOk());  // 2: retrieve -> subanswer
    QCOMPARE(m.undoStack()->count(), 1);
    QCOMPARE(m.graph().nodes().size(), size_t(4));  // retrieve, retrieve_next, subanswer, answer
    for (const rag::WorkflowEdge& e : m.graph().edges())
      QVERIFY(e.from != "next" && e.to != "next" && e.from != "retrieve");
    m.undoStack()->undo();
    QCOMPARE(m.graph().toJson(), before);
  }

  void builtinsRoundTripInTheEnginesFormat() {
    for (rag::Workflow w : rag::kAllWorkflows) {
      const std::string name(rag::workflowName(w));
      const fs::path in = tmp(("in_" + name + ".json").c_str());
      const fs::path out = tmp(("out_" + name + ".json").c_str());
      writeFile(in, rag::builtinWorkflowJson(w));
      GraphModel m;
      QVERIFY2(m.load(in).isOk(), name.c_str());
      QVERIFY2(m.save(out).isOk(), name.c_str());
      QCOMPARE(readFile(out), rag::builtinWorkflow(w)->toJson());
      QVERIFY(m.undoStack()->isClean());
      QVERIFY(fs::exists(ragwb::layoutPathFor(out)));
      // The engine reads the saved file back as the same graph.
      QVERIFY(*rag::WorkflowGraph::load(out) == *rag::builtinWorkflow(w));
    }
  }

  void positionsSurviveSaveAndLoad() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::Irg).isOk());
    QVERIFY(m.moveNode("generate", {420, -17.5}).isOk());
    const fs::path p = tmp("irg_moved.json");
    QVERIFY(m.save(p).isOk());
    GraphModel back;
    QSignalSpy reset(&back, &GraphModel::modelReset);
    QVERIFY(back.load(p).isOk());
    QCOMPARE(reset.count(), 1);
    QCOMPARE(back.nodePosition("generate"), QPointF(420, -17.5));
    QCOMPARE(back.document(), m.document());
    // A broken sidecar only costs the positions.
    writeFile(ragwb::layoutPathFor(p), "{");
    QVERIFY(back.load(p).isOk());
    QCOMPARE(back.nodePosition("generate"), ragwb::layeredLayout(back.graph()).value("generate"));
  }

  void corruptFilesAreRefusedAndChangeNothing() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::Multistep).isOk());
    QVERIFY(m.moveNode("next", {1, 2}).isOk());
    const ragwb::GraphDocument before = m.document();
    QSignalSpy reset(&m, &GraphModel::modelReset);
    QSignalSpy issues(&m, &GraphModel::issuesChanged);

    const fs::path garbage = tmp("garbage.json");
    writeFile(garbage, "{\"format\": \"ragraph-workflow\", \"nodes\": [");
    rag::Status s = m.load(garbage);
    QVERIFY(!s.isOk());
    QVERIFY2(s.message().find("garbage.json") != std::string::npos, s.message().c_str());

    std::string unknownKey(rag::builtinWorkflowJson(rag::Workflow::OneShot));
    unknownKey.replace(unknownKey.find("\"topk\""), 6, "\"top_k\"");
    const fs::path typo = tmp("typo.json");
    writeFile(typo, unknownKey);
    s = m.load(typo);
    QVERIFY(!s.isOk());
    QVERIFY2(s.message().find("top_k") != std::string::npos, s.message().c_str());

    rag::WorkflowGraph twins("twins");
    twins.addRetrieval("r", 2, "question", "docs").addRetrieval("r", 3, "question", "more");
    const fs::path dup = tmp("twins.json");
    QVERIFY(twins.save(dup).isOk());
    s = m.load(dup);
    QVERIFY(!s.isOk());
    QVERIFY2(s.message().find("\"r\"") != std::string::npos, s.message().c_str());

    QVERIFY(!m.load(tmp("missing.json")).isOk());
    QVERIFY(!m.fromJson("[]").isOk());
    QCOMPARE(m.document(), before);
    QCOMPARE(reset.count(), 0);
    QCOMPARE(issues.count(), 0);
    QCOMPARE(m.undoStack()->count(), 1);  // the move is still undoable
  }

  void issuesNameTheOffendingNode() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::OneShot).isOk());
    QVERIFY(m.issues().empty());
    QSignalSpy issues(&m, &GraphModel::issuesChanged);
    QVERIFY(m.setNodeProperty("answer", Prop::Prompt, "{evidence}Question: {question}").isOk());
    QCOMPARE(issues.count(), 1);
    QVERIFY(!m.issues().empty());
    QCOMPARE(m.issues().front().node, std::string("answer"));
    QVERIFY(m.nodeIssues("answer").join(' ').contains("evidence"));
    QVERIFY(m.nodeIssues("retrieve").isEmpty());
    // A node nobody reaches is named too.
    QVERIFY(m.addNode(GraphModel::defaultNode(rag::NodeKind::Retrieval, "orphan"), {}).isOk());
    QVERIFY(!m.nodeIssues("orphan").isEmpty());
    m.undoStack()->undo();
    m.undoStack()->undo();
    QVERIFY(m.issues().empty());
    QCOMPARE(issues.count(), 4);
  }

  void knownVariablesAndDefaults() {
    GraphModel m;
    QVERIFY(m.fromBuiltin(rag::Workflow::Multistep).isOk());
    QCOMPARE(m.knownVariables(), (QStringList{"answer", "docs", "fact", "question", "subquestion"}));
    const int loop = 3;  // subanswer -> next
    QCOMPARE(m.defaultCondition(rag::ConditionKind::NonEmpty, loop),
             rag::EdgeCondition::nonEmpty("fact"));
    QCOMPARE(m.defaultCondition(rag::ConditionKind::RunsBelow, loop),
             rag::EdgeCondition::runsBelow("subanswer", 3));
  }

  void layeredLayoutReadsTopToBottom() {
    const rag::WorkflowGraph g = *rag::builtinWorkflow(rag::Workflow::Multistep);
    const QHash<QString, QPointF> p = ragwb::layeredLayout(g);
    QCOMPARE(p.size(), qsizetype(g.nodes().size() + 2));
    const QStringList chain{"START", "decompose", "retrieve", "subanswer", "next", "answer", "END"};
    for (qsizetype i = 1; i < chain.size(); ++i)
      QVERIFY2(p.value(chain[i - 1]).y() < p.value(chain[i]).y(), qPrintable(chain[i]));
  }

  void itemModelsPassTheTester() {
    ragwb::PaletteModel palette;
    QAbstractItemModelTester paletteTester(&palette,
                                           QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(palette.rowCount(), 9);  // four node kinds, five conditions
    std::unique_ptr<QMimeData> mime(palette.mimeData({palette.index(1)}));
    QCOMPARE(mime->data(ragwb::kNodeKindMime), QByteArray("retrieval"));
    std::unique_ptr<QMimeData> knowledge(palette.mimeData({palette.index(2)}));
    QCOMPARE(knowledge->data(ragwb::kNodeKindMime), QByteArray("knowledge"));
    std::unique_ptr<QMimeData> compression(palette.mimeData({palette.index(3)}));
    QCOMPARE(compression->data(ragwb::kNodeKindMime), QByteArray("compression"));
    QCOMPARE(ragwb::nodeKindFromName("compression"), rag::NodeKind::Compression);
    std::unique_ptr<QMimeData> cond(palette.mimeData({palette.index(8)}));
    QCOMPARE(cond->data(ragwb::kConditionMime), QByteArray("runs_below"));
    QCOMPARE(ragwb::conditionKindFromName("runs_below"), rag::ConditionKind::RunsBelow);
    QVERIFY(!ragwb::nodeKindFromName("planner"));

    GraphModel m;
    ragwb::IssueListModel issues(&m);
    QAbstractItemModelTester issueTester(&issues,
                                         QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(issues.rowCount() > 0);  // an empty graph has no entry edge
    QVERIFY(m.fromBuiltin(rag::Workflow::OneShot).isOk());
    QCOMPARE(issues.rowCount(), 0);
    QVERIFY(m.setNodeProperty("answer", Prop::Prompt, "{nowhere}").isOk());
    QVERIFY(issues.rowCount() > 0);
    QCOMPARE(issues.index(0).data(ragwb::IssueListModel::NodeRole).toString(), QString("answer"));
    m.undoStack()->undo();
    QCOMPARE(issues.rowCount(), 0);
  }
};

QTEST_GUILESS_MAIN(TestGraphModel)
#include "test_graph_model.moc"
