#include <QtTest>

#include <filesystem>
#include <fstream>

#include "../fixtures/workload/tiny_corpus.h"
#include "cli_run.h"
#include "core/fs.h"
#include "workload/trace_file.h"

using namespace rag;
namespace fs = std::filesystem;

namespace {

CliRun ragraph(const QStringList& args) {
  return runRagraph(QStringList{"trace", "make"} + args, 60000);
}

}  // namespace

class TestCliTrace : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString path(const char* name) const { return m_dir.filePath(name); }
  QString corpus() const { return path("corpus.db"); }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(fs::exists(RAGWB_BIN_DIR "/ragraph"));
    Status s = testing::makeTinyCorpus(corpus().toStdString());
    QVERIFY2(s.isOk(), s.message().c_str());
  }

  void makesATraceAndSummarizes() {
    CliRun r = ragraph({"--rate", "5", "--requests", "400", "--popularity", "zipf:1.2", "--mix",
                     "oneshot:1,multistep:1", "--seed", "3", "--corpus", corpus(), "--out",
                     path("t.jsonl")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.isEmpty());  // the trace goes to the file, the summary to stderr
    QVERIFY2(r.err.contains("wrote 400 requests"), qPrintable(r.err));
    QVERIFY(r.err.contains("top 20%"));
    QVERIFY(r.err.contains("multistep"));
    auto t = workload::readWorkloadTrace(path("t.jsonl").toStdString());
    QVERIFY2(t.isOk(), t.status().message().c_str());
    QCOMPARE(t->size(), size_t{400});
    std::string text = readFile(path("t.jsonl").toStdString()).value();
    QVERIFY(text.rfind("{\"trace\":{\"version\":1,", 0) == 0);
    QVERIFY(text.find("\"popularity\":\"zipf:1.2\"") != std::string::npos);
    QVERIFY(text.find("\"seed\":3") != std::string::npos);

    // Same command, same bytes; another seed, other bytes.
    QCOMPARE(ragraph({"--rate", "5", "--requests", "400", "--popularity", "zipf:1.2", "--mix",
                      "oneshot:1,multistep:1", "--seed", "3", "--corpus", corpus(), "--out",
                      path("t2.jsonl")})
                 .code,
             0);
    QCOMPARE(readFile(path("t2.jsonl").toStdString()).value(), text);
    QCOMPARE(ragraph({"--rate", "5", "--requests", "400", "--popularity", "zipf:1.2", "--seed", "4",
                      "--corpus", corpus(), "--out", path("t3.jsonl")})
                 .code,
             0);
    QVERIFY(readFile(path("t3.jsonl").toStdString()).value() != text);
  }

  void temporalTakesAWindow() {
    CliRun r = ragraph({"--rate", "2", "--requests", "50", "--popularity", "temporal:0.6", "--window",
                     "4", "--corpus", corpus(), "--out", path("tw.jsonl")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    std::string text = readFile(path("tw.jsonl").toStdString()).value();
    QVERIFY(text.find("\"popularity\":\"temporal:0.6\",\"window\":4,") != std::string::npos);
  }

  void badInputFailsWithOneLineAndNoFile_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expect");
    QTest::addColumn<int>("exitCode");
    const QString c = corpus();
    auto base = [&](QStringList extra) {
      QStringList a = {"--corpus", c, "--out", path("bad.jsonl")};
      return a + extra;
    };
    QTest::newRow("rate 0") << base({"--rate", "0", "--requests", "5"}) << "--rate must be" << 2;
    QTest::newRow("rate negative") << base({"--rate", "-2", "--requests", "5"}) << "--rate must be" << 2;
    QTest::newRow("rate text") << base({"--rate", "fast", "--requests", "5"}) << "--rate expects a number" << 2;
    QTest::newRow("rate missing") << base({"--requests", "5"}) << "--rate R is required" << 2;
    QTest::newRow("requests 0") << base({"--rate", "1", "--requests", "0"}) << "--requests must be" << 2;
    QTest::newRow("requests missing") << base({"--rate", "1"}) << "--requests N is required" << 2;
    QTest::newRow("popularity") << base({"--rate", "1", "--requests", "5", "--popularity", "hot"})
                                << "unknown popularity 'hot'" << 2;
    QTest::newRow("zipf exponent") << base({"--rate", "1", "--requests", "5", "--popularity", "zipf:x"})
                                   << "needs a numeric Zipf exponent" << 2;
    QTest::newRow("mix malformed") << base({"--rate", "1", "--requests", "5", "--mix", "oneshot:1,,irg:1"})
                                   << "has an empty entry" << 2;
    QTest::newRow("mix weight") << base({"--rate", "1", "--requests", "5", "--mix", "oneshot:a"})
                                << "a weight is a number >= 0" << 2;
    QTest::newRow("workflow") << base({"--rate", "1", "--requests", "5", "--mix", "oneshot:1,fancy:2"})
                              << "unknown workflow 'fancy'" << 2;
    QTest::newRow("window without temporal") << base({"--rate", "1", "--requests", "5", "--window", "8"})
                                             << "--window applies only to --popularity temporal" << 2;
    QTest::newRow("window zero") << base({"--rate", "1", "--requests", "5", "--popularity", "temporal",
                                          "--window", "0"})
                                 << "--window must be between" << 2;
    QTest::newRow("unknown option") << base({"--rate", "1", "--requests", "5", "--rat", "3"})
                                    << "unknown option --rat" << 2;
    QTest::newRow("empty split") << base({"--rate", "1", "--requests", "5", "--split", "dev"})
                                 << "no QA items in split 'dev'; it has: test, train" << 1;
    QTest::newRow("missing corpus")
        << QStringList{"--rate", "1", "--requests", "5", "--corpus", path("absent.db"), "--out",
                       path("bad.jsonl")}
        << "does not exist; build it with `ragraph corpus build`" << 1;
    QTest::newRow("missing out") << QStringList{"--rate", "1", "--requests", "5", "--corpus", c}
                                 << "--out FILE is required" << 2;
  }

  void badInputFailsWithOneLineAndNoFile() {
    QFETCH(QStringList, args);
    QFETCH(QString, expect);
    QFETCH(int, exitCode);
    CliRun r = ragraph(args);
    QCOMPARE(r.code, exitCode);
    QVERIFY2(r.err.startsWith("ragraph: error: "), qPrintable(r.err));
    QVERIFY2(r.err.contains(expect), qPrintable(r.err));
    QCOMPARE(r.err.count('\n'), 1);
    QVERIFY(!fs::exists(path("bad.jsonl").toStdString()));
  }

  void unwritableOutput() {
    std::ofstream(path("plain").toStdString()) << "x";
    CliRun r = ragraph({"--rate", "1", "--requests", "5", "--corpus", corpus(), "--out",
                     path("plain") + "/t.jsonl"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.startsWith("ragraph: error: writing trace"), qPrintable(r.err));
    QCOMPARE(r.err.count('\n'), 1);
    // A failed run leaves an existing trace untouched.
    std::ofstream(path("keep.jsonl").toStdString()) << "old";
    r = ragraph({"--rate", "0", "--requests", "5", "--corpus", corpus(), "--out", path("keep.jsonl")});
    QCOMPARE(r.code, 2);
    QCOMPARE(readFile(path("keep.jsonl").toStdString()).value(), std::string("old"));
    for (const auto& e : fs::directory_iterator(m_dir.path().toStdString()))
      QVERIFY2(e.path().string().find(".tmp-") == std::string::npos, e.path().c_str());
  }
};

QTEST_GUILESS_MAIN(TestCliTrace)
#include "test_cli_trace.moc"
