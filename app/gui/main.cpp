// ragraph-workbench: the desktop workbench.
//   ragraph-workbench [--corpus PATH] [--screenshot FILE.png] [--demo] [--bench-timeline [--spans N]]
//                     [--bench-kvtree [--nodes N]] [--show TOOL] [--dragon QUESTION [--dragon-latency MS] [--dragon-tokens N]]
//                     [--reproduce FIGURE [--reproduce-args ARGS]] [--tour]
// --screenshot renders the window once its pages have loaded (with --demo: once the demo run has
// finished), saves the PNG and exits; --demo runs a short IRG workload on the default
// corpus through the editor's graph, so the timeline, heatmap and tables fill; --bench-timeline
// and --bench-kvtree print the timeline's and the KV-tree inspector's drawing speed as JSON and exit;
// --dragon runs one live DRAGON exchange in the DRAGON page (brought to the front) and prints its
// summary and the GUI thread's longest stall during it (with --screenshot: saved after the run);
// --reproduce runs a paper figure's bench in the Reproduce page the same way (its result saved
// into the run history); --tour starts the guided tour (with --screenshot it walks itself to the
// run, and the window is saved once the run has finished, at the timeline step).
#include <QApplication>
#include <QCommandLineParser>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QCheckBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QJsonDocument>
#include <QTimer>
#include <cstdio>
#include <iterator>
#include <memory>

#include "bridge/gui_stall_meter.h"
#include "main_window.h"
#include "nodegraph/graph_editor.h"
#include "overview/overview_page.h"
#include "rag/corpus.h"
#include "run/run_panel.h"
#include "inspectors/dragon_page.h"
#include "inspectors/kv_tree_bench.h"
#include "reproduce/paper_figures.h"
#include "reproduce/reproduce_page.h"
#include "timeline/timeline_bench.h"
#include "tools/tool_registry.h"
#include "tour/guided_tour.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("RAGraph");
  QApplication::setApplicationName("RAGraph Workbench");
  QApplication::setApplicationVersion(RAGWB_VERSION);

  QCommandLineParser parser;
  parser.setApplicationDescription("Design, serve and understand heterogeneous RAG workflows.");
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption corpusOpt("corpus", "Corpus database (default: the one `ragraph corpus build` made).", "PATH");
  QCommandLineOption shotOpt("screenshot", "Save a PNG of the window once loaded (with --demo: after the run), then exit.", "FILE");
  QCommandLineOption demoOpt("demo", "Run a short IRG workload (hedra) so every view fills.");
  QCommandLineOption benchOpt("bench-timeline", "Print the timeline's frames per second as JSON and exit.");
  QCommandLineOption spansOpt("spans", "Spans for --bench-timeline (default 200000).", "N", "200000");
  QCommandLineOption kvBenchOpt("bench-kvtree", "Print the KV-tree inspector's frames per second as JSON and exit.");
  QCommandLineOption nodesOpt("nodes", "Nodes for --bench-kvtree (default 20000).", "N", "20000");
  QCommandLineOption showOpt("show", "Bring the tool TOOL to the front (its dock id, e.g. kvTreeDock).", "TOOL");
  QCommandLineOption dragonOpt("dragon", "Run one live DRAGON exchange on QUESTION in the DRAGON page.", "QUESTION");
  QCommandLineOption dragonLatencyOpt("dragon-latency", "Added link latency for --dragon, ms (default 100).", "MS", "100");
  QCommandLineOption dragonTokensOpt("dragon-tokens", "Decode exactly N tokens in --dragon (EOS ignored).", "N");
  QCommandLineOption reproduceOpt("reproduce", "Run FIGURE's bench in the Reproduce page (e.g. blocks-table2).", "FIGURE");
  QCommandLineOption reproduceArgsOpt("reproduce-args", "Extra arguments for --reproduce's bench.", "ARGS");
  QCommandLineOption tourOpt("tour", "Start the guided tour: load a workflow, run it, and see what each view shows.");
  parser.addOptions({corpusOpt, shotOpt, demoOpt, benchOpt, spansOpt, kvBenchOpt, nodesOpt, showOpt, dragonOpt,
                     dragonLatencyOpt, dragonTokensOpt, reproduceOpt, reproduceArgsOpt, tourOpt});
  parser.process(app);

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
  ragwb::MainWindow window(corpus);
  window.show();
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
  if (parser.isSet(tourOpt)) {
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
    window.tools()->raise("reproduceDock");
    QDockWidget* dock = window.tools()->dock("reproduceDock");
    if (!shotFile.isEmpty() && dock) {  // the screenshot is of the page, floated at a readable size
      dock->setFloating(true);
      dock->resize(1300, 850);
    }
    QObject::connect(page, &ragwb::ReproducePage::runFinished, &window, [&window, page, shotFile](bool ok, const QString& m, qint64) {
      std::printf("reproduce: %s %s longest GUI stall %.1f ms (GUI thread working %.1f ms of it)\n", ok ? "ok:" : "failed:",
                  qPrintable(m), window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs());
      std::fflush(stdout);
      if (shotFile.isEmpty()) {
        QApplication::exit(ok ? 0 : 1);
        return;
      }
      QTimer::singleShot(400, page, [page, shotFile] {
        QWidget* shot = page->parentWidget() ? page->parentWidget() : page;  // the floating dock
        const bool saved = shot->grab().save(shotFile);
        std::fprintf(saved ? stdout : stderr, saved ? "saved %s\n" : "error: cannot write %s\n", qPrintable(shotFile));
        QApplication::exit(saved ? 0 : 1);
      });
    });
    // Once the engine has loaded (or failed to), so that its loading does not share the run.
    auto startOnce = [page] {
      static bool started = false;
      if (started) return;
      started = true;
      page->start();
    };
    QObject::connect(window.bridge(), &ragwb::EngineBridge::engineReady, page, startOnce);
    QObject::connect(window.bridge(), &ragwb::EngineBridge::engineFailed, page, startOnce);
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
    window.tools()->raise("dragonDock");
    ragwb::DragonPage* page = window.dragon();
    QDockWidget* dock = window.tools()->dock("dragonDock");
    if (!shotFile.isEmpty() && dock) {  // the screenshot is of the page, floated at a readable size
      dock->setFloating(true);
      dock->resize(1400, 900);
    }
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
      if (shotFile.isEmpty()) {
        QApplication::exit(ok ? 0 : 1);
        return;
      }
      QTimer::singleShot(400, page, [page, shotFile] {
        QWidget* shot = page->parentWidget() ? page->parentWidget() : page;  // the floating dock
        const bool saved = shot->grab().save(shotFile);
        std::fprintf(saved ? stdout : stderr, saved ? "saved %s\n" : "error: cannot write %s\n", qPrintable(shotFile));
        QApplication::exit(saved ? 0 : 1);
      });
    });
    // Once the engine has loaded (or failed to), so that its loading does not share the run.
    auto startOnce = [page] {
      static bool started = false;
      if (started) return;
      started = true;
      page->start();
    };
    QObject::connect(window.bridge(), &ragwb::EngineBridge::engineReady, page, startOnce);
    QObject::connect(window.bridge(), &ragwb::EngineBridge::engineFailed, page, startOnce);
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
    QObject::connect(window.bridge(), &ragwb::EngineBridge::engineReady, &window, [startNext] {
      static bool started = false;
      if (started) return;
      started = true;
      startNext();
    });
    QObject::connect(window.bridge(), &ragwb::EngineBridge::runFinished, &window,
                     [&window, shoot, next, startNext](qint64 id, const rag::RunMetrics& m) {
                       std::printf("demo run %lld (%s): %lld/%lld answered, accuracy %.2f, mean latency %.3f s, "
                                   "longest GUI stall %.1f ms (GUI thread working %.1f ms of it)\n",
                                   static_cast<long long>(id), std::string(rag::workflowName(kOrder[*next])).c_str(),
                                   static_cast<long long>(m.completed), static_cast<long long>(m.requests), m.accuracy,
                                   m.meanLatency, window.stallMeter()->maxStallMs(), window.stallMeter()->maxStallBusyMs());
                       std::fflush(stdout);
                       if (++*next < std::size(kOrder)) QTimer::singleShot(0, &window, startNext);
                       else shoot();
                     });
    QObject::connect(window.bridge(), &ragwb::EngineBridge::engineFailed, &window, [shoot](const QString& why) {
      std::fprintf(stderr, "demo: the engine is not available: %s\n", qPrintable(why));
      shoot();
    });
  } else if (!shotFile.isEmpty()) {
    QObject::connect(window.overview(), &ragwb::OverviewPage::loaded, &window, shoot);
    QObject::connect(window.overview(), &ragwb::OverviewPage::failed, &window, shoot);
  }
  return app.exec();
}
