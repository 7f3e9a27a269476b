// Faults a user meets, on the real binaries (issue 26, item 5):
//  - the disk fills while `ragraph corpus build` or `ragraph index build` replaces a file: the
//    old file stays byte for byte, no temp file is left behind, and the error says why. The full
//    disk is made per process with RLIMIT_FSIZE (a write past it fails with EFBIG exactly where a
//    full disk's fails with ENOSPC; a tmpfs of fixed size would need root);
//  - a corrupt model file: a one-line error naming the file, never a crash;
//  - the workbench killed with SIGKILL in the middle of a run: its run history opens cleanly,
//    passes SQLite's integrity check, keeps every request it had recorded, and lists the killed
//    run as unfinished.
#include <QtTest>

#include <QCryptographicHash>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QThread>

#include <csignal>
#include <sys/resource.h>

#include "cli_run.h"
#include "rag/run_store.h"
#include "storage/sqlite.h"

namespace {

const QString kWordNet = QStringLiteral(RAGWB_FIXTURES_DIR "/corpus/wordnet");
const QString kFoldoc = QStringLiteral(RAGWB_FIXTURES_DIR "/corpus/foldoc");
const QString kModels = QStringLiteral(RAGWB_SOURCE_DIR "/datasets/models");

QByteArray digest(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256).toHex();
}

// `ragraph ARGS` whose writes fail past `limitBytes` bytes a file, as on a full disk.
CliRun ragraphWithFileLimit(const QStringList& args, rlim_t limitBytes) {
  return runRagraph(args, 120000, QProcessEnvironment::systemEnvironment(), [limitBytes] {
    const rlimit lim{limitBytes, limitBytes};
    setrlimit(RLIMIT_FSIZE, &lim);
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails (EFBIG) instead of killing
  });
}

// Files in `dir` whose name holds ".tmp" (the staging names writers rename from).
QStringList tempFiles(const QString& dir) {
  QStringList left;
  for (const QString& f : QDir(dir).entryList(QDir::Files))
    if (f.contains(".tmp")) left << f;
  return left;
}

void checkOneLineError(const CliRun& r, const QString& mustContain) {
  QVERIFY2(r.code > 0, qPrintable(QString("exit %1: %2").arg(r.code).arg(r.err)));  // not a crash
  const QString e = r.err.trimmed();
  QVERIFY2(e.startsWith("ragraph: error: "), qPrintable(e));
  QVERIFY2(!e.contains('\n'), qPrintable(e));
  QVERIFY2(e.contains(mustContain, Qt::CaseInsensitive), qPrintable(e));
}

}  // namespace

class TestFaults : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  QString m_corpus;

  QString path(const QString& name) const { return m_tmp.filePath(name); }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    m_corpus = path("corpus.db");
    CliRun r = runRagraph({"corpus", "build", "--out", m_corpus, "--wordnet", kWordNet, "--foldoc", kFoldoc,
                           "--quiet"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = runRagraph({"index", "build", "--corpus", m_corpus, "--embedder", kModels + "/rag-embedder", "--dtype",
                    "f32", "--quiet"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
  }

  void fullDiskDuringCorpusBuildKeepsTheOldCorpus() {
    const QByteArray before = digest(m_corpus);
    QVERIFY(!before.isEmpty());
    // The fixture corpus is 0.5 MB; its rebuild (another seed) dies at 100 KB.
    CliRun r = ragraphWithFileLimit({"corpus", "build", "--out", m_corpus, "--wordnet", kWordNet, "--foldoc",
                                     kFoldoc, "--seed", "2", "--quiet"},
                                    100 * 1024);
    checkOneLineError(r, "ulimit -f");
    QCOMPARE(digest(m_corpus), before);
    QCOMPARE(tempFiles(m_tmp.path()), QStringList());
    // Still a corpus a user can open.
    CliRun stats = runRagraph({"corpus", "stats", "--corpus", m_corpus, "--json"});
    QVERIFY2(stats.code == 0, qPrintable(stats.err));
  }

  void fullDiskDuringIndexBuildKeepsTheOldIndex() {
    const QString ivf = m_corpus + ".index.ivf", vectors = m_corpus + ".index.vectors";
    const QByteArray ivfBefore = digest(ivf), vectorsBefore = digest(vectors);
    QVERIFY(!ivfBefore.isEmpty() && !vectorsBefore.isEmpty());
    // Re-clustering (another --nlist) rewrites the 360 KB IVF file; it dies at 200 KB.
    CliRun r = ragraphWithFileLimit({"index", "build", "--corpus", m_corpus, "--embedder", kModels + "/rag-embedder",
                                     "--dtype", "f32", "--nlist", "4", "--quiet"},
                                    200 * 1024);
    checkOneLineError(r, "disk full");
    QCOMPARE(digest(ivf), ivfBefore);
    QCOMPARE(digest(vectors), vectorsBefore);
    QCOMPARE(tempFiles(m_tmp.path()), QStringList());
    // The old index still serves.
    CliRun q = runRagraph({"run", "--qa", "2", "--context", "retrieved", "--corpus", m_corpus, "--embedder",
                           kModels + "/rag-embedder", "--model", kModels + "/rag-llama", "--max-tokens", "4"});
    QVERIFY2(q.code == 0, qPrintable(q.err));
  }

  void corruptModelFileIsAOneLineError_data() {
    QTest::addColumn<QString>("damage");
    QTest::newRow("truncated") << "truncate";
    QTest::newRow("garbage header") << "header";
    QTest::newRow("empty") << "empty";
  }
  void corruptModelFileIsAOneLineError() {
    QFETCH(QString, damage);
    const QString dir = path("model-" + damage);
    QVERIFY(QDir().mkpath(dir));
    for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"})
      QVERIFY(QFile::copy(kModels + "/rag-llama/" + f, dir + "/" + f));
    QFile weights(dir + "/model.safetensors");
    QVERIFY(weights.open(QIODevice::ReadWrite));
    if (damage == "truncate") {
      QVERIFY(weights.resize(weights.size() / 2));
    } else if (damage == "header") {
      QVERIFY(weights.seek(8));
      QVERIFY(weights.write(QByteArray(64, '\xff')) == 64);
    } else {
      QVERIFY(weights.resize(0));
    }
    weights.close();
    CliRun r = runRagraph({"run", "--qa", "2", "--context", "gold", "--corpus", m_corpus, "--model", dir});
    checkOneLineError(r, "model.safetensors");
  }

  // The workflow to open is checked before the window opens: a missing file, one that is not a
  // workflow, two of them: exit 2 with a line naming the problem.
  void workbenchRefusesABadWorkflowArgument() {
    const QString workbench = QStringLiteral(RAGWB_BIN_DIR "/ragraph-workbench");
    if (!QFile::exists(workbench)) QSKIP("no ragraph-workbench in this build (RAGWB_GUI=OFF)");
    const QString notJson = path("not-a-workflow.json");
    {
      QFile f(notJson);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("{\"format\": \"ragraph-workflow\", \"version\": 1, \"nodes\": [{\"id\": \"c\", \"kind\": \"summarise\"}]}");
    }
    const QList<std::pair<QStringList, QString>> cases = {
        {{path("missing.json")}, "does not exist"},
        {{notJson}, "\"summarise\" is not a node kind"},
        {{"recomp", "oneshot"}, "one workflow at most"}};
    for (const auto& [args, says] : cases) {
      QProcess gui;
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("QT_QPA_PLATFORM", "offscreen");
      env.insert("RAGRAPH_DATA_DIR", path("workbench-args"));
      gui.setProcessEnvironment(env);
      gui.setProcessChannelMode(QProcess::MergedChannels);
      gui.start(workbench, QStringList{"--corpus", m_corpus} + args);
      QVERIFY(gui.waitForFinished(60000));
      const QString out = QString::fromUtf8(gui.readAll());
      QCOMPARE(gui.exitCode(), 2);
      QVERIFY2(out.contains("error: ") && out.contains(says), qPrintable(out));
    }
  }

  void killedWorkbenchLeavesAReadableHistory() {
    const QString workbench = QStringLiteral(RAGWB_BIN_DIR "/ragraph-workbench");
    if (!QFile::exists(workbench)) QSKIP("no ragraph-workbench in this build (RAGWB_GUI=OFF)");
    const QString dataDir = path("workbench-data");
    const std::filesystem::path store = dataDir.toStdString() + "/runs.db";
    QProcess gui;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("QT_QPA_PLATFORM", "offscreen");
    env.insert("RAGRAPH_DATA_DIR", dataDir);
    gui.setProcessEnvironment(env);
    gui.setProcessChannelMode(QProcess::MergedChannels);
    gui.start(workbench, {"--corpus", m_corpus, "--demo"});
    QVERIFY2(gui.waitForStarted(), qPrintable(gui.errorString()));

    // Wait until a run is under way with a few requests recorded, then kill -9 mid-run.
    int64_t seenRequests = 0, killedRun = 0;
    QElapsedTimer clock;
    clock.start();
    while (clock.elapsed() < 120000 && gui.state() == QProcess::Running) {
      QThread::msleep(50);
      if (!std::filesystem::exists(store)) continue;
      auto reader = rag::RunStore::open(store);
      if (!reader) continue;  // busy while the workbench writes: try again
      auto runs = reader->listRuns();
      if (!runs || runs->empty() || (*runs)[0].finished) continue;
      auto recorded = reader->requests((*runs)[0].id);
      if (recorded && recorded->size() >= 3) {
        ::kill(static_cast<pid_t>(gui.processId()), SIGKILL);
        seenRequests = static_cast<int64_t>(recorded->size());
        killedRun = (*runs)[0].id;
        break;
      }
    }
    QVERIFY2(killedRun != 0, qPrintable("no run recorded 3 requests in time; workbench said: " +
                                        QString::fromUtf8(gui.readAll())));
    QVERIFY(gui.waitForFinished(10000));
    QCOMPARE(gui.exitStatus(), QProcess::CrashExit);

    // What the next start of the workbench (or any reader) finds.
    {
      auto db = rag::sql::Db::open(store, rag::sql::OpenMode::ReadOnly);
      QVERIFY2(static_cast<bool>(db), qPrintable(QString::fromStdString(db.status().message())));
      auto check = db->prepare("PRAGMA integrity_check");
      QVERIFY2(static_cast<bool>(check), qPrintable(QString::fromStdString(check.status().message())));
      auto row = check->step();
      QVERIFY(row && *row);
      QCOMPARE(QString::fromStdString(check->columnText(0)), QStringLiteral("ok"));
    }
    auto reopened = rag::RunStore::open(store);
    QVERIFY2(static_cast<bool>(reopened), qPrintable(QString::fromStdString(reopened.status().message())));
    auto runs = reopened->listRuns();
    QVERIFY(static_cast<bool>(runs));
    auto killed = std::find_if(runs->begin(), runs->end(), [&](const rag::RunSummary& s) { return s.id == killedRun; });
    QVERIFY(killed != runs->end());
    QVERIFY(!killed->finished);
    auto kept = reopened->requests(killedRun);
    QVERIFY(static_cast<bool>(kept));
    QVERIFY2(static_cast<int64_t>(kept->size()) >= seenRequests,
             qPrintable(QString("%1 requests kept, %2 seen before the kill").arg(kept->size()).arg(seenRequests)));
    for (const rag::RequestRecord& rec : *kept) QVERIFY(!rec.question.empty());
    // Every earlier run of the demo finished and kept all of its requests.
    for (const rag::RunSummary& s : *runs) {
      if (s.id == killedRun) continue;
      QVERIFY(s.finished);
      auto all = reopened->requests(s.id);
      QVERIFY(static_cast<bool>(all));
      QCOMPARE(static_cast<int64_t>(all->size()), s.settings.requests);
    }
  }
};

QTEST_GUILESS_MAIN(TestFaults)
#include "test_faults.moc"
