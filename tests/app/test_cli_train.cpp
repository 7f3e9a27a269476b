// `ragraph train tokenizer` and `ragraph train lm` through the built binary, on a tiny corpus.
#include <QtTest>

#include <filesystem>

#include "../fixtures/workload/tiny_corpus.h"
#include "cli_run.h"
#include "core/fs.h"
#include "core/json.h"
#include "model/model_config.h"
#include "model/tokenizer.h"

using namespace rag;
namespace fs = std::filesystem;

class TestCliTrain : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString path(const char* name) const { return m_dir.filePath(name); }
  QString corpus() const { return path("corpus.db"); }

  // A small, fast model on the tiny corpus; `extra` adds or overrides options.
  QStringList lm(const QString& out, QStringList extra = {}) const {
    return QStringList{"train", "lm", "--corpus", corpus(), "--tokenizer", path("tok"), "--out", out,
                       "--layers", "1", "--hidden", "32", "--heads", "2", "--steps", "4",
                       "--batch", "2", "--seq-len", "96", "--log-every", "2", "--threads", "1"} +
           extra;
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    QVERIFY(fs::exists(RAGWB_BIN_DIR "/ragraph"));
    testing::TinyCorpusSpec spec;
    spec.entities = 30;
    spec.passages = true;
    Status s = testing::makeTinyCorpus(corpus().toStdString(), spec);
    QVERIFY2(s.isOk(), s.message().c_str());
  }

  void trainsATokenizer() {
    CliRun r = runRagraph({"train", "tokenizer", "--corpus", corpus(), "--vocab", "320", "--out", path("tok")});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("tokenizer written to"), qPrintable(r.out));
    QVERIFY(r.err.contains("merging"));  // progress on stderr
    auto tok = model::Tokenizer::load(path("tok").toStdString());
    QVERIFY2(tok.isOk(), tok.status().message().c_str());
    QCOMPARE(tok->vocabSize(), 320);
    QVERIFY(tok->eosId().has_value());
  }

  void trainsAModelAndResumes() {
    CliRun r = runRagraph(lm(path("lm"), {"--json", "--mask", "block"}));
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("step 2/4  loss "), qPrintable(r.err));
    QVERIFY(r.err.contains("step 4/4  loss "));
    QVERIFY(r.err.contains("tok/s"));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QCOMPARE(doc->find("completed")->asBool(), true);
    QCOMPARE(*doc->find("step")->asInt64(), int64_t{4});
    QCOMPARE(doc->find("loss_history")->size(), size_t{4});
    QVERIFY(doc->find("tokens_per_second")->asDouble() > 0);
    // The output is a Hugging Face model directory with its tokenizer.
    const fs::path out = path("lm").toStdString();
    auto cfg = model::loadLlamaConfig(out);
    QVERIFY2(cfg.isOk(), cfg.status().message().c_str());
    QCOMPARE(cfg->numHiddenLayers, int64_t{1});
    QCOMPARE(cfg->vocabSize, int64_t{320});
    QVERIFY(fs::exists(out / "model.safetensors"));
    QVERIFY(model::Tokenizer::load(out).isOk());

    // Running it again is refused; --resume on the finished run is a no-op; --resume with other
    // options is refused by name.
    r = runRagraph(lm(path("lm")));
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("already holds a checkpoint") && r.err.contains("--resume"), qPrintable(r.err));
    r = runRagraph(lm(path("lm"), {"--resume", "--mask", "block"}));
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("model written to"));
    r = runRagraph(lm(path("lm"), {"--resume", "--mask", "block", "--batch", "3"}));
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("made with --batch 2, this run asks for --batch 3"), qPrintable(r.err));
  }

  void aTrainedModelGrowsWiderAndTrainsOn() {
    // `model grow` widens the model trained above (hidden 32, 2 heads) and deepens it; `train lm
    // --init` continues the grown one. Without a size to grow, or narrower, it says so.
    CliRun r = runRagraph({"model", "grow", "--model", path("lm"), "--hidden", "48", "--heads", "3", "--ffn", "192",
                           "--layers", "2", "--out", path("wide"), "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QCOMPARE(*doc->find("hidden")->asInt64(), int64_t{48});
    QCOMPARE(*doc->find("heads")->asInt64(), int64_t{3});
    QCOMPARE(*doc->find("layers")->asInt64(), int64_t{2});
    QVERIFY(*doc->find("parameters")->asInt64() > *doc->find("old_parameters")->asInt64());
    QVERIFY(model::Tokenizer::load(path("wide").toStdString()).isOk());  // copied beside it
    r = runRagraph({"train", "lm", "--corpus", corpus(), "--init", path("wide"), "--out", path("wide-trained"),
                    "--steps", "2", "--batch", "2", "--seq-len", "96", "--threads", "1"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(model::loadLlamaConfig(path("wide-trained").toStdString())->hiddenSize, int64_t{48});

    r = runRagraph({"model", "grow", "--model", path("lm"), "--out", path("same")});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("a size to grow are required"), qPrintable(r.err));
    r = runRagraph({"model", "grow", "--model", path("lm"), "--hidden", "16", "--out", path("narrow")});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--hidden 16: the model has 32"), qPrintable(r.err));
    QVERIFY(!fs::exists(path("narrow").toStdString()));
  }

  void theTokenizerDefaultsToTheOutputDirectory() {
    // `train tokenizer --out D` then `train lm --out D` needs no --tokenizer.
    QCOMPARE(runRagraph({"train", "tokenizer", "--corpus", corpus(), "--vocab", "300", "--out", path("both"),
                         "--quiet"}).code, 0);
    QStringList args = lm(path("both"), {"--data", "mixed", "--context", "none"});
    args.removeAt(args.indexOf("--tokenizer") + 1);
    args.removeAt(args.indexOf("--tokenizer"));
    CliRun r = runRagraph(args);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.err.contains("on mixed data (none context, causal mask)"));
  }

  void badInputFailsWithOneLine_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expect");
    QTest::addColumn<int>("exitCode");
    const QString bad = path("bad");
    QTest::newRow("no out") << QStringList{"train", "lm", "--corpus", corpus()} << "--out DIR is required" << 2;
    QTest::newRow("no tokenizer")
        << QStringList{"train", "lm", "--corpus", corpus(), "--out", path("no-tok")}
        << "make one with `ragraph train tokenizer --out" << 1;
    QTest::newRow("missing corpus") << lm(bad, {"--corpus", path("absent.db")})
                                    << "does not exist; build it with `ragraph corpus build`" << 1;
    QTest::newRow("not a corpus") << lm(bad, {"--corpus", path("other.db")}) << "is not a RAGraph corpus" << 1;
    QTest::newRow("empty train split") << lm(bad, {"--corpus", path("no-train.db")})
                                       << "no QA items in split 'train'; it has: test" << 1;
    QTest::newRow("no dev split") << lm(bad, {"--eval-every", "2"})
                                  << "held-out evaluation (--eval-every): corpus" << 1;
    QTest::newRow("resume nothing") << lm(bad, {"--resume"}) << "no checkpoint to resume" << 1;
    QTest::newRow("data") << lm(bad, {"--data", "books"}) << "unknown training data 'books'" << 2;
    QTest::newRow("context") << lm(bad, {"--context", "all"}) << "unknown context 'all'" << 2;
    QTest::newRow("mask") << lm(bad, {"--mask", "tree"}) << "unknown mask 'tree'" << 2;
    QTest::newRow("init and shape") << lm(bad, {"--init", path("lm")}) << "--init takes the model's shape" << 2;
    QTest::newRow("heads") << lm(bad, {"--heads", "3"}) << "--hidden must be --heads times" << 2;
    QTest::newRow("warmup") << lm(bad, {"--warmup", "9"}) << "--warmup must be between 0 and --steps - 1" << 2;
    QTest::newRow("lr") << lm(bad, {"--lr", "-1"}) << "--lr must be a number > 0" << 2;
    QTest::newRow("unknown option") << lm(bad, {"--epochs", "3"}) << "unknown option --epochs" << 2;
    QTest::newRow("role option without roles")
        << lm(bad, {"--irg-guess-share", "0.5"}) << "--irg-guess-share is for --data roles" << 2;
    QTest::newRow("share above 1") << lm(bad, {"--data", "roles", "--irg-guess-share", "1.5"})
                                   << "--irg-guess-share must be between 0 and 1 (the share of two-hop IRG" << 2;
    QTest::newRow("gold questions without roles")
        << lm(bad, {"--gold-questions", "3"}) << "--gold-questions is for --data roles" << 2;
    QTest::newRow("no gold questions") << lm(bad, {"--data", "roles", "--gold-questions", "0"})
                                       << "--gold-questions must be at least 1" << 2;
    QTest::newRow("too many gold questions") << lm(bad, {"--data", "roles", "--gold-questions", "9"})
                                             << "--gold-questions 9 is more than 8" << 2;
    QTest::newRow("negative share") << lm(bad, {"--data", "roles", "--no-gold-share", "-0.1"})
                                    << "--no-gold-share must be between 0 and 1 (the share of answer prompts" << 2;
    QTest::newRow("tokenizer vocab")
        << QStringList{"train", "tokenizer", "--corpus", corpus(), "--vocab", "100", "--out", bad}
        << "--vocab must be at least 259" << 2;
    QTest::newRow("tokenizer corpus")
        << QStringList{"train", "tokenizer", "--corpus", path("absent.db"), "--out", bad}
        << "does not exist; build it with `ragraph corpus build`" << 1;
  }

  void badInputFailsWithOneLine() {
    QFETCH(QStringList, args);
    QFETCH(QString, expect);
    QFETCH(int, exitCode);
    if (!fs::exists(path("other.db").toStdString())) {
      auto db = sql::Db::open(path("other.db").toStdString(), sql::OpenMode::Create);
      QVERIFY(db->exec("CREATE TABLE runs(id INTEGER PRIMARY KEY)").isOk());
      QVERIFY(db->setUserVersion(1).isOk());
    }
    if (!fs::exists(path("no-train.db").toStdString())) {
      testing::TinyCorpusSpec spec;
      spec.entities = 5;
      spec.passages = true;
      QVERIFY(testing::makeTinyCorpus(path("no-train.db").toStdString(), spec).isOk());
      auto db = sql::Db::open(path("no-train.db").toStdString(), sql::OpenMode::ReadWrite);
      QVERIFY(db->exec("DELETE FROM qa WHERE split = 'train'").isOk());
    }
    CliRun r = runRagraph(args);
    QCOMPARE(r.code, exitCode);
    QVERIFY2(r.err.startsWith("ragraph: error: "), qPrintable(r.err));
    QVERIFY2(r.err.contains(expect), qPrintable(r.err));
    QCOMPARE(r.err.count('\n'), 1);
    QVERIFY(!fs::exists(path("bad").toStdString() + "/model.safetensors"));
  }
};

QTEST_GUILESS_MAIN(TestCliTrain)
#include "test_cli_train.moc"
