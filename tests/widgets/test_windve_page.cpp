// The WindVE page on the shipped embedder (datasets/models/rag-embedder), small and short for a
// 2-core machine: its refusals (a missing embedder, a second action while one is in flight), a
// calibration with a low cap (each device profiled at two levels or more, depths of at least 1,
// the fit and the SLO drawn), and a load of two clients for two seconds that serves answers and
// fills the live plot; then Run with a changed SLO calibrates again first, and Stop ends a
// calibration. No timings asserted.
#include <QtTest>

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "bridge/background.h"
#include "inspectors/windve_page.h"
#include "plot/qcustomplot_include.h"

// The nice values of this process's threads named `name` (Linux; empty elsewhere).
std::vector<int> niceOfThreadsNamed(const std::string& name) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string n;
    std::getline(comm, n);
    if (n != name) continue;
    std::ifstream statFile(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(statFile)), std::istreambuf_iterator<char>());
    // Fields after the name in parentheses: state is field 3, nice field 19.
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && rest >> field; ++i)
      if (i == 19) out.push_back(std::stoi(field));
  }
  return out;
}

class TestWindVePage : public QObject {
  Q_OBJECT
  static std::filesystem::path shippedEmbedder() { return RAGWB_SOURCE_DIR "/datasets/models/rag-embedder"; }

private Q_SLOTS:
  void refusesAMissingEmbedder() {
    ragwb::WindVePage page;
    page.setSources("/nonexistent/embedder-dir", "/nonexistent/corpus.db");
    QSignalSpy calibrated(&page, &ragwb::WindVePage::calibrationFinished);
    page.calibrate();
    QVERIFY(page.busy());
    QVERIFY(!page.calibrateButton()->isEnabled());
    QVERIFY(calibrated.wait(20000));
    QCOMPARE(calibrated[0][0].toBool(), false);
    const QString why = calibrated[0][1].toString();
    QVERIFY2(why.contains("no embedder in /nonexistent/embedder-dir") && why.contains("ragraph train embedder"), qPrintable(why));
    QVERIFY(!page.busy());
    QVERIFY(page.calibrateButton()->isEnabled());
  }

  void calibratesAndRunsOnTheShippedEmbedder() {
    if (!std::filesystem::exists(shippedEmbedder() / "model.safetensors"))
      QSKIP("the shipped embedder datasets/models/rag-embedder is missing");
    ragwb::WindVePage page;
    page.resize(1200, 800);
    page.show();
    // No corpus: the queries come from the embedder's tokenizer, as `ragraph bench embed` does.
    page.setSources(shippedEmbedder(), "/nonexistent/corpus.db");
    page.sloSpin()->setValue(0.3);
    page.maxConcurrencySpin()->setValue(16);
    page.clientsSpin()->setValue(2);
    page.secondsSpin()->setValue(2);
    page.heterogeneousBox()->setChecked(true);
    QSignalSpy calibrated(&page, &ragwb::WindVePage::calibrationFinished);
    QSignalSpy started(&page, &ragwb::WindVePage::runStarted);
    QSignalSpy finished(&page, &ragwb::WindVePage::runFinished);

    page.calibrate();
    page.calibrate();  // refused while the first is in flight
    QCOMPARE(calibrated.count(), 1);
    QCOMPARE(calibrated[0][0].toBool(), false);
    QVERIFY(calibrated[0][1].toString().contains("in flight"));
    QVERIFY(calibrated.wait(240000));
    QVERIFY2(calibrated[1][0].toBool(), qPrintable(calibrated[1][1].toString()));
    QVERIFY(page.lastCalibration().has_value());
    const rag::WindVeCalibration cal = *page.lastCalibration();
    QCOMPARE(cal.sloSeconds, 0.3);
    QCOMPARE(cal.maxConcurrency, int64_t{16});
    QVERIFY(cal.main.samples.size() >= 2);
    QVERIFY(cal.main.depth >= 1 && cal.main.depth <= 16);
    QVERIFY(cal.main.alpha >= 0 && cal.main.beta >= 0);
    if (cal.auxiliary) {  // two cores or more
      QVERIFY(cal.auxiliary->samples.size() >= 2);
      QVERIFY2(cal.auxiliary->depth >= 1, "the auxiliary CPU instance misses the SLO with one query");
      QVERIFY(cal.auxiliary->name != cal.main.name);
    }
    // The plot: the measured levels of each device and its fit line, the SLO line and depth labels.
    QCOMPARE(page.fitPlot()->graph(0)->dataCount(), static_cast<int>(cal.main.samples.size()));
    QCOMPARE(page.fitPlot()->graph(1)->dataCount(), 2);
    QVERIFY(page.fitPlot()->itemCount() >= 4);  // SLO line + its text + a depth's line and label
    QVERIFY(!page.fitPlot()->grab().isNull());

    page.start();
    QCOMPARE(started.count(), 1);  // calibrated with these settings: the load starts at once
    QVERIFY(page.busy());
    QCOMPARE(page.runButton()->text(), QStringLiteral("Stop"));
    QVERIFY(page.runButton()->isEnabled());
    // The load's threads run below the GUI thread (bridge/background.h).
    std::vector<int> loadNice;
    QTRY_VERIFY_WITH_TIMEOUT(!(loadNice = niceOfThreadsNamed("windve")).empty(), 10000);
    for (int n : loadNice) QCOMPARE(n, std::max(ragwb::kBackgroundNice, getpriority(PRIO_PROCESS, 0)));
    QVERIFY(finished.wait(120000));
    QVERIFY2(finished[0][0].toBool(), qPrintable(finished[0][1].toString()));
    QVERIFY(!page.busy());
    QCOMPARE(page.runButton()->text(), QStringLiteral("Run"));
    const rag::WindVeLoadSummary s = *page.lastSummary();
    QCOMPARE(s.clients, int64_t{2});
    QVERIFY(s.served > 0);
    QCOMPARE(s.servedMain + s.servedAux, s.served);
    QCOMPARE(s.mainDepth, cal.main.depth);
    QVERIFY(s.p50Seconds > 0 && s.p50Seconds <= s.p99Seconds);
    QVERIFY(s.busyShare >= 0 && s.busyShare <= 1);
    QVERIFY(page.livePlot()->graph(0)->dataCount() > 0);  // the main queue's load over time
    QVERIFY(page.summaryLabel()->text().contains("served"));

    // A changed SLO: Run calibrates again before the load.
    page.sloSpin()->setValue(0.4);
    page.secondsSpin()->setValue(1);
    page.heterogeneousBox()->setChecked(false);
    page.start();
    QVERIFY(calibrated.wait(240000));
    QVERIFY2(calibrated[2][0].toBool(), qPrintable(calibrated[2][1].toString()));
    QCOMPARE(page.lastCalibration()->sloSeconds, 0.4);
    if (finished.count() < 2) QVERIFY(finished.wait(120000));
    QVERIFY2(finished[1][0].toBool(), qPrintable(finished[1][1].toString()));
    QCOMPARE(started.count(), 2);
    QCOMPARE(page.lastSummary()->servedAux, int64_t{0});  // heterogeneous off: nothing on the auxiliary
    QCOMPARE(page.lastSummary()->auxDepth, int64_t{0});

    // Stop during a calibration: it ends as stopped and the page is free again.
    page.sloSpin()->setValue(0.35);
    page.calibrate();
    QCOMPARE(page.runButton()->text(), QStringLiteral("Stop"));
    page.runButton()->click();
    QVERIFY(calibrated.wait(240000));
    QCOMPARE(calibrated.last()[0].toBool(), false);
    QVERIFY2(calibrated.last()[1].toString().contains("stopped"), qPrintable(calibrated.last()[1].toString()));
    QVERIFY(!page.busy());
    QCOMPARE(page.runButton()->text(), QStringLiteral("Run"));
  }
};

QTEST_MAIN(TestWindVePage)
#include "test_windve_page.moc"
