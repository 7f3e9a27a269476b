// `ragraph bench embed` as a user runs it: bad options are refused with a message naming the
// fix, and a calibration on the shipped embedder reports a non-negative fit per device, with
// the query texts from the corpus or, without one, from the tokenizer's vocabulary.
#include <QtTest>

#include <filesystem>
#include <thread>

#include "../fixtures/workload/tiny_corpus.h"
#include "cli_run.h"
#include "core/json.h"

using namespace rag;
namespace fs = std::filesystem;

namespace {

CliRun benchEmbed(const QStringList& args) { return runRagraph(QStringList{"bench", "embed"} + args, 120000); }

const QString kEmbedder = QStringLiteral(RAGWB_SOURCE_DIR "/datasets/models/rag-embedder");

}  // namespace

class TestCliBenchEmbed : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString corpus() const { return m_dir.filePath("corpus.db"); }

  // A quick calibration (few levels, one repeat); the parsed JSON.
  JsonValue calibrate(const QString& corpusPath, QString* stderrText = nullptr) {
    CliRun r = benchEmbed({"--calibrate", "--json", "--slo", "0.5", "--max-concurrency", "4", "--repeats", "1",
                           "--embedder", kEmbedder, "--corpus", corpusPath});
    if (stderrText) *stderrText = r.err;
    if (r.code != 0) qWarning("%s", qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    return doc.isOk() ? *doc : JsonValue();
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(fs::exists(RAGWB_BIN_DIR "/ragraph"));
    if (!fs::exists(kEmbedder.toStdString() + "/config.json")) QSKIP("the shipped embedder is missing");
    Status s = testing::makeTinyCorpus(corpus().toStdString());
    QVERIFY2(s.isOk(), s.message().c_str());
  }

  void badOptionsAreRefusedWithTheFix() {
    const std::vector<std::pair<QStringList, QString>> cases = {
        {{"--slo", "-1"}, "--slo must be a positive number of seconds"},
        {{"--main-cores", "0", "--aux-cores", "0"}, "need disjoint core sets"},
        {{"--main-cores", "9999"}, "bad core list"},
        {{"--aux-cores", "1-x"}, "write cores as 0, 0-3 or 0,2,5-7"},
        {{"--no-hetero", "--aux-cores", "1"}, "--aux-cores has no use with --no-hetero"},
        {{"--calibrate", "--stress"}, "exclude each other"},
        {{"--max-batch", "0"}, "--max-batch and --repeats must be >= 1"},
        {{"--embedder", m_dir.filePath("none")}, "none"},
    };
    for (const auto& [args, message] : cases) {
      CliRun r = benchEmbed(args);
      QVERIFY2(r.code != 0 && r.code != -1, qPrintable(args.join(' ')));
      QVERIFY2(r.err.contains(message), qPrintable(args.join(' ') + " -> " + r.err));
    }
  }

  void calibrationReportsANonNegativeFitPerDevice() {
    JsonValue doc = calibrate(corpus());
    QVERIFY(doc.isObject());
    QVERIFY(doc.find("queries")->asString().find("QA questions") != std::string::npos);
    QVERIFY(!doc.find("max_concurrency_main_only"));  // --calibrate stops after the fit
    const JsonValue* devices = doc.find("devices");
    QVERIFY(devices && devices->find("main"));
    const size_t expected = std::thread::hardware_concurrency() > 1 ? 2 : 1;
    QCOMPARE(devices->size(), expected);
    for (const auto& [name, d] : devices->asObject()) {
      QVERIFY2(d.find("alpha")->asDouble() >= 0 && d.find("beta")->asDouble() >= 0, name.c_str());
      const int64_t depth = *d.find("depth_fit")->asInt64();
      QVERIFY(depth >= 0 && depth <= 4);
      QVERIFY(d.find("profile")->size() >= 2);
      QVERIFY(d.find("depth_stress")->isNull());
    }
  }

  void withoutACorpusTheQueriesComeFromTheVocabulary() {
    QString err;
    JsonValue doc = calibrate(m_dir.filePath("missing.db"), &err);
    QVERIFY2(doc.isObject(), qPrintable(err));
    QVERIFY(doc.find("queries")->asString().find("tokenizer vocabulary") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestCliBenchEmbed)
#include "test_cli_bench_embed.moc"
