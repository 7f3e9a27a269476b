#include "main_window.h"

#include <memory>
#include <type_traits>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QKeySequence>
#include <QMenuBar>
#include <QMessageBox>
#include <QSaveFile>
#include <QSettings>
#include <QStatusBar>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>

#include "bridge/gui_stall_meter.h"
#include "heatmap/cluster_heatmap.h"
#include "heatmap/kv_heatmap.h"
#include "panels/block_attention_panel.h"
#include "panels/dep_cache_panel.h"
#include "history/run_history_panel.h"
#include "inspectors/kg_inspector.h"
#include "inspectors/dragon_page.h"
#include "inspectors/windve_page.h"
#include "reproduce/reproduce_page.h"
#include "tour/guided_tour.h"
#include "nodegraph/graph_model.h"
#include "inspectors/kv_tree_inspector.h"
#include "nodegraph/graph_editor.h"
#include "overview/overview_page.h"
#include "run/run_panel.h"
#include "timeline/lane_model.h"
#include "timeline/timeline_view.h"
#include "tools/tool_registry.h"

namespace ragwb {

MainWindow::MainWindow(std::filesystem::path corpus, std::filesystem::path modelDir, std::string device, QWidget* parent)
    : QMainWindow(parent), m_corpus(std::move(corpus)) {
  setWindowTitle(tr("RAGraph Workbench"));
  setDockNestingEnabled(true);
  m_editor = new GraphEditor(this);
  m_editor->loadTemplate(rag::Workflow::Multistep);
  setCentralWidget(m_editor);
  m_stall = new GuiStallMeter(this);
  m_engineState = new QLabel(tr("Engine: loading…"));
  m_servingState = new QLabel;
  statusBar()->addPermanentWidget(m_servingState);
  statusBar()->addPermanentWidget(m_engineState);
  buildDocks();
  buildMenus();

  connect(m_overview, &OverviewPage::loaded, this, [this](const QString& summary) {
    statusBar()->showMessage(tr("Corpus loaded: %1").arg(summary), 8000);
  });
  connect(m_overview, &OverviewPage::failed, this, [this](const QString& message) {
    statusBar()->showMessage(tr("No corpus: %1").arg(message));
  });
  connect(m_editor, &GraphEditor::statusMessage, this, [this](const QString& m) { statusBar()->showMessage(m, 6000); });
  // The run panel offers (and, until the user picks a built-in there, runs) the editor's graph.
  m_runPanel->followEditor(m_editor->model());
  connect(m_editor, &GraphEditor::runRequested, this, [this](const rag::WorkflowGraph& g) {
    m_runPanel->setEditorGraph(g, /*select=*/true);
    m_runPanel->start();
  });
  connect(&m_bridge, &EngineBridge::engineLoading, this, [this](const QString&) { m_engineState->setText(tr("Engine: loading…")); });
  connect(&m_bridge, &EngineBridge::engineReady, this, [this](const QString& mode) {
    m_engineState->setText(tr("Engine: ready (%1)").arg(mode));
  });
  connect(&m_bridge, &EngineBridge::engineFailed, this, [this](const QString& message) {
    m_engineState->setText(tr("Engine: not available"));
    m_engineState->setToolTip(message);
    statusBar()->showMessage(message);
  });
  connect(&m_bridge, &EngineBridge::traceEvents, this,
          [this](const std::vector<rag::TraceEvent>& events, const std::vector<rag::TraceLane>& lanes) {
            m_lanes->setLanes(lanes);
            m_lanes->append(events);
          });
  connect(&m_bridge, &EngineBridge::clusterHeat, m_heatmap, &ClusterHeatmap::addSample);
  connect(&m_bridge, &EngineBridge::kvBlocks, m_kvHeat, &KvHeatmap::addSample);
  connect(&m_bridge, &EngineBridge::runStarted, this, [this](qint64, int) {
    m_lanes->clear();
    m_heatmap->clear();
    m_kvHeat->clear();
    m_timeline->setFollowLive(true);
    m_stall->start();
  });
  connect(&m_bridge, &EngineBridge::runFinished, this, [this](qint64, const rag::RunMetrics&) {
    m_stall->stop();
    m_timeline->zoomToFit();  // the whole run, to scrub
    m_history->refresh();
    updateStatus();
  });
  connect(m_history, &RunHistoryPanel::runOpened, this,
          [this](qint64 id, const rag::StoredTrace& trace, const std::vector<rag::RequestRecord>&, const rag::RunSummary&) {
            m_lanes->clear();
            m_lanes->setLanes(trace.lanes);
            m_lanes->append(trace.events);
            m_timeline->setFollowLive(false);
            m_timeline->zoomToFit();
            statusBar()->showMessage(tr("Run %1 reopened: %2 trace spans").arg(id).arg(trace.events.size()), 8000);
          });
  // A DRAGON run or a WindVE load: the stall meter watches the GUI thread while the page streams
  // it in, and the status bar reports the longest stall when it ends.
  auto watchStalls = [this](auto* page, const QString& name, const QString& what) {
    using Page = std::remove_pointer_t<decltype(page)>;
    connect(page, &Page::runStarted, this, [this] {
      m_stall->reset();
      m_stall->start();
    });
    connect(page, &Page::runFinished, this, [this, name, what](bool ok, const QString& message) {
      if (m_stall->ticks() > 0)
        statusBar()->showMessage(tr("%1: %2 Longest GUI stall during the %3 %4 ms.").arg(name, message, what).arg(m_stall->maxStallMs(), 0, 'f', 1), 15000);
      else if (!ok)
        statusBar()->showMessage(tr("%1: %2").arg(name, message), 15000);
      m_stall->stop();
      updateStatus();
    });
  };
  watchStalls(m_dragon, tr("DRAGON"), tr("run"));
  watchStalls(m_windve, tr("WindVE"), tr("load"));
  // A paper figure's bench: it runs in a child process; the stall meter shows the GUI thread
  // kept responsive meanwhile.
  connect(m_reproduce, &ReproducePage::runStarted, this, [this] {
    m_stall->reset();
    m_stall->start();
  });
  connect(m_reproduce, &ReproducePage::runFinished, this, [this](bool, const QString& message, qint64) {
    statusBar()->showMessage(tr("Reproduce: %1 Longest GUI stall during the bench %2 ms.").arg(message).arg(m_stall->maxStallMs(), 0, 'f', 1), 15000);
    m_stall->stop();
    updateStatus();
  });
  auto* statusTimer = new QTimer(this);
  connect(statusTimer, &QTimer::timeout, this, &MainWindow::updateStatus);
  statusTimer->start(1000);

  QSettings settings;
  if (!restoreGeometry(settings.value("mainWindow/geometry").toByteArray())) resize(1600, 1000);
  restoreState(settings.value("mainWindow/state").toByteArray());
  m_overview->loadCorpus(m_corpus);
  m_history->setStorePath(m_bridge.runStorePath());
  m_reproduce->setStorePath(QString::fromStdString(m_bridge.runStorePath().string()));
  EngineConfig config;
  config.corpus = m_corpus;
  config.modelDir = std::move(modelDir);
  config.device = std::move(device);
  m_bridge.startEngine(config);
}

MainWindow::~MainWindow() = default;

void MainWindow::addTool(const QString& id, const QString& title, QWidget* widget, const ToolPlacement& where) {
  // A refused tool is a programming error (a duplicate or misspelt id): say which, and go on
  // without it rather than lose the window.
  if (auto added = m_tools->add(id, title, widget, where); !added) {
    qWarning("%s", added.status().message().c_str());
    delete widget;
  }
}

void MainWindow::buildDocks() {
  m_lanes = new LaneModel(this);
  auto* timelineBox = new QWidget;
  auto* tl = new QVBoxLayout(timelineBox);
  tl->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QToolBar;
  bar->setIconSize(QSize(16, 16));
  m_timeline = new TimelineView(m_lanes);
  QAction* follow = bar->addAction(tr("Follow live"));
  follow->setCheckable(true);
  follow->setChecked(true);
  follow->setShortcut(QKeySequence(Qt::Key_F));
  connect(follow, &QAction::toggled, m_timeline, &TimelineView::setFollowLive);
  connect(m_timeline, &TimelineView::followLiveChanged, follow, &QAction::setChecked);
  bar->addAction(tr("Zoom to fit"), m_timeline, &TimelineView::zoomToFit);
  tl->addWidget(bar);
  tl->addWidget(m_timeline, 1);
  m_heatmap = new ClusterHeatmap;
  m_kvHeat = new KvHeatmap;
  m_runPanel = new RunPanel(&m_bridge);
  m_history = new RunHistoryPanel;
  m_overview = new OverviewPage;
  m_kvTree = new KvTreeInspector(&m_bridge);
  m_blocks = new BlockAttentionPanel(&m_bridge);
  m_depCache = new DepCachePanel(&m_bridge);
  m_kg = new KgInspector(&m_bridge);
  m_kg->setCorpus(m_corpus);
  m_dragon = new DragonPage;
  m_dragon->setSources(rag::defaultModelDirectory(), m_corpus);
  m_windve = new WindVePage;
  m_windve->setSources(rag::defaultEmbedderDirectory(), m_corpus);
  m_reproduce = new ReproducePage;

  // The ids are the docks' object names, which saved layouts (QSettings) refer to: keep them.
  m_tools = new ToolRegistry(this);
  using P = ToolPlacement;
  addTool("timelineDock", tr("Pipeline timeline"), timelineBox, P::inArea(Qt::BottomDockWidgetArea));
  addTool("heatmapDock", tr("Cluster heatmap"), m_heatmap, P::besideOf("timelineDock"));
  addTool("kvHeatDock", tr("KV heatmap"), m_kvHeat, P::besideOf("heatmapDock"));
  addTool("runDock", tr("Run"), m_runPanel, P::inArea(Qt::RightDockWidgetArea));
  addTool("historyDock", tr("Run history"), m_history, P::tabbedWith("runDock"));
  addTool("overviewDock", tr("Corpus"), m_overview, P::tabbedWith("historyDock"));
  addTool("kvTreeDock", tr("KV tree"), m_kvTree, P::tabbedWith("heatmapDock"));
  addTool("kgDock", tr("Knowledge graph"), m_kg, P::tabbedWith("kvTreeDock"));
  addTool("blockAttentionDock", tr("Block attention"), m_blocks, P::tabbedWith("kgDock"));
  addTool("depCacheDock", tr("DepCache"), m_depCache, P::tabbedWith("blockAttentionDock"));
  addTool("dragonDock", tr("DRAGON"), m_dragon, P::tabbedWith("depCacheDock"));
  addTool("windveDock", tr("WindVE"), m_windve, P::tabbedWith("dragonDock"));
  addTool("reproduceDock", tr("Reproduce"), m_reproduce, P::tabbedWith("windveDock"));
  m_tools->raise("runDock");
  m_tools->raise("heatmapDock");
  resizeDocks({m_tools->dock("timelineDock"), m_tools->dock("heatmapDock"), m_tools->dock("kvHeatDock")},
              {800, 400, 400}, Qt::Horizontal);
  resizeDocks({m_tools->dock("timelineDock")}, {380}, Qt::Vertical);
  resizeDocks({m_tools->dock("runDock")}, {640}, Qt::Horizontal);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(m_editor->openAction());
  file->addAction(m_editor->saveAction());
  file->addAction(m_editor->saveAsAction());
  file->addSeparator();
  file->addAction(tr("Open &Corpus…"), this, &MainWindow::openCorpus);
  QAction* reload = file->addAction(tr("&Reload Corpus"), this, [this] { m_overview->loadCorpus(m_corpus); });
  reload->setShortcut(QKeySequence::Refresh);
  file->addAction(tr("Export &Trace (Chrome JSON)…"), this, &MainWindow::exportTrace);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  edit->addAction(m_editor->undoAction());
  edit->addAction(m_editor->redoAction());
  edit->addSeparator();
  edit->addAction(m_editor->validateAction());

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* start = run->addAction(tr("&Start"), m_runPanel, &RunPanel::start);
  start->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  QAction* stop = run->addAction(tr("S&top"), m_runPanel, &RunPanel::stop);
  stop->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
  run->addAction(m_editor->runAction());

  m_viewMenu = menuBar()->addMenu(tr("&View"));
  m_viewMenu->addActions(m_tools->toggleActions());
  m_viewMenu->addSeparator();
  m_viewMenu->addAction(tr("Zoom Timeline to &Fit"), m_timeline, &TimelineView::zoomToFit);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("Guided &Tour"), this, &MainWindow::startTour);
  help->addSeparator();
  help->addAction(tr("&About RAGraph Workbench"), this, &MainWindow::about);
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::updateStatus() {
  const rag::ServingStats s = m_bridge.stats();
  QString text = tr("%1 live · %2 sequences · KV %3/%4 blocks · %5 search tasks · generation %6% · retrieval %7% busy")
                     .arg(s.liveRequests)
                     .arg(s.runningSequences)
                     .arg(s.kvBlocksUsed)
                     .arg(s.kvBlocksTotal)
                     .arg(s.searchTasks)
                     .arg(qRound(100.0 * s.generationLoad))
                     .arg(qRound(100.0 * s.retrievalLoad));
  if (s.embeddingBusySeconds > 0)  // hedra embeds queries on a thread of its own
    text += tr(" · embedding %1% busy").arg(qRound(100.0 * s.embeddingLoad));
  if (s.prefixCacheOn)  // the cached blocks are part of the KV in use, free to evict
    text += tr(" · prefix cache %1 blocks, %2% of prompt tokens hit")
                .arg(s.prefixCachedBlocks)
                .arg(qRound(100.0 * s.prefixHitRate()));
  if (s.blockTokens > 0)  // Block-Attention: passage-block tokens found cached or in the block store
    text += tr(" · blocks %1% reused (%2 stored passages)")
                .arg(qRound(100.0 * static_cast<double>(s.blockHitTokens) / static_cast<double>(s.blockTokens)))
                .arg(s.blockStoreRecords);
  if (m_stall->ticks() > 0) text += tr(" · longest GUI stall %1 ms").arg(m_stall->maxStallMs(), 0, 'f', 1);
  m_servingState->setText(text);
}

void MainWindow::openCorpus() {
  QString file = QFileDialog::getOpenFileName(this, tr("Open Corpus"),
                                              QString::fromStdString(m_corpus.parent_path().string()),
                                              tr("Corpus databases (*.db);;All files (*)"));
  if (file.isEmpty()) return;
  m_corpus = file.toStdString();
  m_overview->loadCorpus(m_corpus);
  m_kg->setCorpus(m_corpus);
  m_dragon->setSources(rag::defaultModelDirectory(), m_corpus);
  m_windve->setSources(rag::defaultEmbedderDirectory(), m_corpus);
  EngineConfig c = m_bridge.config();
  c.corpus = m_corpus;
  m_bridge.startEngine(c);
}

void MainWindow::exportTrace() {
  const QString file = QFileDialog::getSaveFileName(this, tr("Export Trace"), "trace.json", tr("Chrome trace (*.json)"));
  if (file.isEmpty()) return;
  rag::StoredTrace t{m_bridge.runTrace(), m_bridge.lanes()};
  QSaveFile out(file);  // written whole or not at all
  if (!out.open(QIODevice::WriteOnly) || out.write(RunHistoryPanel::chromeTraceJson(t)) < 0 || !out.commit())
    QMessageBox::warning(this, tr("Export Trace"), tr("Could not write %1: %2").arg(file, out.errorString()));
  else
    statusBar()->showMessage(tr("Trace written to %1 (%2 spans)").arg(file).arg(t.events.size()), 6000);
}

void MainWindow::startTour() {
  if (!m_tour) {
    m_tour = new GuidedTour(defaultTourSteps(), this);
    m_tourPanel = new TourPanel(m_tour, this, [this](const QString& id) -> QWidget* {
      if (id.isEmpty()) return m_editor;
      m_tools->raise(id);
      return m_tools->dock(id);
    });
    connect(m_tour, &GuidedTour::actionRequested, this, [this](TourStep::Action a) {
      if (a == TourStep::Action::LoadWorkflow) {
        m_editor->loadTemplate(rag::Workflow::Irg);
      } else if (a == TourStep::Action::RunWorkflow) {
        m_runPanel->configure(QStringLiteral("irg"), QStringLiteral("hedra"), 4.0, 8);
        m_runPanel->setEditorGraph(m_editor->model()->graph(), /*select=*/true);
        if (m_bridge.isEngineReady()) {
          m_runPanel->start();
        } else {  // still loading: the run starts when the engine is ready
          statusBar()->showMessage(tr("Tour: the run starts once the engine has loaded."), 8000);
          auto once = std::make_shared<QMetaObject::Connection>();
          *once = connect(&m_bridge, &EngineBridge::engineReady, this, [this, once] {
            disconnect(*once);
            m_runPanel->start();
          });
        }
      }
    });
  }
  m_tour->start();
}

void MainWindow::about() {
  QMessageBox::about(this, tr("About RAGraph Workbench"),
                     tr("<h3>RAGraph Workbench %1</h3>"
                        "<p>A workbench for designing, serving and understanding heterogeneous "
                        "RAG workflows, with an embedded serving engine. Built: HedraRAG, "
                        "WindVE (ragraph bench embed, and live in the WindVE page), DepCache's and "
                        "Block-Attention's serving paths (run from the command line with "
                        "--graph-attention and --block-attention, and shown in their panels) and "
                        "DRAGON (ragraph dragon, and live in the DRAGON page).</p>")
                         .arg(QApplication::applicationVersion()));
}

void MainWindow::closeEvent(QCloseEvent* e) {
  // A run in progress is stopped; its finished requests are already in the history, and the
  // bridge records the rest (cancelled) and the trace before the engine goes.
  if (m_bridge.running()) m_bridge.stopRun();
  QSettings settings;
  settings.setValue("mainWindow/geometry", saveGeometry());
  settings.setValue("mainWindow/state", saveState());
  e->accept();
}

}  // namespace ragwb
