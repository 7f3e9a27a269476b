// The official `openai` npm client against `ragraph serve` started here as a user would (the
// built binary, loopback, a free port), over the tiny serving fixture: a plain and a streamed
// chat completion, a legacy completion, the model list and a 404. The client is installed with
// npm into <build>/tests/openai-client at test time; without node and npm, or without a
// reachable registry, the test skips and says why.
#include <QtTest>

#include <QProcess>
#include <QStandardPaths>

#include <filesystem>
#include <set>

#include "../fixtures/serving/tiny_serving.h"
#include "core/json.h"

using namespace rag;
namespace fs = std::filesystem;

class TestHttpOpenaiClient : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void openaiClientStreamsAnAnswer() {
    const QString node = QStandardPaths::findExecutable("node");
    const QString npm = QStandardPaths::findExecutable("npm");
    if (node.isEmpty() || npm.isEmpty())
      QSKIP("node and npm are not on PATH: the openai client test needs them (Debian: apt-get install nodejs npm)");

    // The client, installed once per build tree.
    const fs::path clientDir = fs::path(RAGWB_BIN_DIR) / ".." / "tests" / "openai-client";
    fs::create_directories(clientDir);
    for (const char* f : {"package.json", "client.mjs"})
      fs::copy_file(fs::path(RAGWB_SOURCE_DIR) / "tests/app/openai_client" / f, clientDir / f,
                    fs::copy_options::overwrite_existing);
    if (!fs::exists(clientDir / "node_modules/openai/package.json")) {
      QProcess install;
      install.setWorkingDirectory(QString::fromStdString(clientDir.string()));
      install.start(npm, {"install", "--no-audit", "--no-fund", "--loglevel=error"});
      if (!install.waitForFinished(300000) || install.exitCode() != 0) {
        install.kill();
        const QByteArray why = install.readAllStandardError().right(300);
        QSKIP(qPrintable("npm could not install the openai client (is the npm registry reachable?): " +
                         QString::fromUtf8(why)));
      }
    }

    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    auto t = testing::makeTinyServing(fs::path(dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());

    QProcess server;
    server.start(QStringLiteral(RAGWB_BIN_DIR "/ragraph"),
                 {"serve", "--listen", "127.0.0.1:0", "--corpus", QString::fromStdString(t->corpus.string()), "--model",
                  QString::fromStdString(t->model.string()), "--embedder", QString::fromStdString(t->embedder.string()),
                  "--nprobe", "4", "--deterministic"});
    QString url;
    for (int i = 0; i < 240 && url.isEmpty(); ++i) {  // at most 2 minutes to load
      if (server.state() == QProcess::NotRunning) break;
      server.waitForReadyRead(500);
      const QString out = QString::fromUtf8(server.peek(4096));
      const int at = out.indexOf("listening on ");
      const int nl = out.indexOf('\n', at);
      if (at >= 0 && nl > at) url = out.mid(at + 13, nl - at - 13).trimmed();
    }
    QVERIFY2(!url.isEmpty(), qPrintable("ragraph serve did not start: " + QString::fromUtf8(server.readAllStandardError())));

    QProcess client;
    client.setWorkingDirectory(QString::fromStdString(clientDir.string()));
    client.start(node, {"client.mjs", url, "What is entity 7 a kind of?"});
    const bool finished = client.waitForFinished(180000);
    const QString out = QString::fromUtf8(client.readAllStandardOutput());
    const QString err = QString::fromUtf8(client.readAllStandardError());
    server.terminate();  // SIGTERM: a clean stop
    QVERIFY(server.waitForFinished(60000));
    QCOMPARE(server.exitStatus(), QProcess::NormalExit);
    QCOMPARE(server.exitCode(), 0);
    QVERIFY2(finished && client.exitCode() == 0, qPrintable(out + err));

    auto doc = parseJson(out.trimmed().toStdString());
    QVERIFY2(doc.isOk(), qPrintable(out));
    qInfo("openai %s: %s", doc->find("openaiVersion")->isString() ? doc->find("openaiVersion")->asString().c_str() : "?",
          qPrintable(out.trimmed()));
    std::set<std::string> models;
    for (const JsonValue& m : doc->find("models")->asArray()) models.insert(m.asString());
    QVERIFY(models.count("ragraph/oneshot") && models.count("ragraph/irg") && models.count("ragraph/multistep"));
    const JsonValue* plain = doc->find("plain");
    QCOMPARE(*plain->find("passages")->asInt64(), int64_t{5});
    QCOMPARE(plain->find("stages")->size(), size_t{2});
    const JsonValue* stream = doc->find("stream");
    QCOMPARE(stream->find("content")->asString(), plain->find("content")->asString());  // deterministic serving
    const std::string finish = stream->find("finish")->asString();
    QVERIFY(finish == "stop" || finish == "length");
    QCOMPARE(*stream->find("passages")->asInt64(), int64_t{5});
    QVERIFY(stream->find("usage")->find("completion_tokens")->asInt64().value_or(0) >= 1);
    QCOMPARE(*doc->find("completion")->find("stages")->asInt64(), int64_t{6});  // irg's loop
    const JsonValue* notFound = doc->find("notFound");
    QVERIFY2(notFound && notFound->isObject(), qPrintable(out));
    QCOMPARE(*notFound->find("status")->asInt64(), int64_t{404});
    QCOMPARE(notFound->find("code")->asString(), std::string("model_not_found"));
  }
};

QTEST_GUILESS_MAIN(TestHttpOpenaiClient)
#include "test_http_openai_client.moc"
