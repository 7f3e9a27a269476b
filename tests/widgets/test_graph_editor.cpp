// The RAGraph editor widget, offscreen: the canvas mirrors the model, the property panel edits
// the selection as single undo steps, the highlighter flags unknown variables, bad files leave
// the work alone, and Run hands over only a valid graph.
#include <QtTest>

#include <QAction>
#include <QComboBox>
#include <QGraphicsSceneDragDropEvent>
#include <QGraphicsSceneMouseEvent>
#include <QGraphicsView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTextBlock>
#include <QTextLayout>
#include <filesystem>
#include <fstream>

#include "nodegraph/graph_editor.h"
#include "nodegraph/graph_scene.h"
#include "nodegraph/issue_list_model.h"
#include "nodegraph/palette_model.h"
#include "nodegraph/prompt_highlighter.h"
#include "nodegraph/property_panel.h"

using ragwb::GraphEditor;
using ragwb::GraphModel;

namespace {

// The colour the highlighter gave the character at `pos` of the document's first block.
QColor colorAt(QTextDocument* doc, int pos) {
  for (const QTextLayout::FormatRange& r : doc->firstBlock().layout()->formats())
    if (pos >= r.start && pos < r.start + r.length) return r.format.foreground().color();
  return {};
}

void sendMouse(QGraphicsScene* scene, QEvent::Type type, QPointF at, Qt::MouseButtons buttons) {
  QGraphicsSceneMouseEvent e(type);
  e.setScenePos(at);
  e.setButton(Qt::LeftButton);
  e.setButtons(buttons);
  e.setButtonDownScenePos(Qt::LeftButton, at);
  QCoreApplication::sendEvent(scene, &e);
}

void sendKey(QGraphicsScene* scene, Qt::Key key) {
  QKeyEvent press(QEvent::KeyPress, key, Qt::NoModifier);
  QCoreApplication::sendEvent(scene, &press);
}

}  // namespace

class TestGraphEditor : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

private Q_SLOTS:
  void buildingOneshotFillsTheCanvas() {
    GraphEditor editor;
    GraphModel* m = editor.model();
    const rag::WorkflowGraph oneshot = *rag::builtinWorkflow(rag::Workflow::OneShot);
    for (const rag::WorkflowNode& n : oneshot.nodes())
      QVERIFY(m->addNode(n, {0, 100.0 * double(m->graph().nodes().size() + 1)}).isOk());
    for (const rag::WorkflowEdge& e : oneshot.edges())
      QVERIFY(m->addEdge(QString::fromStdString(e.from), QString::fromStdString(e.to), e.when).isOk());
    QVERIFY(m->graph().nodes() == oneshot.nodes());
    QVERIFY(m->graph().edges() == oneshot.edges());
    QVERIFY(m->issues().empty());

    ragwb::GraphScene* scene = editor.scene();
    QCOMPARE(scene->nodeItems().size(), qsizetype(4));  // 2 nodes + START + END
    QCOMPARE(scene->nodeItem("retrieve")->pos(), QPointF(0, 100));
    QCOMPARE(scene->edgeItems().size(), size_t(3));
    const ragwb::EdgeItem* e = scene->edgeItems()[1];
    QVERIFY(e);
    QCOMPARE(e->from()->id(), QString("retrieve"));
    QCOMPARE(e->to()->id(), QString("answer"));
    for (ragwb::NodeItem* n : scene->nodeItems()) QVERIFY(n->issues().isEmpty());

    // Undo all of it through the editor's action: the canvas follows.
    while (editor.undoAction()->isEnabled()) editor.undoAction()->trigger();
    QCOMPARE(scene->nodeItems().size(), qsizetype(2));
    QCOMPARE(scene->edgeItems().size(), size_t(0));
  }

  void canvasMirrorsABuiltinWithLabelsAndLoops() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::Multistep);
    QCOMPARE(editor.templatesBox()->currentText(), QString("multistep"));
    const auto& edges = editor.scene()->edgeItems();
    QCOMPARE(edges.size(), size_t(9));
    QCOMPARE(edges[3]->label(), QString("1 · while subanswer ran < 3 times"));
    QCOMPARE(edges[4]->label(), QString("2 · otherwise"));
    QVERIFY(edges[0]->label().isEmpty());
    // The loop (next -> retrieve_next -> subanswer) climbs back to subanswer from below.
    QCOMPARE(edges[7]->from()->id(), QString("retrieve_next"));
    QVERIFY(edges[7]->to()->pos().y() < edges[7]->from()->pos().y());
  }

  // The templates list holds the built-ins and, after them, the compiled-in variants; picking
  // one loads it as a new document and its description becomes the tooltip.
  void templatesListTheVariantsBesideTheBuiltins() {
    GraphEditor editor;
    QComboBox* templates = editor.templatesBox();
    for (rag::Workflow w : rag::kAllWorkflows)
      QVERIFY(templates->findData(QString::fromUtf8(rag::workflowName(w).data())) >= 0);
    const int bridge = templates->findData(QString("irg-bridge"));
    QVERIFY(bridge > templates->findData(QString("irg")));
    QVERIFY(templates->findData(QString("recomp-abstractive")) >= 0);
    const rag::WorkflowGraph file = rag::builtinWorkflowFile(rag::kIrgBridge).value();
    QCOMPARE(templates->itemData(bridge, Qt::ToolTipRole).toString(), QString::fromStdString(file.description()));
    templates->setCurrentIndex(bridge);
    Q_EMIT templates->activated(bridge);  // as a click on the item does
    QCOMPARE(editor.model()->graph(), file);
    QCOMPARE(templates->currentText(), QString("irg-bridge"));
    QVERIFY(editor.filePath().isEmpty());
    QCOMPARE(editor.scene()->nodeItems().size(), qsizetype(file.nodes().size() + 2));  // and START, END
    // An unknown name leaves the document as it was.
    editor.loadTemplate(std::string_view("no-such-workflow"));
    QCOMPARE(editor.model()->graph(), file);
  }

  void selectingANodeFillsThePropertyPanel() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::Multistep);
    ragwb::PropertyPanel* panel = editor.propertyPanel();
    editor.scene()->selectNode("retrieve");
    QCOMPARE(panel->nodeId(), QString("retrieve"));
    QCOMPARE(panel->topkBox()->value(), 2);
    QCOMPARE(panel->queryEdit()->text(), QString("{subquestion} {question}"));
    QCOMPARE(panel->nprobeBox()->text(), QString("engine default"));
    QCOMPARE(panel->methodBox()->currentText(), QString("hybrid"));
    panel->methodBox()->setCurrentText("bm25");  // the panel edits the model
    QCOMPARE(editor.model()->node("retrieve")->retrieval.method, rag::RetrievalMethod::Bm25);
    QCOMPARE(panel->rerankBox()->currentText(), QString("bm25"));  // the built-ins rerank (measured)
    QVERIFY(editor.scene()->nodeItem("retrieve")->toolTip().contains("ordered by their BM25 score"));
    panel->rerankBox()->setCurrentText("none");
    QCOMPARE(editor.model()->node("retrieve")->retrieval.rerank, rag::RetrievalRerank::None);
    QVERIFY(!editor.scene()->nodeItem("retrieve")->toolTip().contains("BM25 score"));  // the card follows

    editor.scene()->selectNode("subanswer");
    const rag::WorkflowNode* n = editor.model()->node("subanswer");
    QCOMPARE(panel->promptEdit()->toPlainText(), QString::fromStdString(n->promptTemplate));
    QCOMPARE(panel->maxTokensBox()->value(), 48);
    QCOMPARE(panel->stopEdit()->text(), QString("[\"\\n\"]"));
    QCOMPARE(panel->outputEdit()->text(), QString("fact"));
    // Copy from: the panel edits the node; a variable the prompt does not use is an issue.
    panel->copyFromEdit()->setText("docs");
    Q_EMIT panel->copyFromEdit()->editingFinished();
    QCOMPARE(editor.model()->node("subanswer")->generation.copyFrom, std::string("docs"));
    panel->copyFloorBox()->setValue(0.25);
    QCOMPARE(editor.model()->node("subanswer")->generation.copyFloor, 0.25);
    QVERIFY(editor.model()->graph().validate().isOk());
    panel->copyFromEdit()->setText("hypothesis");
    Q_EMIT panel->copyFromEdit()->editingFinished();
    QVERIFY(!editor.model()->graph().validate().isOk());

    editor.scene()->selectEdge(5);  // next -> answer when subquestion contains DONE
    QCOMPARE(panel->edgeIndex(), 5);
    QCOMPARE(panel->conditionBox()->currentText(), QString("contains"));
    QCOMPARE(panel->conditionTextEdit()->text(), QString("DONE"));
    QCOMPARE(panel->orderBox()->value(), 1);

    editor.scene()->clearSelection();
    QCOMPARE(panel->nodeId(), QString());
    QCOMPARE(panel->edgeIndex(), -1);
  }

  void editingThePromptIsOneUndoableCommand() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::OneShot);
    editor.scene()->selectNode("answer");
    QPlainTextEdit* prompt = editor.propertyPanel()->promptEdit();
    const QString original = prompt->toPlainText();
    QUndoStack* stack = editor.model()->undoStack();
    QCOMPARE(stack->count(), 0);

    prompt->setFocus();
    prompt->moveCursor(QTextCursor::End);
    QTest::keyClicks(prompt, " Be brief.");  // ten keystrokes
    QCOMPARE(QString::fromStdString(editor.model()->node("answer")->promptTemplate),
             original + " Be brief.");
    QCOMPARE(stack->count(), 1);
    QVERIFY(editor.undoAction()->text().contains("answer"));

    editor.undoAction()->trigger();
    QCOMPARE(QString::fromStdString(editor.model()->node("answer")->promptTemplate), original);
    QCOMPARE(prompt->toPlainText(), original);  // the panel follows the model
    editor.redoAction()->trigger();
    QCOMPARE(prompt->toPlainText(), original + " Be brief.");

    // A spin box edit is its own step, and the canvas shows it.
    editor.scene()->selectNode("retrieve");
    editor.propertyPanel()->topkBox()->setValue(9);
    QCOMPARE(stack->count(), 2);
    QCOMPARE(editor.model()->node("retrieve")->topk, int64_t(9));
  }

  // With nothing selected the panel edits the workflow itself; each field is one undo step and
  // the file keeps what was typed.
  void theWorkflowsNameDescriptionAndAnswerAreEditable() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::OneShot);
    ragwb::PropertyPanel* panel = editor.propertyPanel();
    editor.scene()->clearSelection();
    QCOMPARE(panel->graphNameEdit()->text(), QString("oneshot"));
    QUndoStack* stack = editor.model()->undoStack();

    panel->graphNameEdit()->setText("  my oneshot ");
    Q_EMIT panel->graphNameEdit()->editingFinished();
    QCOMPARE(editor.model()->graph().name(), std::string("my oneshot"));
    QPlainTextEdit* description = panel->graphDescriptionEdit();
    description->setFocus();
    description->selectAll();
    QTest::keyClicks(description, "For the demo.");
    QCOMPARE(editor.model()->graph().description(), std::string("For the demo."));
    QCOMPARE(stack->count(), 2);  // the name, then the typing as one step

    // A bad value is refused with the reason, and the field shows what the workflow kept.
    QSignalSpy failed(panel, &ragwb::PropertyPanel::editFailed);
    panel->answerVarEdit()->setText("");
    Q_EMIT panel->answerVarEdit()->editingFinished();
    QCOMPARE(failed.count(), 1);
    QVERIFY(failed.front().front().toString().contains("answer variable"));
    QCOMPARE(panel->answerVarEdit()->text(), QString("answer"));
    // An answer variable no node writes is a validation problem.
    panel->answerVarEdit()->setText("reply");
    Q_EMIT panel->answerVarEdit()->editingFinished();
    QCOMPARE(editor.model()->graph().answerVar(), std::string("reply"));
    QVERIFY(!editor.model()->issues().empty());

    editor.undoAction()->trigger();
    QCOMPARE(editor.model()->graph().answerVar(), std::string("answer"));
    QVERIFY(editor.model()->issues().empty());
    editor.undoAction()->trigger();
    QCOMPARE(description->toPlainText(), QString::fromStdString(editor.model()->graph().description()));
    QVERIFY(editor.model()->graph().description() != "For the demo.");
    editor.redoAction()->trigger();

    const std::filesystem::path file = std::filesystem::path(m_dir.path().toStdString()) / "named.json";
    QVERIFY(editor.model()->save(file).isOk());
    auto back = rag::WorkflowGraph::load(file);
    QVERIFY2(back.isOk(), back.status().message().c_str());
    QCOMPARE(back->name(), std::string("my oneshot"));
    QCOMPARE(back->description(), std::string("For the demo."));
  }

  void highlighterMarksUnknownVariablesAndTheNodeGetsABadge() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::OneShot);
    editor.scene()->selectNode("answer");
    QPlainTextEdit* prompt = editor.propertyPanel()->promptEdit();
    prompt->setPlainText("{docs}Q: {bogus} {{x}}");
    QTextDocument* doc = prompt->document();
    QCOMPARE(colorAt(doc, 1), ragwb::PromptHighlighter::knownColor());     // {docs}
    QCOMPARE(colorAt(doc, 10), ragwb::PromptHighlighter::unknownColor());  // {bogus}
    QVERIFY(!colorAt(doc, 19).isValid());                                   // {{x}} is literal

    ragwb::NodeItem* item = editor.scene()->nodeItem("answer");
    QVERIFY(!item->issues().isEmpty());
    QVERIFY(item->issues().join(' ').contains("bogus"));
    QVERIFY(item->toolTip().contains("bogus"));
    QVERIFY(editor.propertyPanel()->issuesLabel()->text().contains("bogus"));
    QVERIFY(editor.issueModel()->rowCount() > 0);
  }

  void deleteKeyAndPaletteDropsAreUndoable() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::Hyde);
    ragwb::GraphScene* scene = editor.scene();
    const std::string before = editor.model()->graph().toJson();
    scene->selectNode("retrieve");
    sendKey(scene, Qt::Key_Delete);
    QVERIFY(!editor.model()->node("retrieve"));
    QVERIFY(!scene->nodeItem("retrieve"));
    QCOMPARE(editor.model()->undoStack()->count(), 1);
    editor.undoAction()->trigger();
    QCOMPARE(editor.model()->graph().toJson(), before);
    QVERIFY(scene->nodeItem("retrieve"));

    // A palette entry dropped on the canvas: a node where it was dropped.
    std::unique_ptr<QMimeData> mime(
        editor.paletteModel()->mimeData({editor.paletteModel()->index(1)}));
    QGraphicsSceneDragDropEvent drop(QEvent::GraphicsSceneDrop);
    drop.setScenePos({500, 60});
    drop.setMimeData(mime.get());
    drop.setProposedAction(Qt::CopyAction);
    QCoreApplication::sendEvent(scene, &drop);
    const rag::WorkflowNode* added = editor.model()->node("retrieval");
    QVERIFY(added);
    QCOMPARE(added->kind, rag::NodeKind::Retrieval);
    QCOMPARE(scene->nodeItem("retrieval")->pos(), QPointF(500, 60));
    QCOMPARE(editor.propertyPanel()->nodeId(), QString("retrieval"));  // selected for editing
  }

  void draggingFromAPortConnectsAndMovesCommit() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::OneShot);
    ragwb::GraphScene* scene = editor.scene();
    GraphModel* m = editor.model();
    const size_t edges = m->graph().edges().size();
    // From the output port of answer back onto retrieve: a new (loop) edge, one undo step.
    const QPointF port = scene->nodeItem("answer")->outputPort();
    sendMouse(scene, QEvent::GraphicsSceneMousePress, port, Qt::LeftButton);
    sendMouse(scene, QEvent::GraphicsSceneMouseMove, port + QPointF(80, 40), Qt::LeftButton);
    sendMouse(scene, QEvent::GraphicsSceneMouseRelease, scene->nodeItem("retrieve")->pos(),
              Qt::NoButton);
    QCOMPARE(m->graph().edges().size(), edges + 1);
    QCOMPARE(m->graph().edges().back().from, std::string("answer"));
    QCOMPARE(m->graph().edges().back().to, std::string("retrieve"));
    QCOMPARE(scene->edgeItems().size(), edges + 1);
    QVERIFY(!m->edgeIssues(int(edges)).isEmpty());  // after answer -> END: never taken
    QVERIFY(scene->edgeItems().back()->toolTip().contains("Problems"));
    // Dropped on START: refused with a reason, nothing added.
    QSignalSpy failed(scene, &ragwb::GraphScene::editFailed);
    sendMouse(scene, QEvent::GraphicsSceneMousePress, port, Qt::LeftButton);
    sendMouse(scene, QEvent::GraphicsSceneMouseRelease, scene->nodeItem("START")->pos(), Qt::NoButton);
    QCOMPARE(failed.count(), 1);
    QCOMPARE(m->graph().edges().size(), edges + 1);

    // An item dragged on the canvas is committed when the button goes up.
    const int steps = m->undoStack()->count();
    scene->nodeItem("retrieve")->setPos(333, 44);
    sendMouse(scene, QEvent::GraphicsSceneMouseRelease, {333, 44}, Qt::NoButton);
    QCOMPARE(m->nodePosition("retrieve"), QPointF(333, 44));
    QCOMPARE(m->undoStack()->count(), steps + 1);
    editor.undoAction()->trigger();
    QCOMPARE(scene->nodeItem("retrieve")->pos(), m->nodePosition("retrieve"));
    QVERIFY(scene->nodeItem("retrieve")->pos() != QPointF(333, 44));
  }

  void corruptFileShowsWhyAndKeepsTheWork() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::Hyde);
    QVERIFY(editor.model()->setNodeProperty("answer", GraphModel::NodeProperty::MaxTokens, 7).isOk());
    const ragwb::GraphDocument before = editor.model()->document();
    const QString path = m_dir.filePath("broken.json");
    std::ofstream(path.toStdString()) << "{\"format\": \"ragraph-workflow\", \"version\": 1, \"nodes\": 3}";

    rag::Status s = editor.openFile(path);
    QVERIFY(!s.isOk());
    auto* box = editor.findChild<QMessageBox*>();
    QVERIFY(box);
    QVERIFY(box->isVisible());
    QVERIFY2(box->informativeText().contains("$.nodes"), qPrintable(box->informativeText()));
    QVERIFY(box->text().contains("broken.json"));
    box->close();
    QVERIFY(editor.model()->document() == before);
    QCOMPARE(editor.model()->undoStack()->count(), 1);  // the edit can still be undone
    QCOMPARE(editor.filePath(), QString());

    // A good file opens, and Save writes it back byte for byte.
    const QString good = m_dir.filePath("hyde.json");
    std::ofstream(good.toStdString()) << rag::builtinWorkflowJson(rag::Workflow::Hyde);
    QSignalSpy pathChanged(&editor, &GraphEditor::filePathChanged);
    QVERIFY(editor.openFile(good).isOk());
    QCOMPARE(pathChanged.count(), 1);
    QVERIFY(editor.saveFile(good).isOk());
    QVERIFY(*rag::WorkflowGraph::load(good.toStdString()) == *rag::builtinWorkflow(rag::Workflow::Hyde));
  }

  void runSendsOnlyAValidGraph() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::Irg);
    QSignalSpy run(&editor, &GraphEditor::runRequested);
    editor.runAction()->trigger();
    QCOMPARE(run.count(), 1);
    QVERIFY(qvariant_cast<rag::WorkflowGraph>(run.at(0).at(0)) == *rag::builtinWorkflow(rag::Workflow::Irg));

    QVERIFY(editor.model()->setNodeProperty("generate", GraphModel::NodeProperty::Prompt, "{nope}").isOk());
    editor.scene()->clearSelection();
    editor.runAction()->trigger();
    QCOMPARE(run.count(), 1);
    QCOMPARE(editor.scene()->selectedNodeId(), QString("generate"));  // shows where it is wrong
    QVERIFY(!editor.validate());
  }

  // Not a check: with RAGWB_GRAB set, writes the editor with a built-in loaded (multistep, or
  // RAGWB_GRAB_WORKFLOW) to that PNG, for looking at.
  void grabBuiltin() {
    const QString out = qEnvironmentVariable("RAGWB_GRAB");
    if (out.isEmpty()) QSKIP("set RAGWB_GRAB=<file.png> to grab the editor");
    const std::string name = qEnvironmentVariable("RAGWB_GRAB_WORKFLOW", "multistep").toStdString();
    const std::optional<rag::Workflow> w = rag::workflowFromName(name);
    QVERIFY2(w, name.c_str());
    GraphEditor editor;
    editor.resize(1500, 950);
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
    editor.loadTemplate(*w);
    editor.scene()->selectNode(QString::fromStdString(editor.model()->graph().nodes().back().id));
    QTest::qWait(50);  // the posted layout requests of the property panel
    QVERIFY(editor.grab().save(out));
  }
};

QTEST_MAIN(TestGraphEditor)
#include "test_graph_editor.moc"
