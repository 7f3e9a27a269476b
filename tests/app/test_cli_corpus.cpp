// `ragraph corpus build` / `ragraph corpus stats` as a user runs them: exit codes, one-line
// errors naming the fix, JSON keys, and the previous corpus surviving a failed build.
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>

#include "cli_run.h"
#include "storage/sqlite.h"

namespace {

CliRun ragraph(const QStringList& args) { return runRagraph(args); }

const QString kWordNet = QStringLiteral(RAGWB_FIXTURES_DIR "/corpus/wordnet");
const QString kFoldoc = QStringLiteral(RAGWB_FIXTURES_DIR "/corpus/foldoc");

QByteArray slurp(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// The error is one line, names the problem and says what to do.
void checkOneLineError(const CliRun& r, const QString& mustContain) {
  QVERIFY2(r.code != 0, qPrintable(r.err));
  QString e = r.err.trimmed();
  QVERIFY2(e.startsWith("ragraph: error: "), qPrintable(e));
  QVERIFY2(!e.contains('\n'), qPrintable(e));
  QVERIFY2(e.contains(mustContain), qPrintable(e));
}

}  // namespace

class TestCliCorpus : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString m_db;

  QString path(const QString& name) const { return m_tmp.filePath(name); }
  CliRun buildInto(const QString& out, const QString& wordnet = kWordNet,
                const QString& foldoc = kFoldoc) {
    return ragraph({"corpus", "build", "--out", out, "--wordnet", wordnet, "--foldoc", foldoc,
                    "--quiet"});
  }

private Q_SLOTS:
  void initTestCase() {
    m_db = path("corpus.db");
    CliRun r = buildInto(m_db);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("corpus written to"), qPrintable(r.out));
    QVERIFY2(r.err.isEmpty(), qPrintable(r.err));  // --quiet
  }

  void progressGoesToStderr() {
    CliRun r = ragraph({"corpus", "build", "--out", path("progress.db"), "--wordnet", kWordNet,
                     "--foldoc", kFoldoc, "--seed", "7"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.err.contains("parsing WordNet"));
    QVERIFY(r.err.contains("storing passages"));
    QVERIFY(!r.out.contains("parsing WordNet"));
  }

  void statsJsonHasTheDocumentedKeys() {
    CliRun r = ragraph({"corpus", "stats", "--corpus", m_db, "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QJsonParseError pe;
    QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8(), &pe).object();
    QVERIFY2(pe.error == QJsonParseError::NoError, qPrintable(pe.errorString()));
    for (const char* k : {"passages", "entities", "relations", "qa", "path", "size_bytes",
                          "schema_version"})
      QVERIFY2(o.contains(k), k);
    QCOMPARE(o["path"].toString(), m_db);
    QCOMPARE(o["schema_version"].toInt(), 1);
    QCOMPARE(o["size_bytes"].toInteger(), QFileInfo(m_db).size());
    QVERIFY(o["passages"].toInteger() > 322);
    QCOMPARE(o["entities_by_kind"].toObject()["term"].toInt(), 10);
    QJsonObject qa = o["qa"].toObject();
    qint64 sum = 0;
    for (const char* split : {"train", "dev", "test"}) {
      QJsonObject s = qa[split].toObject();
      QVERIFY2(s.contains("total"), split);
      qint64 perType = 0;
      for (auto it = s.begin(); it != s.end(); ++it)
        if (it.key() != "total") perType += it.value().toInteger();
      QCOMPARE(perType, s["total"].toInteger());
      sum += perType;
    }
    QVERIFY(sum > 0);
    QCOMPARE(o["qa_total"].toInteger(), sum);
  }

  void statsTextListsCounts() {
    CliRun r = ragraph({"corpus", "stats", "--corpus", m_db});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("passages"));
    QVERIFY(r.out.contains("two_hop"));
  }

  void statsWithoutACorpusSaysHowToBuildOne() {
    checkOneLineError(ragraph({"corpus", "stats", "--corpus", path("nothing.db")}),
                      "ragraph corpus build");
  }

  void statsOnOtherSchemasSaysSo() {
    for (int version : {0, 2}) {
      QString p = path(QString("v%1.db").arg(version));
      {
        auto db = rag::sql::Db::open(p.toStdString(), rag::sql::OpenMode::Create);
        QVERIFY(db.isOk());
        QVERIFY(db->exec("CREATE TABLE meta(key TEXT, value TEXT)").isOk());
        QVERIFY(db->setUserVersion(version).isOk());
      }
      CliRun r = ragraph({"corpus", "stats", "--corpus", p});
      checkOneLineError(r, version ? "newer" : "older");
      QVERIFY(r.err.contains("rebuild it with `ragraph corpus build`"));
    }
  }

  void missingWordNetKeepsTheOldCorpus() {
    QByteArray before = slurp(m_db);
    CliRun r = buildInto(m_db, path("no-such-dir"));
    checkOneLineError(r, "apt-get install wordnet-base");
    QCOMPARE(slurp(m_db), before);
  }

  void missingFoldocNamesThePackage() {
    checkOneLineError(buildInto(path("x.db"), kWordNet, path("no-such-dir")),
                      "apt-get install dict-foldoc");
    QVERIFY(!QFile::exists(path("x.db")));
  }

  void truncatedDictionaryKeepsTheOldCorpus() {
    QDir().mkpath(path("cut"));
    QVERIFY(QFile::copy(kFoldoc + "/foldoc.index", path("cut/foldoc.index")));
    QByteArray gz = slurp(kFoldoc + "/foldoc.dict.dz");
    QFile f(path("cut/foldoc.dict.dz"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(gz.left(gz.size() / 2));
    f.close();
    QByteArray before = slurp(m_db);
    CliRun r = buildInto(m_db, kWordNet, path("cut"));
    checkOneLineError(r, "truncated or corrupt");
    QVERIFY(r.err.contains("dict-foldoc"));
    QCOMPARE(slurp(m_db), before);
    QCOMPARE(QDir(m_tmp.path()).entryList({"corpus.db.tmp-*"}).size(), 0);
  }

  void unwritableOutputIsReported() {
    QFile plain(path("plain-file"));
    QVERIFY(plain.open(QIODevice::WriteOnly));
    plain.write("x");
    plain.close();
    checkOneLineError(buildInto(path("plain-file/corpus.db")), "plain-file");
  }

  void buildReplacesANewerSchemaCorpus() {
    QString p = path("newer.db");
    {
      auto db = rag::sql::Db::open(p.toStdString(), rag::sql::OpenMode::Create);
      QVERIFY(db.isOk());
      QVERIFY(db->setUserVersion(9).isOk());
    }
    QVERIFY(ragraph({"corpus", "stats", "--corpus", p}).code != 0);
    CliRun r = buildInto(p);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(ragraph({"corpus", "stats", "--corpus", p}).code, 0);
  }

  void badCommandLineIsExitTwo() {
    QCOMPARE(ragraph({"corpus", "build", "--out", path("y.db"), "--colour", "red"}).code, 2);
    QCOMPARE(ragraph({"corpus", "build", "--out", path("y.db"), "--seed", "abc"}).code, 2);
    QCOMPARE(ragraph({"corpus", "stats", "--corpus"}).code, 2);
    QVERIFY(!QFile::exists(path("y.db")));
  }

  // `ragraph demo --model` names a directory without a model, and `--method` an unknown
  // retrieval method, before any work starts.
  void demoRefusesAModelDirectoryWithoutAModel() {
    CliRun r = ragraph({"demo", "--corpus", m_db, "--model", path("no-model")});
    checkOneLineError(r, "--model: no model at");
    r = ragraph({"demo", "--corpus", m_db, "--method", "cosine"});
    QCOMPARE(r.code, 2);
    checkOneLineError(r, "--method cosine: use dense, bm25 or hybrid");
  }

  // `--help` on a command prints its own usage and does nothing else.
  void helpOnACommandPrintsItsUsage() {
    CliRun r = ragraph({"corpus", "build", "--out", path("h.db"), "--help"});
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.startsWith("usage: ragraph corpus build [--out PATH]"), qPrintable(r.out));
    QVERIFY(!QFile::exists(path("h.db")));
    QVERIFY(ragraph({"bench", "retrieval", "-h"}).out.contains("[--patience 8]"));
  }

  // `bench ivf` on a small synthetic index: step-wise search, unbounded and in budgeted
  // sub-stages, ends at FAISS's results, and the sub-stages' cost is reported against the
  // unbounded step (a ratio; no timing asserted).
  void benchIvfComparesSubStagesWithOneStep() {
    CliRun r = ragraph({"bench", "ivf", "--vectors", "4096", "--dim", "16", "--nlist", "32", "--nprobe", "8",
                        "--queries", "32", "--repeats", "2", "--budget-ms", "0.1", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QJsonObject doc = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QCOMPARE(doc.value("queries_differing_from_faiss").toInt(-1), 0);
    const QJsonObject budgeted = doc.value("budgeted").toObject();
    QCOMPARE(budgeted.value("queries_differing_from_faiss").toInt(-1), 0);
    QVERIFY(budgeted.value("steps").toInt() >= 1);
    QVERIFY(budgeted.value("over_unbounded_step").toDouble() > 0);
    QVERIFY(budgeted.value("openmp_threads").toInt() >= 1);
  }
};

QTEST_GUILESS_MAIN(TestCliCorpus)
#include "test_cli_corpus.moc"
