// ragraph-workbench: the desktop workbench.
//   ragraph-workbench [--corpus PATH] [--screenshot FILE.png] [--demo] [--bench-timeline [--spans N]]
//                     [--bench-kvtree [--nodes N]] [--show TOOL] [--demo-kg] [--demo-kv] [--demo-blocks]
//                     [--demo-dep] [--dragon QUESTION [--dragon-latency MS] [--dragon-tokens N]]
//                     [--windve [--windve-slo S] [--windve-clients N] [--windve-seconds S] [--windve-no-hetero]]
//                     [--reproduce FIGURE [--reproduce-args ARGS]] [--tour]
// --screenshot renders the window once its pages have loaded (with --demo: once the demo run has
// finished), saves the PNG and exits; --demo runs a short IRG workload on the default
// corpus through the editor's graph, so the timeline, heatmap and tables fill; --demo-kg runs the
// GraphRAG workflow with the knowledge-graph inspector in front, following each request, and
// prints the longest GUI stall of the run; --demo-kv runs IRG (prompts sharing prefixes) for about
// eight seconds with the KV heatmap in front and prints its GUI-thread work; --demo-blocks runs
// the same one-shot questions twice with Block attention on and the Block-attention panel in front;
// --demo-dep runs GraphRAG twice under each eviction policy (LACR at α 0.2) with the DepCache panel in front;
// --dragon runs one live DRAGON exchange in the DRAGON page (brought to the front) and prints its
// summary and the GUI thread's longest stall during it (with --screenshot: saved after the run);
// --windve calibrates the WindVE page's embedding service and runs its closed-loop load the same
// way, printing the depths, throughput, BUSY share, latency against the SLO and longest stall;
// --reproduce runs a paper figure's bench in the Reproduce page the same way (its result saved
// into the run history); --tour starts the guided tour (with --screenshot it walks itself to the
// run, and the window is saved once the run has finished, at the timeline step); --bench-timeline
// and --bench-kvtree print the timeline's and the KV-tree inspector's drawing speed as JSON and exit.
#include <QApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QCheckBox>
#include <QCommandLineParser>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QJsonDocument>
#include <QTableView>
#include <QTimer>
#include <cstdio>
#include <iterator>
#include <functional>
#include <memory>
#include <optional>

#include "bridge/gui_stall_meter.h"
#include "core/blas_info.h"
#include "core/crash_report.h"
#include "heatmap/kv_heatmap.h"
#include "panels/block_attention_panel.h"
#include "panels/dep_cache_panel.h"
#include "main_window.h"
#include "nodegraph/graph_editor.h"
#include "overview/overview_page.h"
#include "rag/corpus.h"
#include "rag/workflow.h"
#include "run/run_panel.h"
#include "inspectors/kg_inspector.h"
#include "inspectors/dragon_page.h"
#include "inspectors/windve_page.h"
#include "inspectors/kv_tree_bench.h"
#include "inspectors/kv_tree_inspector.h"
#include "reproduce/paper_figures.h"
#include "reproduce/reproduce_page.h"
#include "timeline/timeline_bench.h"
#include "tools/tool_registry.h"
#include "tour/guided_tour.h"

namespace {

// Brings tool `id` to the front, floated at `size` (a screenshot of it is then of the tool alone).
void floatTool(ragwb::MainWindow& window, const QString& id, QSize size) {
  window.tools()->raise(id);
  if (QDockWidget* dock = window.tools()->dock(id)) {
    dock->setFloating(true);
    dock->resize(size);
  }
}

// After `delayMs` (a few more paints), saves `widget` as the PNG `file` and exits with the result;
// without a file, just exits.
void saveAndExit(QWidget* widget, const QString& file, int delayMs) {
  QTimer::singleShot(delayMs, widget, [widget, file] {
    if (file.isEmpty()) return QApplication::exit(0);
    const bool ok = widget->grab().save(file);
    std::fprintf(ok ? stdout : stderr, ok ? "saved %s\n" : "error: cannot write %s\n", qPrintable(file));
    QApplication::exit(ok ? 0 : 1);
  });
}

// Calls `start` once: when the engine has loaded, or (with `orFailed`) failed to, so that its
// loading does not share the run being measured.
void startOnceEngineSettles(ragwb::MainWindow& window, QObject* context, std::function<void()> start, bool orFailed) {
  auto once = [start = std::move(start), done = std::make_shared<bool>(false)] {
    if (*done) return;
    *done = true;
    start();
  };
  QObject::connect(window.bridge(), &ragwb::EngineBridge::engineReady, context, once);
  if (orFailed) QObject::connect(window.bridge(), &ragwb::EngineBridge::engineFailed, context, once);
}

// A demo's engine that failed to load: said on stderr, then `shoot` (the window's screenshot).
template <class Shoot>
void reportEngineFailure(ragwb::MainWindow& window, const char* demo, Shoot shoot) {
  QObject::connect(window.bridge(), &ragwb::EngineBridge::engineFailed, &window, [demo, shoot](const QString& why) {
    std::fprintf(stderr, "%s: the engine is not available: %s\n", demo, qPrintable(why));
    shoot();
  });
}

// The workbench's application: it times every event the GUI thread's loop dispatches and hands
// it to the stall meter, which keeps those of the longest stall (printed when the app quits).
class WorkbenchApplication : public QApplication {
public:
  using QApplication::QApplication;
  bool notify(QObject* receiver, QEvent* event) override {
    static thread_local int depth = 0;
    if (depth > 0) return QApplication::notify(receiver, event);  // inside a timed event
    // Read before the dispatch, which may delete the receiver (DeferredDelete).
    const char* className = receiver->metaObject()->className();
    const QString objectName = receiver->objectName();
    const QEvent::Type type = event->type();
    QElapsedTimer clock;
    clock.start();
    ++depth;
    const bool handled = QApplication::notify(receiver, event);
    --depth;
    ragwb::GuiStallMeter::noteEvent(className, objectName, type, clock.nsecsElapsed());
    return handled;
  }
};

}  // namespace

int main(int argc, char** argv) {
  rag::restartWithBetterBlasKernels(argv);  // core/blas_info.h: before anything else runs
  rag::installCrashReport("ragraph-workbench");  // core/crash_report.h: a fatal signal says where
  WorkbenchApplication app(argc, argv);
  QApplication::setOrganizationName("RAGraph");
  QApplication::setApplicationName("RAGraph Workbench");
  QApplication::setApplicationVersion(RAGWB_VERSION);

  QCommandLineParser parser;
  parser.setApplicationDescription("Design, serve and understand heterogeneous RAG workflows.");
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption corpusOpt("corpus", "Corpus database (default: the one `ragraph corpus build` made).", "PATH");
  QCommandLineOption modelOpt("model", "The language model to serve with, a model directory (default: the shipped "
                              "datasets/models/rag-llama-roles-wide; e.g. datasets/models/rag-llama).", "DIR");
  QCommandLineOption deviceOpt("device", "Where generation runs: cpu (default), cuda or cuda:N (the GPU backend; "
                               "the timeline's generation lane then says which).", "DEVICE", "cpu");
  QCommandLineOption shotOpt("screenshot", "Save a PNG of the window once loaded (with --demo: after the run), then exit.", "FILE");
  QCommandLineOption demoOpt("demo", "Run a short IRG workload (hedra) so every view fills.");
  QCommandLineOption benchOpt("bench-timeline", "Print the timeline's frames per second as JSON and exit.");
  QCommandLineOption spansOpt("spans", "Spans for --bench-timeline (default 200000).", "N", "200000");
  QCommandLineOption kvBenchOpt("bench-kvtree", "Print the KV-tree inspector's frames per second as JSON and exit.");
  QCommandLineOption nodesOpt("nodes", "Nodes for --bench-kvtree (default 20000).", "N", "20000");
  QCommandLineOption showOpt("show", "Bring the tool TOOL to the front (its dock id, e.g. kvTreeDock).", "TOOL");
  QCommandLineOption demoKgOpt("demo-kg",
                               "Run 16 GraphRAG questions (hedra) with the knowledge-graph inspector in front "
                               "following each request; print the longest GUI stall.");
  QCommandLineOption demoKvOpt("demo-kv",
                               "Run 48 IRG questions (hedra, 6 req/s) with the KV heatmap in front; print the "
                               "longest GUI stall and the heatmap's own GUI-thread work.");
  QCommandLineOption demoBlocksOpt("demo-blocks",
                                   "Run 24 one-shot questions twice (hedra, 6 req/s) with Block attention on and the "
                                   "Block-attention panel in front; print the longest GUI stall and the panel's own "
                                   "GUI-thread work.");
  QCommandLineOption demoDepOpt("demo-dep",
                                "Run the same 32 GraphRAG questions (hedra, 8 req/s) twice under each eviction policy "
                                "(lru, lfu, pgdsf, lacr at alpha 0.2) with the DepCache panel in front; print each "
                                "policy's subgraph hit rate so far, the longest GUI stall and the panel's own "
                                "GUI-thread work.");
  QCommandLineOption dragonOpt("dragon", "Run one live DRAGON exchange on QUESTION in the DRAGON page.", "QUESTION");
  QCommandLineOption dragonLatencyOpt("dragon-latency", "Added link latency for --dragon, ms (default 100).", "MS", "100");
  QCommandLineOption dragonTokensOpt("dragon-tokens", "Decode exactly N tokens in --dragon (EOS ignored).", "N");
  QCommandLineOption windveOpt("windve", "Calibrate the WindVE page's embedding service and run its load.");
  QCommandLineOption windveSloOpt("windve-slo", "Latency SLO for --windve, [0.05, 10] s (default 0.1: tight enough that "
                                  "the depths come from the SLO, not the calibration's cap of 256).", "S", "0.1");
  QCommandLineOption windveClientsOpt("windve-clients", "Closed-loop clients for --windve, [1, 512] (default 384: past both depths).", "N", "384");
  QCommandLineOption windveNoHeteroOpt("windve-no-hetero", "--windve with heterogeneous mode off (no offload: past the "
                                       "main queue every query is BUSY).");
  QCommandLineOption windveSecondsOpt("windve-seconds", "Duration of --windve's load, [1, 600] s (default 10).", "S", "10");
  QCommandLineOption reproduceOpt("reproduce", "Run FIGURE's bench in the Reproduce page (e.g. blocks-table2).", "FIGURE");
  QCommandLineOption reproduceArgsOpt("reproduce-args", "Extra arguments for --reproduce's bench.", "ARGS");
  QCommandLineOption tourOpt("tour", "Start the guided tour: load a workflow, run it, and see what each view shows.");
  parser.addOptions({corpusOpt, modelOpt, deviceOpt, shotOpt, demoOpt, benchOpt, spansOpt, kvBenchOpt, nodesOpt, showOpt, demoKgOpt, demoKvOpt,
                     demoBlocksOpt, demoDepOpt, dragonOpt, dragonLatencyOpt, dragonTokensOpt, windveOpt,
                     windveSloOpt, windveClientsOpt, windveNoHeteroOpt, windveSecondsOpt, reproduceOpt,
                     reproduceArgsOpt, tourOpt});
  parser.addPositionalArgument("workflow",
                               "A workflow to open in the editor: a workflow JSON file or a built-in's name (oneshot, "
                               "hyde, multistep, irg, recomp, graphrag) or a variant's (irg-bridge, recomp-abstractive).",
                               "[WORKFLOW]");
  parser.process(app);
  const QStringList positional = parser.positionalArguments();
  if (positional.size() > 1) {
    std::fprintf(stderr, "error: one workflow at most, not %lld (%s)\n", static_cast<long long>(positional.size()),
                 qPrintable(positional.join(' ')));
    return 2;
  }
  // A built-in's or a variant's name, or a file that reads as a workflow: checked before the
  // window opens.
  std::optional<std::string> builtinToOpen;
  QString fileToOpen;
  if (!positional.isEmpty()) {
    const std::string name = positional.front().toStdString();
    if (rag::isCompiledInWorkflow(name)) {
      builtinToOpen = name;
    } else {
      const rag::Result<rag::WorkflowGraph> g = rag::WorkflowGraph::load(name);
      if (!g) {
        std::fprintf(stderr, "error: %s (give a workflow JSON file or a built-in's name: oneshot, hyde, multistep, irg, "
                     "recomp, graphrag, or a variant's: irg-bridge, recomp-abstractive)\n", g.status().message().c_str());
        return 2;
      }
      fileToOpen = positional.front();
    }
  }

  // --bench-*: its count option must be a positive number; the result is printed as JSON.
  auto bench = [&parser](const QCommandLineOption& countOpt, auto run) {
    bool ok = false;
    const int n = parser.value(countOpt).toInt(&ok);
    if (!ok || n < 1) {
      std::fprintf(stderr, "error: --%s takes a positive number, not '%s'\n", qPrintable(countOpt.names().constFirst()),
                   qPrintable(parser.value(countOpt)));
      return 2;
    }
    std::printf("%s\n", QJsonDocument(run(n).toJson()).toJson(QJsonDocument::Indented).constData());
    return 0;
  };
  if (parser.isSet(benchOpt)) return bench(spansOpt, [](int n) { return ragwb::benchmarkTimeline(n); });
  if (parser.isSet(kvBenchOpt)) return bench(nodesOpt, [](int n) { return ragwb::benchmarkKvTree(n); });

  std::filesystem::path corpus = parser.isSet(corpusOpt)
                                     ? std::filesystem::path(parser.value(corpusOpt).toStdString())
                                     : rag::defaultCorpusLocation();
  std::filesystem::path modelDir;
  if (parser.isSet(modelOpt)) {
    modelDir = parser.value(modelOpt).toStdString();
    std::error_code ec;
    if (!std::filesystem::exists(modelDir / "config.json", ec)) {
      std::fprintf(stderr, "error: --model: no model at %s (its config.json is missing); give a model directory such "
                   "as datasets/models/rag-llama-roles\n", modelDir.string().c_str());
      return 2;
    }
  }
  ragwb::MainWindow window(corpus, modelDir, parser.value(deviceOpt).toStdString());
  QObject::connect(&app, &QCoreApplication::aboutToQuit, &window, [&window] {
    const QStringList events = window.stallMeter()->maxStallEvents();
    if (!events.isEmpty())
      std::printf("GUI events during the longest stall: %s\n", qPrintable(events.mid(0, 8).join(QStringLiteral("; "))));
  });
  window.show();
  if (builtinToOpen) window.editor()->loadTemplate(std::string_view(*builtinToOpen));
  else if (!fileToOpen.isEmpty()) (void)window.editor()->openFile(fileToOpen);
  if (parser.isSet(showOpt) && !window.tools()->raise(parser.value(showOpt))) {
    std::fprintf(stderr, "error: --show: no tool '%s'; the tools are: %s\n", qPrintable(parser.value(showOpt)),
                 qPrintable(window.tools()->ids().join(", ")));
    return 2;
  }

  const QString shotFile = parser.value(shotOpt);
  auto shoot = [&window, shotFile] {
    if (shotFile.isEmpty()) return;
    QTimer::singleShot(400, &window, [&window, shotFile] {  // a few more paints after the data arrived
      bool ok = window.grab().save(shotFile);
      std::fprintf(ok ? stdout : stderr, ok ? "saved %s\n" : "error: cannot write %s\n", qPrintable(shotFile));
      QApplication::exit(ok ? 0 : 1);
    });
  };
  if (parser.isSet(demoKgOpt)) {
    // The inspector floats at a size where a subgraph reads; --screenshot saves it alone.
    floatTool(window, "kgDock", {1400, 860});
    startOnceEngineSettles(window, &window, [&window] {
      window.editor()->loadTemplate(rag::Workflow::GraphRag);
      window.runPanel()->configure("graphrag", "hedra", 6.0, 16);
      window.runPanel()->setEditorGraph(window.editor()->model()->graph(), /*select=*/true);
      window.runPanel()->start();
    }, /*orFailed=*/false);
    QObject::connect(window.bridge(), &ragwb::EngineBridge::runFinished, &window,
                     [&window, shotFile](qint64 id, const rag::RunMetrics& m) {
                       std::printf("demo-kg run %lld (graphrag): %lld/%lld answered, %d requests in the knowledge-graph "
                                   "inspector, longest GUI stall %.1f ms (GUI thread working %.1f ms of it); the "
                                   "inspector's longest GUI-thread work: %.1f ms per request, %.1f ms per drawing\n",
                                   static_cast<long long>(id), static_cast<long long>(m.completed),
                                   static_cast<long long>(m.requests), window.knowledgeGraph()->requests()->requestCount(),
                                   window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs(),
                                   window.knowledgeGraph()->longestRequestMs(), window.knowledgeGraph()->longestApplyMs());
                       std::fflush(stdout);
                       // The last request's layout lands first; without --screenshot the demo ends here.
                       saveAndExit(window.knowledgeGraph(), shotFile, 1500);
                     });
    reportEngineFailure(window, "demo-kg", shoot);
  } else if (parser.isSet(demoDepOpt)) {
    floatTool(window, "depCacheDock", {1000, 640});
    static const char* const kPolicies[] = {"lru", "lfu", "pgdsf", "lacr"};
    auto next = std::make_shared<size_t>(0);
    auto startRun = [&window, next] {
      window.editor()->loadTemplate(rag::Workflow::GraphRag);
      window.runPanel()->configure("graphrag", "hedra", 8.0, 32);
      window.runPanel()->setEviction(kPolicies[*next / 2], 0.2);  // two runs per policy: the second reuses
      window.runPanel()->setEditorGraph(window.editor()->model()->graph(), /*select=*/true);
      window.runPanel()->start();  // reloads the engine under the next policy
    };
    startOnceEngineSettles(window, &window, startRun, /*orFailed=*/false);
    QObject::connect(window.bridge(), &ragwb::EngineBridge::runFinished, &window,
                     [&window, shotFile, next, startRun](qint64 id, const rag::RunMetrics& m) {
                       ragwb::DepCachePolicyModel* p = window.depCache()->policies();
                       const int row = p->rowOf(ragwb::DepCachePanel::policyLabel(window.bridge()->config()));
                       const ragwb::CacheCounters c = p->totals(row);
                       std::printf("demo-dep run %lld (graphrag, %s): %lld/%lld answered, the policy's subgraph hit rate %.1f %% "
                                   "(%lld of %lld tokens), longest GUI stall %.1f ms (GUI thread working %.1f ms of "
                                   "it); the panel's longest GUI-thread work: %.1f ms per stats report\n",
                                   static_cast<long long>(id), kPolicies[*next / 2], static_cast<long long>(m.completed),
                                   static_cast<long long>(m.requests), std::max(0.0, c.subgraphHitRate()) * 100,
                                   static_cast<long long>(c.subgraphHits), static_cast<long long>(c.subgraphTokens),
                                   window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs(),
                                   window.depCache()->longestReportMs());
                       std::fflush(stdout);
                       if (++*next < 2 * std::size(kPolicies)) return QTimer::singleShot(0, &window, startRun);
                       saveAndExit(window.depCache(), shotFile, 600);
                     });
    reportEngineFailure(window, "demo-dep", shoot);
  } else if (parser.isSet(demoBlocksOpt)) {
    // The same questions twice: the first run computes the passage blocks, the second reuses them.
    floatTool(window, "blockAttentionDock", {1100, 720});
    auto runs = std::make_shared<int>(0);
    auto startRun = [&window] {
      window.editor()->loadTemplate(rag::Workflow::OneShot);
      window.runPanel()->configure("oneshot", "hedra", 6.0, 24);
      window.runPanel()->setKvSwitches(/*prefixCache=*/true, /*blockAttention=*/true);
      window.runPanel()->setEditorGraph(window.editor()->model()->graph(), /*select=*/true);
      window.runPanel()->start();  // the first start reloads the engine with Block attention
    };
    startOnceEngineSettles(window, &window, startRun, /*orFailed=*/false);
    QObject::connect(window.bridge(), &ragwb::EngineBridge::runFinished, &window,
                     [&window, shotFile, runs, startRun](qint64 id, const rag::RunMetrics& m) {
                       std::printf("demo-blocks run %lld (oneshot, block attention): %lld/%lld answered, %d "
                                   "generations in the panel, longest GUI stall %.1f ms (GUI thread working %.1f ms "
                                   "of it); the panel's longest GUI-thread work: %.1f ms per request, %.1f ms per "
                                   "store refresh\n",
                                   static_cast<long long>(id), static_cast<long long>(m.completed),
                                   static_cast<long long>(m.requests), window.blockAttention()->requests()->rowCount(),
                                   window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs(),
                                   window.blockAttention()->longestRecordMs(), window.blockAttention()->longestRefreshMs());
                       std::fflush(stdout);
                       if (++*runs < 2) return QTimer::singleShot(0, &window, startRun);
                       // Where the second run starts: the first run's last rows above it.
                       ragwb::BlockAttentionPanel* panel = window.blockAttention();
                       const int second = panel->requests()->rowCount() / 2;
                       panel->requestView()->scrollTo(panel->requests()->index(std::max(0, second - 8), 0),
                                                      QAbstractItemView::PositionAtTop);
                       saveAndExit(panel, shotFile, 1200);  // after a store refresh
                     });
    reportEngineFailure(window, "demo-blocks", shoot);
  } else if (parser.isSet(demoKvOpt)) {
    // The heatmap floats at a size where blocks read; --screenshot saves it alone. IRG's
    // prompts share their template and each round's retrieved passages, so the prefix cache hits.
    floatTool(window, "kvHeatDock", {1100, 720});
    startOnceEngineSettles(window, &window, [&window] {
      window.editor()->loadTemplate(rag::Workflow::Irg);
      window.runPanel()->configure("irg", "hedra", 6.0, 48);
      window.runPanel()->setEditorGraph(window.editor()->model()->graph(), /*select=*/true);
      window.runPanel()->start();
    }, /*orFailed=*/false);
    QObject::connect(window.bridge(), &ragwb::EngineBridge::runFinished, &window,
                     [&window, shotFile](qint64 id, const rag::RunMetrics& m) {
                       std::printf("demo-kv run %lld (irg): %lld/%lld answered, %d KV heatmap reports, longest "
                                   "GUI stall %.1f ms (GUI thread working %.1f ms of it); the KV heatmap's longest "
                                   "GUI-thread work: %.1f ms per report, %.1f ms per replot\n",
                                   static_cast<long long>(id), static_cast<long long>(m.completed),
                                   static_cast<long long>(m.requests), window.kvHeatmap()->series().sampleCount(),
                                   window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs(),
                                   window.kvHeatmap()->longestSampleMs(), window.kvHeatmap()->longestReplotMs());
                       std::fflush(stdout);
                       // Two more reports after the run: the cache's blocks once the sequences are gone.
                       saveAndExit(window.kvHeatmap(), shotFile, 1200);
                     });
    reportEngineFailure(window, "demo-kv", shoot);
  } else if (parser.isSet(tourOpt)) {
    QTimer::singleShot(0, &window, &ragwb::MainWindow::startTour);  // once the window is laid out
    if (!shotFile.isEmpty())  // walks itself: on to the run step once the engine is ready
      QObject::connect(window.bridge(), &ragwb::EngineBridge::engineReady, &window, [&window] {
        static bool walked = false;
        if (walked || !window.tour() || window.tour()->current() != 0) return;
        walked = true;
        window.tour()->next();
      });
    QObject::connect(window.bridge(), &ragwb::EngineBridge::engineFailed, &window, [shoot](const QString& why) {
      std::fprintf(stderr, "tour: the engine is not available, so the tour's run cannot start: %s\n", qPrintable(why));
      shoot();
    });
    QObject::connect(window.bridge(), &ragwb::EngineBridge::runFinished, &window,
                     [&window, shoot, shotFile](qint64 id, const rag::RunMetrics& m) {
                       std::printf("tour run %lld: %lld/%lld answered, longest GUI stall %.1f ms\n", static_cast<long long>(id),
                                   static_cast<long long>(m.completed), static_cast<long long>(m.requests),
                                   window.stallMeter()->maxStallMs());
                       std::fflush(stdout);
                       if (shotFile.isEmpty()) return;
                       window.tour()->next();  // from the run to the timeline it filled
                       shoot();
                     });
  } else if (parser.isSet(reproduceOpt)) {
    ragwb::ReproducePage* page = window.reproduce();
    if (!page->selectFigure(parser.value(reproduceOpt))) {
      QStringList ids;
      for (const ragwb::PaperFigure& f : ragwb::paperFigures()) ids << f.id;
      std::fprintf(stderr, "error: --reproduce: no figure '%s'; the figures are: %s\n", qPrintable(parser.value(reproduceOpt)),
                   qPrintable(ids.join(", ")));
      return 2;
    }
    page->extraArgsEdit()->setText(parser.value(reproduceArgsOpt));
    if (shotFile.isEmpty()) window.tools()->raise("reproduceDock");
    else floatTool(window, "reproduceDock", {1300, 850});  // the screenshot is of the page alone, at a readable size
    QObject::connect(page, &ragwb::ReproducePage::runFinished, &window, [&window, page, shotFile](bool ok, const QString& m, qint64) {
      std::printf("reproduce: %s %s longest GUI stall %.1f ms (GUI thread working %.1f ms of it)\n", ok ? "ok:" : "failed:",
                  qPrintable(m), window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs());
      std::fflush(stdout);
      if (shotFile.isEmpty()) return QApplication::exit(ok ? 0 : 1);
      saveAndExit(page->parentWidget() ? page->parentWidget() : page, shotFile, 400);  // the floating dock
    });
    // The stall is the page's own run: start-up (the engine loading, first paints) is not counted.
    startOnceEngineSettles(window, page, [&window, page] {
      window.stallMeter()->reset();
      page->start();
    }, /*orFailed=*/true);
  } else if (parser.isSet(dragonOpt)) {
    bool ok = false;
    const double latency = parser.value(dragonLatencyOpt).toDouble(&ok);
    if (!ok || latency < 0 || latency > 1000) {
      std::fprintf(stderr, "error: --dragon-latency takes milliseconds in [0, 1000], not '%s'\n",
                   qPrintable(parser.value(dragonLatencyOpt)));
      return 2;
    }
    int tokens = 0;
    if (parser.isSet(dragonTokensOpt)) {
      tokens = parser.value(dragonTokensOpt).toInt(&ok);
      if (!ok || tokens < 1 || tokens > 256) {
        std::fprintf(stderr, "error: --dragon-tokens takes a number in [1, 256], not '%s'\n",
                     qPrintable(parser.value(dragonTokensOpt)));
        return 2;
      }
    }
    if (shotFile.isEmpty()) window.tools()->raise("dragonDock");
    else floatTool(window, "dragonDock", {1400, 900});  // the screenshot is of the page alone, at a readable size
    ragwb::DragonPage* page = window.dragon();
    page->questionEdit()->setText(parser.value(dragonOpt));
    page->latencySpin()->setValue(latency);
    if (tokens > 0) {
      page->maxTokensSpin()->setValue(tokens);
      page->ignoreEosBox()->setChecked(true);
    }
    QObject::connect(page, &ragwb::DragonPage::runFinished, &window, [&window, page, shotFile](bool ok, const QString& m) {
      std::printf("dragon run: %s %s longest GUI stall %.1f ms (GUI thread working %.1f ms of it)\n", ok ? "ok:" : "failed:",
                  qPrintable(m), window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs());
      if (page->lastSummary())
        std::printf("dragon answer: %s (%.1f ms/token)\n", page->lastSummary()->answer.c_str(), page->lastSummary()->perTokenMs);
      std::fflush(stdout);
      if (shotFile.isEmpty()) return QApplication::exit(ok ? 0 : 1);
      saveAndExit(page->parentWidget() ? page->parentWidget() : page, shotFile, 400);  // the floating dock
    });
    // The stall is the page's own run: start-up (the engine loading, first paints) is not counted.
    startOnceEngineSettles(window, page, [&window, page] {
      window.stallMeter()->reset();
      page->start();
    }, /*orFailed=*/true);
  } else if (parser.isSet(windveOpt)) {
    bool okSlo = false, okClients = false, okSeconds = false;
    const double slo = parser.value(windveSloOpt).toDouble(&okSlo);
    const int clients = parser.value(windveClientsOpt).toInt(&okClients);
    const int seconds = parser.value(windveSecondsOpt).toInt(&okSeconds);
    if (!okSlo || !(slo >= 0.05 && slo <= 10) || !okClients || clients < 1 || clients > 512 || !okSeconds ||
        seconds < 1 || seconds > 600) {
      std::fprintf(stderr, "error: --windve-slo takes seconds in [0.05, 10], --windve-clients a number in [1, 512] and "
                   "--windve-seconds whole seconds in [1, 600], not '%s', '%s' and '%s'\n",
                   qPrintable(parser.value(windveSloOpt)), qPrintable(parser.value(windveClientsOpt)),
                   qPrintable(parser.value(windveSecondsOpt)));
      return 2;
    }
    if (shotFile.isEmpty()) window.tools()->raise("windveDock");
    else floatTool(window, "windveDock", {1500, 900});  // the screenshot is of the page alone, at a readable size
    ragwb::WindVePage* page = window.windve();
    page->sloSpin()->setValue(slo);
    page->clientsSpin()->setValue(clients);
    page->secondsSpin()->setValue(seconds);
    page->heterogeneousBox()->setChecked(!parser.isSet(windveNoHeteroOpt));
    QObject::connect(page, &ragwb::WindVePage::calibrationFinished, &window, [page](bool ok, const QString& m) {
      if (!ok) return;  // a failure ends the run too, reported below
      const rag::WindVeCalibration& c = *page->lastCalibration();
      std::printf("windve calibration: %s", qPrintable(m));
      for (const rag::WindVeDeviceProfile* d : {&c.main, c.auxiliary ? &*c.auxiliary : nullptr})
        if (d) std::printf("; %s latency = %.5f * C + %.4f s (%zu levels)", d->name.c_str(), d->alpha, d->beta, d->samples.size());
      std::printf("\n");
      std::fflush(stdout);
    });
    QObject::connect(page, &ragwb::WindVePage::runFinished, &window, [&window, page, shotFile](bool ok, const QString& m) {
      if (ok && page->lastSummary()) {
        const rag::WindVeLoadSummary& s = *page->lastSummary();
        std::printf("windve run: ok: %lld clients, %.1f s, heterogeneous %s, depths main %lld auxiliary %lld: %lld served "
                    "(main %lld, auxiliary %lld), %.1f/s, BUSY %.1f%% of answers, latency p50 %.3f s p99 %.3f s "
                    "(SLO %.2f s, %.1f%% within), core share main %.0f%% auxiliary %.0f%%; longest GUI stall %.1f ms (GUI thread working %.1f ms of it), the "
                    "page's longest tick %.1f ms and replot %.1f ms\n",
                    static_cast<long long>(s.clients), s.seconds, s.heterogeneous ? "on" : "off",
                    static_cast<long long>(s.mainDepth), static_cast<long long>(s.auxDepth),
                    static_cast<long long>(s.served), static_cast<long long>(s.servedMain),
                    static_cast<long long>(s.servedAux), s.servedPerSecond, 100 * s.busyShare, s.p50Seconds,
                    s.p99Seconds, s.sloSeconds, 100 * s.withinSloShare, 100 * s.mainCoreShare, 100 * s.auxCoreShare,
                    window.stallMeter()->maxStallMs(),
                    window.stallMeter()->maxStallBusyMs(), page->longestTickMs(), page->longestReplotMs());
      } else {
        std::printf("windve run: failed: %s\n", qPrintable(m));
      }
      std::fflush(stdout);
      if (shotFile.isEmpty()) return QApplication::exit(ok ? 0 : 1);
      saveAndExit(page->parentWidget() ? page->parentWidget() : page, shotFile, 400);  // the floating dock
    });
    startOnceEngineSettles(window, page, [page] { page->start(); }, /*orFailed=*/true);
  } else if (parser.isSet(demoOpt)) {
    // Every built-in in turn (16 questions each through hedra), IRG last so the views end on it;
    // each run's accuracy is printed as it finishes.
    static const rag::Workflow kOrder[] = {rag::Workflow::OneShot, rag::Workflow::Hyde, rag::Workflow::Multistep,
                                           rag::Workflow::Recomp, rag::Workflow::Irg};
    auto next = std::make_shared<size_t>(0);
    auto startNext = [&window, next] {
      const rag::Workflow w = kOrder[*next];
      window.editor()->loadTemplate(w);
      window.runPanel()->configure(QString::fromUtf8(std::string(rag::workflowName(w)).c_str()), "hedra", 6.0, 16);
      window.runPanel()->setEditorGraph(window.editor()->model()->graph(), /*select=*/true);
      window.runPanel()->start();
    };
    startOnceEngineSettles(window, &window, startNext, /*orFailed=*/false);
    // The KV tree is docked visible by default: asked for by name, not by being on screen.
    const bool kvTreeInFront = parser.value(showOpt) == QStringLiteral("kvTreeDock");
    QObject::connect(window.bridge(), &ragwb::EngineBridge::runFinished, &window,
                     [&window, shoot, next, startNext, shotFile, kvTreeInFront](qint64 id, const rag::RunMetrics& m) {
                       std::printf("demo run %lld (%s): %lld/%lld answered, accuracy %.2f, mean latency %.3f s, "
                                   "longest GUI stall %.1f ms (GUI thread working %.1f ms of it); the KV heatmap's "
                                   "longest GUI-thread work: %.1f ms per report, %.1f ms per replot\n",
                                   static_cast<long long>(id), std::string(rag::workflowName(kOrder[*next])).c_str(),
                                   static_cast<long long>(m.completed), static_cast<long long>(m.requests), m.accuracy,
                                   m.meanLatency, window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs(),
                                   window.kvHeatmap()->longestSampleMs(), window.kvHeatmap()->longestReplotMs());
                       std::fflush(stdout);
                       if (++*next < std::size(kOrder)) {
                         QTimer::singleShot(0, &window, startNext);
                         return;
                       }
                       // With the KV tree in front (--show kvTreeDock), it shows where the last
                       // request's prompt runs in the tree; the screenshot is of the inspector alone.
                       if (kvTreeInFront) {
                         window.kvTree()->showPromptPath(1);
                         window.bridge()->requestKvTree();  // the tree after the last request, not the last poll's
                         if (!shotFile.isEmpty()) floatTool(window, "kvTreeDock", {1300, 800});
                         QTimer::singleShot(1200, &window, [&window, shoot, shotFile] {
                           std::printf("KV tree prompt path: %s\n", qPrintable(window.kvTree()->pathLabel()->text()));
                           std::fflush(stdout);
                           if (shotFile.isEmpty()) return shoot();
                           QWidget* inspector = window.kvTree();
                           saveAndExit(inspector->parentWidget() ? inspector->parentWidget() : inspector, shotFile, 400);
                         });
                         return;
                       }
                       shoot();
                     });
    reportEngineFailure(window, "demo", shoot);
  } else if (!shotFile.isEmpty()) {
    QObject::connect(window.overview(), &ragwb::OverviewPage::loaded, &window, shoot);
    QObject::connect(window.overview(), &ragwb::OverviewPage::failed, &window, shoot);
  }
  return app.exec();
}
