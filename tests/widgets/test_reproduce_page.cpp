// The Reproduce page: the figure catalogue (every figure cites its paper numbers and runs a quick
// bench; each extractor reads the bench's documented JSON keys and names a missing one), the
// saved-results model (QAbstractItemModelTester), and end to end with the real `ragraph`
// binary on a tiny corpus and model: Block-Attention's TTFT table runs as a child process, its
// parsed result is in the page's plot and in the run history, and reopening the saved result
// plots it again; a cancelled bench and a failing one save nothing. No timings asserted; the
// GUI thread's longest stall during the bench is printed.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QJsonDocument>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <algorithm>
#include <filesystem>

#include <sys/resource.h>

#include "../fixtures/serving/tiny_serving.h"
#include "bridge/background.h"
#include "bridge/gui_stall_meter.h"
#include "rag/run_store.h"
#include "reproduce/bench_process.h"
#include "reproduce/bench_result_model.h"
#include "reproduce/paper_figures.h"
#include "reproduce/reproduce_page.h"

using ragwb::BenchResultModel;
using ragwb::FigurePoints;
using ragwb::PaperFigure;
using ragwb::ReproducePage;

namespace {

QJsonObject parse(const char* text) { return QJsonDocument::fromJson(QByteArray(text)).object(); }

const ragwb::FigurePoint* find(const FigurePoints& pts, const QString& category) {
  for (const auto& p : pts)
    if (p.category == category) return &p;
  return nullptr;
}

}  // namespace

class TestReproducePage : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  rag::testing::TinyServing m_tiny;
  QString store() const { return m_dir.filePath("history/runs.db"); }
  // The tiny fixture instead of the shipped model and corpus; one short length, one repeat.
  QString tinyArgs(int repeats) const {
    return QStringLiteral("--model %1 --corpus %2 --lengths 64 --repeats %3")
        .arg(QString::fromStdString(m_tiny.model.string()), QString::fromStdString(m_tiny.corpus.string()))
        .arg(repeats);
  }
  int savedResults() const {
    auto s = rag::RunStore::open(store().toStdString());
    return s ? static_cast<int>(s->listBenchResults()->size()) : -1;
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(QDir(m_dir.path()).mkpath(QStringLiteral("tiny")));
    auto t = rag::testing::makeTinyServing(m_dir.filePath("tiny").toStdString());
    QVERIFY2(t.isOk(), t.status().message().c_str());
    m_tiny = *t;
  }

  void everyFigureCitesItsPaperAndRunsAQuickBench() {
    QCOMPARE(ragwb::paperFigures().size(), size_t{8});  // HedraRAG 13/14, WindVE 1/3, DepCache 13, Block-Attention 1/2, DRAGON 6
    for (const PaperFigure& f : ragwb::paperFigures()) {
      QVERIFY2(!f.citation.isEmpty() && !f.paper.empty(), qPrintable(f.id));
      QCOMPARE(f.args.value(0), QStringLiteral("bench"));
      // A quick preset wherever the bench has one (bench embed has none).
      if (f.args.value(1) != QStringLiteral("embed")) QVERIFY2(f.args.contains(QStringLiteral("--quick")), qPrintable(f.id));
      QCOMPARE(ragwb::findPaperFigure(f.id), &f);
      // Output without the figure's keys is an error that names what is missing.
      auto none = f.extract(QJsonObject{});
      QVERIFY(!none.isOk());
      QCOMPARE(none.status().code(), rag::StatusCode::NotFound);
    }
    QVERIFY(!ragwb::findPaperFigure(QStringLiteral("no-such-figure")));
  }

  void extractorsReadTheBenchesKeys() {
    // Shapes as `ragraph bench dragon / blocks / depcache` print them (values made up here).
    auto dragon = ragwb::findPaperFigure(QStringLiteral("dragon-fig6"))->extract(parse(R"({
      "latency_ms_per_token": {"dragon": {"0": 30, "300": 50}, "drdg_tw": {"0": 40, "300": 100},
                               "drdg_sw": {"0": 35, "300": 200}},
      "dragon_vs_device_only_overhead": {"0": 0.1, "300": 0.3}})"));
    QVERIFY(dragon.isOk());
    QCOMPARE(find(*dragon, QStringLiteral("lower than DRDG/TW"))->value, 50.0);   // at the highest latency
    QCOMPARE(find(*dragon, QStringLiteral("lower than DRDG/SW"))->value, 75.0);
    QVERIFY(qAbs(find(*dragon, QStringLiteral("overhead vs device-only"))->value - 20.0) < 1e-9);  // mean

    auto blocks = ragwb::findPaperFigure(QStringLiteral("blocks-table2"))->extract(parse(R"({
      "ttft": {"1984": {"ttft_reduction": 0.9}, "128": {"ttft_reduction": 0.5}}})"));
    QVERIFY(blocks.isOk());
    QCOMPARE(blocks->size(), size_t{2});
    QCOMPARE((*blocks)[0].category, QStringLiteral("128 tokens"));  // by length, not by key order
    QCOMPARE((*blocks)[1].value, 90.0);

    auto hedra = ragwb::findPaperFigure(QStringLiteral("hedra-fig13"))->extract(parse(R"({
      "summary": {"oneshot": {"hedra_over_flashrag": 2.0}, "multistep": {"hedra_over_flashrag": null},
                  "irg": {"hedra_over_flashrag": 1.25}}})"));
    QVERIFY(hedra.isOk());
    QCOMPARE(hedra->size(), size_t{2});  // multistep: a policy sustained no rate
    QCOMPARE(find(*hedra, QStringLiteral("IRG"))->value, 1.25);
    auto capped = ragwb::findPaperFigure(QStringLiteral("hedra-fig13"))->extract(parse(R"({
      "runs": [{"workflow": "oneshot", "rps": 16}, {"workflow": "irg", "rps": 16}],
      "search_runs": [{"workflow": "oneshot", "rps": 256}, {"workflow": "irg", "rps": 64}],
      "summary": {"oneshot": {"max_sustained_rps": {"flashrag": 256, "hedra": 256}, "hedra_over_flashrag": 1},
                  "multistep": {}, "irg": {"max_sustained_rps": {"flashrag": 32, "hedra": 64}, "hedra_over_flashrag": 2}}})"));
    QVERIFY(capped.isOk());
    QCOMPARE(capped->size(), size_t{1});  // One-shot: both held the highest rate run, no ratio
    QCOMPARE((*capped)[0].category, QStringLiteral("IRG"));
    auto unsustained = ragwb::findPaperFigure(QStringLiteral("hedra-fig13"))->extract(parse(R"({
      "summary": {"oneshot": {"hedra_over_flashrag": null}, "multistep": {}, "irg": {}}})"));
    QVERIFY(unsustained.status().message().find("--find-max") != std::string::npos);

    auto windve = ragwb::findPaperFigure(QStringLiteral("windve-table1"))->extract(parse(R"({"slo_seconds": 2, "ratio": 1.25})"));
    QVERIFY(windve.isOk());
    QCOMPARE((*windve)[0].category, QStringLiteral("2 s limit"));
    QCOMPARE((*windve)[0].value, 25.0);
    QVERIFY(!ragwb::findPaperFigure(QStringLiteral("windve-table1"))->extract(parse(R"({"ratio": null})")).isOk());

    auto offline = ragwb::findPaperFigure(QStringLiteral("hedra-fig14"))->extract(parse(R"({"runs": [
      {"workflow": "oneshot", "mode": "flashrag", "wall_s": 3.0}, {"workflow": "oneshot", "mode": "hedra", "wall_s": 2.0},
      {"workflow": "irg", "mode": "hedra", "wall_s": 1.0}]})"));
    QVERIFY(offline.isOk());
    QCOMPARE(offline->size(), size_t{1});  // IRG has no FlashRAG run
    QCOMPARE((*offline)[0].value, 1.5);

    auto depths = ragwb::findPaperFigure(QStringLiteral("windve-table3"))->extract(parse(R"({"devices": {
      "main": {"name": "cpu[0]", "depth_fit": 45, "depth_stress": 40},
      "auxiliary": {"name": "cpu[1]", "depth_fit": 30, "depth_stress": 40}}})"));
    QVERIFY(depths.isOk());
    QCOMPARE(find(*depths, QStringLiteral("main device"))->value, 12.5);
    QCOMPARE(find(*depths, QStringLiteral("auxiliary CPU"))->value, -25.0);
    auto noStress = ragwb::findPaperFigure(QStringLiteral("windve-table3"))->extract(parse(R"({"devices": {
      "main": {"name": "cpu[0]", "depth_fit": 45, "depth_stress": null}}})"));
    QVERIFY(noStress.status().message().find("--stress") != std::string::npos);

    auto accuracy = ragwb::findPaperFigure(QStringLiteral("blocks-table1"))->extract(parse(R"({"accuracy": {
      "vanilla": 0.6, "block_noft": 0.3, "block_ft": 0.55, "gold": {}}})"));
    QVERIFY(accuracy.isOk());
    QCOMPARE(find(*accuracy, QStringLiteral("block, no fine-tuning"))->value, 30.0);
    QCOMPARE(find(*accuracy, QStringLiteral("block fine-tuned"))->value, 55.0);
    QVERIFY(!ragwb::findPaperFigure(QStringLiteral("blocks-table1"))->extract(parse(R"({"accuracy": {"vanilla": 0.6}})")).isOk());

    auto dep = ragwb::findPaperFigure(QStringLiteral("depcache-fig13"))->extract(parse(R"({
      "hit_rate": {"zipf": {"lru": 0.5, "lfu": 0.55, "pgdsf": 0.6, "lacr": 0.7, "lpm": 0.65, "lsp": 0.7}}})"));
    QVERIFY(dep.isOk());
    QVERIFY(qAbs(find(*dep, QStringLiteral("vs LRU"))->value - 20.0) < 1e-9);
    QVERIFY(qAbs(find(*dep, QStringLiteral("vs LSP"))->value) < 1e-9);
    auto two = ragwb::findPaperFigure(QStringLiteral("depcache-fig13"))->extract(parse(R"({"hit_rate": {
      "zipf": {"lru": 0.5, "lfu": 0.55, "pgdsf": 0.6, "lacr": 0.7, "lpm": 0.65, "lsp": 0.7},
      "uniform": {"lru": 0.1, "lfu": 0.1, "pgdsf": 0.1, "lacr": 0.2, "lpm": 0.1, "lsp": 0.1}}})"));
    QVERIFY(qAbs(find(*two, QStringLiteral("vs LRU"))->value - 15.0) < 1e-9);  // the mean over patterns
    auto partial = ragwb::findPaperFigure(QStringLiteral("depcache-fig13"))->extract(parse(R"({"hit_rate": {"zipf": {"lacr": 0.7}}})"));
    QVERIFY(partial.status().message().find("hit_rate.zipf.lru") != std::string::npos);
  }

  void resultModelListsSavedResults() {
    BenchResultModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    model.setResults({{7, "dragon-fig6", "ragraph bench dragon --quick --json", "2026-11-26T03:00:00Z", 12.5, "{}"},
                      {3, "unknown-figure", "ragraph bench x", "2026-11-25T03:00:00Z", 1, "{}"}});
    QCOMPARE(reset.size(), 1);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.data(model.index(0, BenchResultModel::Figure)).toString(), QStringLiteral("DRAGON Fig. 6"));
    QCOMPARE(model.data(model.index(1, BenchResultModel::Figure)).toString(), QStringLiteral("unknown-figure"));
    QCOMPARE(model.data(model.index(0, BenchResultModel::Seconds)).toString(), QStringLiteral("12.5"));
    QCOMPARE(model.data(model.index(0, 0), BenchResultModel::IdRole).toLongLong(), 7LL);
    QCOMPARE(model.rowOfId(3), 1);
    QCOMPARE(model.rowOfId(4), -1);
    model.setResults({});
    QCOMPARE(model.rowCount(), 0);
  }

  // The child process itself (posix_spawn, pipes read through socket notifiers, waitpid).
  void benchProcessCollectsOutputAndSaysHowTheChildEnded() {
    using ragwb::BenchOutcome;
    using ragwb::BenchProcess;
    auto run = [](const QString& program, const QStringList& args) {
      BenchProcess p;
      QSignalSpy done(&p, &BenchProcess::finished);
      if (!p.start(program, args, 5)) return BenchOutcome{};
      if (!done.wait(30000)) return BenchOutcome{};
      return done.first().at(0).value<BenchOutcome>();
    };
    // stdout is the JSON, stderr lines the progress (the last ones kept for errors).
    BenchOutcome o = run(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), QStringLiteral("echo progress >&2; printf '{\"a\": 1}'")});
    QCOMPARE(int(o.kind), int(BenchOutcome::Kind::Finished));
    QCOMPARE(o.json, QStringLiteral("{\"a\": 1}"));
    // The bench runs below the GUI thread (`nice` with no operand prints the niceness).
    o = run(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), QStringLiteral("printf '{\"nice\": %s}' $(nice)")});
    QCOMPARE(QJsonDocument::fromJson(o.json.toUtf8()).object().value(QStringLiteral("nice")).toInt(-1),
             std::max(ragwb::kBackgroundNice, getpriority(PRIO_PROCESS, 0)));
    // A non-zero exit says its status and the stderr tail.
    o = run(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), QStringLiteral("echo 'bad --flag' >&2; exit 3")});
    QCOMPARE(int(o.kind), int(BenchOutcome::Kind::Failed));
    QVERIFY2(o.message.contains(QStringLiteral("status 3")) && o.message.contains(QStringLiteral("bad --flag")), qPrintable(o.message));
    // Killed by a signal.
    o = run(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), QStringLiteral("kill -SEGV $$")});
    QVERIFY2(o.message.contains(QStringLiteral("crashed (signal 11)")), qPrintable(o.message));
    // A program that does not exist: reported, not hung.
    o = run(QStringLiteral("/nonexistent/ragraph"), {});
    QVERIFY2(o.message.contains(QStringLiteral("did not start")), qPrintable(o.message));
    // A grandchild that keeps the pipes open does not hold the result back once the child exits
    // (`bench dragon` starts a cloud process of its own).
    QElapsedTimer clock;
    clock.start();
    o = run(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), QStringLiteral("sleep 20 & printf '[]'")});
    QCOMPARE(int(o.kind), int(BenchOutcome::Kind::Finished));
    QVERIFY2(clock.elapsed() < 15000, "waited for the grandchild's pipe");
  }

  void failingBenchSavesNothing() {
    ReproducePage page;
    page.setStorePath(store());
    page.setRagraphBinary(RAGWB_BIN_DIR "/ragraph");
    QVERIFY(page.selectFigure(QStringLiteral("blocks-table2")));
    page.extraArgsEdit()->setText(QStringLiteral("--lengths zero"));
    QSignalSpy done(&page, &ReproducePage::runFinished);
    page.start();
    QVERIFY(done.wait(60000));
    QCOMPARE(done.first().at(0).toBool(), false);
    QVERIFY2(done.first().at(1).toString().contains(QStringLiteral("--lengths")), qPrintable(done.first().at(1).toString()));
    QCOMPARE(savedResults(), 0);
    QVERIFY(page.runButton()->isEnabled());
  }

  void cancelKillsTheBenchAndSavesNothing() {
    ReproducePage page;
    page.setStorePath(store());
    page.setRagraphBinary(RAGWB_BIN_DIR "/ragraph");
    QVERIFY(page.selectFigure(QStringLiteral("blocks-table2")));
    page.extraArgsEdit()->setText(tinyArgs(1000000));  // would run for hours
    QSignalSpy started(&page, &ReproducePage::runStarted);
    QSignalSpy done(&page, &ReproducePage::runFinished);
    page.start();
    QCOMPARE(started.size(), 1);
    QVERIFY(page.busy());
    QVERIFY(!page.runButton()->isEnabled() && page.cancelButton()->isEnabled());
    page.start();  // a second Run while one is in flight is refused
    QCOMPARE(done.size(), 1);
    QCOMPARE(done.takeFirst().at(0).toBool(), false);
    QTest::qWait(500);
    page.cancelButton()->click();
    QVERIFY(done.wait(30000));
    QCOMPARE(done.first().at(0).toBool(), false);
    QVERIFY(done.first().at(1).toString().contains(QStringLiteral("cancelled")));
    QVERIFY(!page.busy());
    QCOMPARE(savedResults(), 0);
  }

  void realBenchIsParsedPlottedSavedAndReopened() {
    ReproducePage page;
    page.resize(1000, 700);
    page.show();
    page.setStorePath(store());
    page.setRagraphBinary(RAGWB_BIN_DIR "/ragraph");
    QVERIFY(page.selectFigure(QStringLiteral("blocks-table2")));
    QVERIFY(page.plottedOurs().empty());  // the paper's numbers alone before a run
    QCOMPARE(page.plottedPaper().size(), ragwb::findPaperFigure(QStringLiteral("blocks-table2"))->paper.size());
    page.extraArgsEdit()->setText(tinyArgs(1));
    QSignalSpy progress(page.progressBar(), &QProgressBar::valueChanged);
    QSignalSpy done(&page, &ReproducePage::runFinished);
    ragwb::GuiStallMeter stall;
    stall.start();
    page.runButton()->click();
    QVERIFY(done.wait(300000));
    stall.stop();
    QVERIFY2(done.first().at(0).toBool(), qPrintable(done.first().at(1).toString()));
    const qint64 id = done.first().at(2).toLongLong();
    std::printf("bench blocks through the page: longest GUI stall %.1f ms\n", stall.maxStallMs());
    QCOMPARE(page.progressBar()->value(), 100);

    // Parsed: the one length measured, a reduction of at most 100 %.
    QCOMPARE(page.plottedOurs().size(), size_t{1});
    QCOMPARE(page.plottedOurs()[0].category, QStringLiteral("64 tokens"));
    QVERIFY(page.plottedOurs()[0].value <= 100.0);
    // Saved in the run history, JSON whole, and listed on the page.
    auto s = rag::RunStore::open(store().toStdString());
    QVERIFY(s.isOk());
    auto saved = s->listBenchResults();
    QCOMPARE(saved->size(), size_t{1});
    QCOMPARE((*saved)[0].id, id);
    QCOMPARE((*saved)[0].name, std::string("blocks-table2"));
    QVERIFY((*saved)[0].commandLine.find("bench blocks --quick --tables ttft") != std::string::npos);
    const QJsonObject json = QJsonDocument::fromJson(QByteArray::fromStdString((*saved)[0].json)).object();
    QVERIFY(json.value(QStringLiteral("ttft")).toObject().contains(QStringLiteral("64")));
    QCOMPARE(page.results()->rowCount(), 1);
    QCOMPARE(page.results()->data(page.results()->index(0, 0), BenchResultModel::IdRole).toLongLong(), id);

    // Reopened: another figure shown, then the saved row selected plots the saved numbers again.
    const double value = page.plottedOurs()[0].value;
    QVERIFY(page.selectFigure(QStringLiteral("dragon-fig6")));
    QVERIFY(page.plottedOurs().empty());
    QTableView* view = page.resultsView();
    QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, view->visualRect(page.results()->index(0, 0)).center());
    QCOMPARE(page.currentFigure()->id, QStringLiteral("blocks-table2"));
    QCOMPARE(page.plottedOurs().size(), size_t{1});
    QCOMPARE(page.plottedOurs()[0].value, value);
  }
};

QTEST_MAIN(TestReproducePage)
#include "test_reproduce_page.moc"
