// ragraph-workbench: the desktop workbench.
//   ragraph-workbench [--corpus PATH] [--screenshot FILE.png]
// --screenshot renders the window once its pages have loaded, saves the PNG and exits
// (used for the README and for looking at the GUI on machines without a display).
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <cstdio>

#include "main_window.h"
#include "overview/overview_page.h"
#include "rag/corpus.h"

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
  QCommandLineOption shotOpt("screenshot", "Save a PNG of the window once loaded, then exit.", "FILE");
  parser.addOption(corpusOpt);
  parser.addOption(shotOpt);
  parser.process(app);

  std::filesystem::path corpus = parser.isSet(corpusOpt)
                                     ? std::filesystem::path(parser.value(corpusOpt).toStdString())
                                     : rag::defaultCorpusLocation();
  ragwb::MainWindow window(corpus);
  window.show();

  if (parser.isSet(shotOpt)) {
    const QString file = parser.value(shotOpt);
    auto shoot = [&window, file] {
      QTimer::singleShot(200, &window, [&window, file] {  // one more paint after the data arrived
        bool ok = window.grab().save(file);
        std::fprintf(ok ? stdout : stderr, ok ? "saved %s\n" : "error: cannot write %s\n", qPrintable(file));
        QApplication::exit(ok ? 0 : 1);
      });
    };
    QObject::connect(window.overview(), &ragwb::OverviewPage::loaded, &window, shoot);
    QObject::connect(window.overview(), &ragwb::OverviewPage::failed, &window, shoot);
  }
  return app.exec();
}
