// End to end through the workbench's parts, as a user drives them: a workflow built in the
// editor (its model's API, each step undoable), run from the run panel on a real engine (tiny
// model, real embedder and IVF index), 20 requests whose spans reach the timeline and whose run
// lands in the SQLite history; and a window closed mid-run keeps every finished request.
#include <QtTest>

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <filesystem>
#include <memory>

#include "tiny_bridge_config.h"
#include "bridge/engine_bridge.h"
#include "history/request_table_model.h"
#include "nodegraph/graph_editor.h"
#include "nodegraph/graph_model.h"
#include "rag/run_store.h"
#include "run/run_panel.h"
#include "timeline/lane_model.h"

using namespace ragwb;
namespace fs = std::filesystem;

class TestWorkbenchE2e : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  rag::testing::TinyServing m_t;

  EngineConfig config() const { return tinyBridgeConfig(m_t); }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    auto t = rag::testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    m_t = *t;
  }

  void editorGraphRunsAndIsRecorded() {
    GraphEditor editor;
    GraphModel* m = editor.model();
    // One-shot RAG, built node by node.
    QVERIFY(m->addNode(GraphModel::defaultNode(rag::NodeKind::Retrieval, "find"), {0, 100}).isOk());
    QVERIFY(m->setNodeProperty("find", GraphModel::NodeProperty::Query, "question").isOk());
    QVERIFY(m->setNodeProperty("find", GraphModel::NodeProperty::OutputVar, "docs").isOk());
    QVERIFY(m->setNodeProperty("find", GraphModel::NodeProperty::TopK, 3).isOk());
    QVERIFY(m->addNode(GraphModel::defaultNode(rag::NodeKind::Generation, "answer"), {0, 200}).isOk());
    QVERIFY(m->setNodeProperty("answer", GraphModel::NodeProperty::Prompt, "{docs}Question: {question}\nAnswer:").isOk());
    QVERIFY(m->setNodeProperty("answer", GraphModel::NodeProperty::OutputVar, "answer").isOk());
    QVERIFY(m->setNodeProperty("answer", GraphModel::NodeProperty::MaxTokens, 4).isOk());
    QVERIFY(m->addEdge("START", "find").isOk());
    QVERIFY(m->addEdge("find", "answer").isOk());
    QVERIFY(m->addEdge("answer", "END").isOk());
    QVERIFY2(m->graph().validate().isOk(), m->graph().validate().message().c_str());

    EngineBridge bridge;
    LaneModel lanes;
    connect(&bridge, &EngineBridge::traceEvents, &lanes,
            [&lanes](const std::vector<rag::TraceEvent>& ev, const std::vector<rag::TraceLane>& names) {
              lanes.setLanes(names);
              lanes.append(ev);
            });
    RunPanel panel(&bridge);
    QSignalSpy ready(&bridge, &EngineBridge::engineReady);
    bridge.startEngine(config());
    QVERIFY(ready.wait(60000));
    QSignalSpy done(&bridge, &EngineBridge::runFinished);
    QSignalSpy runSpy(&editor, &GraphEditor::runRequested);
    connect(&editor, &GraphEditor::runRequested, &panel, [&panel](const rag::WorkflowGraph& g) {
      panel.setEditorGraph(g, /*select=*/true);  // as the main window does: Run runs the editor's graph
      panel.start();
    });
    panel.configure("oneshot", "hedra", 0.0, 20);  // then the editor's graph is chosen by Run
    editor.runAction()->trigger();
    QCOMPARE(runSpy.count(), 1);
    QVERIFY(done.wait(120000));
    const qint64 runId = done.at(0).at(0).toLongLong();
    QCOMPARE(panel.requests()->rowCount(), 20);

    auto store = rag::RunStore::open(bridge.runStorePath());
    QVERIFY(store.isOk());
    auto runs = store->listRuns();
    QCOMPARE((*runs)[0].id, runId);
    QVERIFY((*runs)[0].finished);
    QCOMPARE((*runs)[0].settings.workflowJson, m->graph().toJson());
    auto reqs = store->requests(runId);
    QCOMPARE(reqs->size(), size_t{20});
    for (const rag::RequestRecord& r : *reqs) {
      QVERIFY(r.ok);
      QCOMPARE(r.stages.size(), size_t{2});
      QCOMPARE(r.stages[0].node, std::string("find"));
      // Its spans reached the timeline: at least the request and its two node runs.
      QTRY_VERIFY_WITH_TIMEOUT(lanes.requestSpans(r.requestId).size() >= 3, 2000);
    }
  }

  // The run panel's KV switches reach the engine: ticking Block attention reloads it with
  // Block-Attention, and the run's generations read their passages as blocks (the engine counts
  // block tokens); unticking the prefix cache unticks Block attention, which needs it.
  void kvSwitchesReachTheEngine() {
    EngineBridge bridge;
    RunPanel panel(&bridge);
    QSignalSpy ready(&bridge, &EngineBridge::engineReady);
    bridge.startEngine(config());
    QVERIFY(ready.wait(60000));
    panel.configure("oneshot", "hedra", 0.0, 6);
    panel.setKvSwitches(true, true);
    QSignalSpy done(&bridge, &EngineBridge::runFinished);
    panel.start();  // reloads the engine (the switches changed), then runs
    QVERIFY(done.wait(120000));
    QVERIFY(bridge.config().blockAttention);
    QVERIFY(bridge.config().prefixCache);
    const rag::ServingStats s = bridge.stats();
    QVERIFY2(s.blockTokens > 0, "the generations did not read their passages as blocks");
    auto* blocks = panel.findChild<QCheckBox*>("blockAttention");
    auto* cache = panel.findChild<QCheckBox*>("prefixCache");
    QVERIFY(blocks && cache);
    cache->setChecked(false);
    QVERIFY(!blocks->isChecked());
  }

  // The run panel follows the editor's graph (a new template included) until the user picks a
  // built-in there, and its Start button names what it would run.
  void runPanelFollowsTheEditorUnlessTold() {
    EngineBridge bridge;
    RunPanel panel(&bridge);
    auto* box = panel.findChild<QComboBox*>("workflow");
    QVERIFY(box);
    panel.setEditorGraph(*rag::builtinWorkflow(rag::Workflow::Multistep));
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: multistep"));
    auto* start = panel.findChild<QPushButton*>("start");
    QVERIFY(start->toolTip().contains("multistep"));
    panel.setEditorGraph(*rag::builtinWorkflow(rag::Workflow::Irg));  // another template loaded
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: irg"));
    // The user picks a built-in: editor changes no longer take over.
    const int hyde = box->findText("hyde");
    box->setCurrentIndex(hyde);
    Q_EMIT box->activated(hyde);
    panel.setEditorGraph(*rag::builtinWorkflow(rag::Workflow::Recomp));
    QCOMPARE(panel.chosenWorkflowLabel(), QString("hyde"));
    QVERIFY(start->toolTip().contains("hyde"));
    // Picking the editor entry again resumes following.
    box->setCurrentIndex(0);
    Q_EMIT box->activated(0);
    panel.setEditorGraph(*rag::builtinWorkflow(rag::Workflow::OneShot));
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: oneshot"));
    // The compiled-in variants are there to pick beside the built-ins, and run their own files.
    const int variant = box->findText("irg-bridge");
    QVERIFY(variant > box->findText("irg"));
    box->setCurrentIndex(variant);
    Q_EMIT box->activated(variant);
    QString error;
    std::optional<rag::WorkflowGraph> chosen = panel.chosenGraph(&error);
    QVERIFY2(chosen, qPrintable(error));
    QCOMPARE(*chosen, rag::builtinWorkflowFile(rag::kIrgBridge).value());
    panel.setEditorGraph(*rag::builtinWorkflow(rag::Workflow::Hyde));  // the pick sticks
    QCOMPARE(panel.chosenWorkflowLabel(), QString("irg-bridge"));
  }

  // Issue 25: a new user picked multistep in the editor's Template box, pressed Start in the run
  // panel, and One-shot ran. Through the real parts as the main window wires them: the template
  // chosen in the editor is what Start runs (the run recorded in the history is multistep), the
  // panel says so before the run, and a built-in the user picks in the panel wins over later
  // editor changes.
  void startRunsTheTemplateChosenInTheEditor() {
    GraphEditor editor;
    editor.loadTemplate(rag::Workflow::OneShot);  // what the window showed before the user chose
    EngineBridge bridge;
    RunPanel panel(&bridge);
    panel.followEditor(editor.model());
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: oneshot"));

    QComboBox* templates = editor.templatesBox();
    const int multistep = templates->findText("multistep");
    QVERIFY(multistep >= 0);
    templates->setCurrentIndex(multistep);
    Q_EMIT templates->activated(multistep);  // as a click on the item does
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: multistep"));
    QVERIFY(panel.findChild<QPushButton*>("start")->toolTip().contains("multistep"));
    QString error;
    std::optional<rag::WorkflowGraph> chosen = panel.chosenGraph(&error);
    QVERIFY2(chosen, qPrintable(error));
    QCOMPARE(chosen->toJson(), rag::builtinWorkflow(rag::Workflow::Multistep)->toJson());
    // An edit in the editor reaches the panel too.
    QVERIFY(editor.model()->setGraphProperty(GraphModel::GraphProperty::Name, "my multistep").isOk());
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: my multistep"));

    // Start: the run that reaches the engine (and the history) is the editor's graph.
    QSignalSpy ready(&bridge, &EngineBridge::engineReady);
    bridge.startEngine(config());
    QVERIFY(ready.wait(60000));
    QSignalSpy done(&bridge, &EngineBridge::runFinished);
    panel.configure(panel.chosenWorkflowLabel(), "hedra", 0.0, 2);  // mode and count; keeps the workflow
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: my multistep"));
    panel.findChild<QPushButton*>("start")->click();
    QVERIFY2(done.wait(120000), qPrintable(panel.findChild<QLabel*>("status")->text()));
    auto store = rag::RunStore::open(bridge.runStorePath());
    QVERIFY(store.isOk());
    auto runs = store->listRuns();
    QVERIFY(runs.isOk() && !runs->empty());
    QCOMPARE((*runs)[0].id, done.at(0).at(0).toLongLong());
    QCOMPARE((*runs)[0].settings.workflow, std::string("my multistep"));
    QCOMPARE((*runs)[0].settings.workflowJson, editor.model()->graph().toJson());

    // Undoing the edit reaches the panel as well (and leaves nothing to discard).
    editor.undoAction()->trigger();
    QCOMPARE(panel.chosenWorkflowLabel(), QString("editor: multistep"));

    // The user picks a built-in in the panel: a template chosen in the editor later does not
    // take it back.
    QComboBox* box = panel.findChild<QComboBox*>("workflow");
    const int hyde = box->findText("hyde");
    box->setCurrentIndex(hyde);
    Q_EMIT box->activated(hyde);
    const int irg = templates->findText("irg");
    templates->setCurrentIndex(irg);
    Q_EMIT templates->activated(irg);
    QCOMPARE(panel.chosenWorkflowLabel(), QString("hyde"));
    QCOMPARE(panel.chosenGraph(&error)->name(), std::string("hyde"));
  }

  void closingMidRunKeepsFinishedRequests() {
    qint64 runId = 0;
    int finished = 0;
    {
      auto bridge = std::make_unique<EngineBridge>();
      QSignalSpy ready(bridge.get(), &EngineBridge::engineReady);
      bridge->startEngine(config());
      QVERIFY(ready.wait(60000));
      QSignalSpy started(bridge.get(), &EngineBridge::runStarted);
      QSignalSpy one(bridge.get(), &EngineBridge::requestFinished);
      RunRequest run;
      run.graph = *rag::builtinWorkflow(rag::Workflow::Multistep);
      run.split = "test";
      run.count = 40;
      run.rps = 10;
      QVERIFY(bridge->startRun(run));
      QVERIFY(started.count() == 1 || started.wait(30000));  // recorded on the driver thread
      runId = started.at(0).at(0).toLongLong();
      QTRY_VERIFY_WITH_TIMEOUT(one.count() >= 2, 60000);
      finished = static_cast<int>(one.count());
    }  // the window goes away: the bridge stops the run and the engine
    auto store = rag::RunStore::open(fs::path(m_dir.path().toStdString()) / "runs.db");
    auto reqs = store->requests(runId);
    int ok = 0;
    for (const rag::RequestRecord& r : *reqs) ok += r.ok;
    QVERIFY(ok >= finished);
    QVERIFY(ok < 40);
    auto runs = store->listRuns();
    QVERIFY((*runs)[0].finished);  // metrics and trace written on the way out
  }
};

QTEST_MAIN(TestWorkbenchE2e)
#include "test_workbench_e2e.moc"
