// `ragraph dragon cloud` and `ragraph dragon device` as two real processes on loopback, with
// the shipped model on a tiny corpus whose passages are split between WordNet (the cloud's)
// and FOLDOC (the device's); bad addresses; a cloud killed mid-generation. No timings asserted.
#include <QtTest>

#include <filesystem>

#include "../fixtures/workload/tiny_corpus.h"
#include "cli_run.h"
#include "core/json.h"
#include "storage/sqlite.h"

using namespace rag;

class TestCliDragon : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString corpus() const { return m_dir.filePath("corpus.db"); }
  QString model() const { return QStringLiteral(RAGWB_SOURCE_DIR "/datasets/models/rag-llama"); }

  // Starts a cloud on a free port; returns its address ("" when it did not come up).
  QString startCloud(QProcess& p, const QStringList& extra = {}) {
    p.setProcessChannelMode(QProcess::SeparateChannels);
    p.start(QStringLiteral(RAGWB_BIN_DIR "/ragraph"),
            QStringList{"dragon", "cloud", "--listen", "127.0.0.1:0", "--once", "--corpus", corpus(), "--model", model()} +
                extra);
    QString out;
    for (int i = 0; i < 600 && !out.contains('\n'); ++i) {
      p.waitForReadyRead(100);
      out += QString::fromUtf8(p.readAllStandardOutput());
      if (p.state() == QProcess::NotRunning) break;
    }
    const QString prefix = "listening on ";
    if (!out.startsWith(prefix)) return {};
    return out.mid(prefix.size()).trimmed();
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    if (!std::filesystem::exists(model().toStdString() + "/model.safetensors"))
      QSKIP("the shipped model datasets/models/rag-llama is missing");
    testing::TinyCorpusSpec spec;
    spec.entities = 40;
    spec.passages = true;
    Status s = testing::makeTinyCorpus(corpus().toStdString(), spec);
    QVERIFY2(s.isOk(), s.message().c_str());
    // Every other passage becomes a FOLDOC one: the device's private documents.
    auto db = sql::Db::open(corpus().toStdString(), sql::OpenMode::ReadWrite);
    QVERIFY(db.isOk());
    QVERIFY(db->exec("UPDATE passages SET source = 'foldoc' WHERE id % 2 = 0").isOk());
  }

  void deviceAndCloudAnswerTogether() {
    QProcess cloud;
    const QString addr = startCloud(cloud);
    QVERIFY2(!addr.isEmpty(), qPrintable(cloud.readAllStandardError()));
    CliRun r = runRagraph({"dragon", "device", "--connect", addr, "What are thing 5 and thing 4 a kind of?", "--corpus", corpus(),
                           "--model", model(), "--max-tokens", "8", "--ignore-eos", "--latency", "20", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QCOMPARE(*doc->find("tokens")->asInt64(), int64_t{8});
    QVERIFY(*doc->find("documents")->find("device")->asInt64() >= 1);
    QVERIFY2(*doc->find("documents")->find("cloud")->asInt64() >= 1, qPrintable(r.out + r.err));
    const JsonValue* sent = doc->find("bytes_sent_by_type");
    QVERIFY(sent->find("draft") != nullptr);
    QVERIFY(sent->find("doc_text") == nullptr);  // passages never cross the link
    QVERIFY(doc->find("bytes_received_by_type")->find("doc_text") == nullptr);
    QVERIFY(cloud.waitForFinished(30000));  // --once: it leaves with the device
    QCOMPARE(cloud.exitCode(), 0);
  }

  void badAddressesAreClearErrors() {
    CliRun r = runRagraph({"dragon", "device", "--connect", "nohost", "q?", "--corpus", corpus(), "--model", model()});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("HOST:PORT"), qPrintable(r.err));
    r = runRagraph({"dragon", "device", "--connect", "127.0.0.1:1", "q?", "--corpus", corpus(), "--model", model()});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("refused"), qPrintable(r.err));
    r = runRagraph({"dragon", "device", "--connect", "127.0.0.1:1", "q?", "--method", "nonsense"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("drdg_tw"), qPrintable(r.err));
  }

  void aKilledCloudNeitherHangsNorCrashesTheDevice() {
    QProcess cloud;
    const QString addr = startCloud(cloud);
    QVERIFY(!addr.isEmpty());
    QProcess device;
    device.start(QStringLiteral(RAGWB_BIN_DIR "/ragraph"),
                 {"dragon", "device", "--connect", addr, "What is entity 6 a kind of?", "--corpus", corpus(), "--model",
                  model(), "--max-tokens", "60", "--ignore-eos", "--latency", "200", "--timeout-ms", "5000"});
    QVERIFY(device.waitForStarted());
    QTest::qWait(1500);
    cloud.kill();
    QVERIFY(device.waitForFinished(60000));  // no hang
    QCOMPARE(device.exitStatus(), QProcess::NormalExit);
    const QString err = QString::fromUtf8(device.readAllStandardError());
    if (device.exitCode() == 0)
      QVERIFY2(err.contains("peer was lost") || err.contains("60 tokens"), qPrintable(err));
    else
      QVERIFY2(err.contains("ragraph: error:"), qPrintable(err));  // killed before the run began
    cloud.waitForFinished(5000);
  }
};

QTEST_GUILESS_MAIN(TestCliDragon)
#include "test_cli_dragon.moc"
