// `ragraph serve` and `ragraph bench http` through the built binary, over the tiny serving
// fixture: bad command lines, the benchmark's JSON, and the official `openai` npm client
// against a server started here as a user would (loopback, a free port): a plain and a streamed
// chat completion, a legacy completion, the model list and a 404. The client is installed with
// npm into <build>/tests/openai-client at test time; without node and npm, or without a
// reachable registry, that test skips and says why.
#include <QtTest>

#include <QProcess>
#include <QStandardPaths>
#include <QUrl>

#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <set>

#include "../fixtures/serving/tiny_serving.h"
#include "cli_run.h"
#include "core/json.h"
#include "rag/workflow.h"

using namespace rag;
namespace fs = std::filesystem;

class TestHttpCli : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  testing::TinyServing m_fixture;
  QStringList servingOptions() const {
    return {"--corpus", QString::fromStdString(m_fixture.corpus.string()), "--model",
            QString::fromStdString(m_fixture.model.string()), "--embedder",
            QString::fromStdString(m_fixture.embedder.string()), "--nprobe", "4"};
  }

  // Starts `ragraph serve` on a free loopback port; its URL once it listens, empty if it did not.
  QString startServer(QProcess& server, const QStringList& extra) const {
    return startRagraphServe(server, extra + servingOptions());
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    auto t = testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    m_fixture = *t;
  }

  void serveRefusesBadCommandLines() {
    CliRun r = runRagraph(QStringList{"serve"} + servingOptions());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--listen 127.0.0.1:8000"), qPrintable(r.err));
    r = runRagraph(QStringList{"serve", "--listen", "localhost"} + servingOptions());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("HOST:PORT"), qPrintable(r.err));
    r = runRagraph(QStringList{"serve", "--listen", "127.0.0.1:70000"} + servingOptions());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("65535"), qPrintable(r.err));
    r = runRagraph(QStringList{"serve", "--listen", "127.0.0.1:0", "--workflows", m_dir.filePath("none.json")} +
                   servingOptions());
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("none.json"), qPrintable(r.err));
    r = runRagraph(QStringList{"serve", "--listen", "127.0.0.1:0", "--max-inflight", "0"} + servingOptions());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--max-inflight"), qPrintable(r.err));
  }

  // A workflow file is a model named by its stem, next to the built-ins; SIGINT stops cleanly.
  void serveAWorkflowFile() {
    auto g = builtinWorkflow(Workflow::Hyde);
    QVERIFY(g.isOk());
    g->setName("my-hyde");
    const QString file = m_dir.filePath("my_hyde.json");
    QVERIFY(g->save(file.toStdString()).isOk());
    QProcess server;
    const QString url = startServer(server, {"--workflows", file, "--max-inflight", "3"});
    QVERIFY2(!url.isEmpty(), qPrintable(QString::fromUtf8(server.readAllStandardError())));
    const QUrl u(url);
    httplib::Client c(u.host().toStdString(), u.port());
    c.set_read_timeout(120);
    auto models = c.Get("/v1/models/my_hyde");
    QVERIFY(models);
    QCOMPARE(models->status, 200);
    auto doc = parseJson(models->body);
    QVERIFY(doc.isOk());
    QCOMPARE(doc->find("ragraph")->find("source")->asString(), file.toStdString());
    auto r = c.Post("/v1/completions",
                    "{\"model\": \"my_hyde\", \"prompt\": \"What is entity 3 a kind of?\", \"max_tokens\": 3}",
                    "application/json");
    QVERIFY(r);
    QVERIFY2(r->status == 200, r->body.c_str());
    auto answer = parseJson(r->body);
    QVERIFY(answer.isOk());
    QCOMPARE(answer->find("ragraph")->find("workflow")->asString(), std::string("my-hyde"));
    QCOMPARE(answer->find("ragraph")->find("stages")->size(), size_t{3});
    auto health = c.Get("/health");
    QVERIFY(health);
    QCOMPARE(parseJson(health->body)->find("in_flight_limit")->asInt64().value_or(0), int64_t{3});
    ::kill(static_cast<pid_t>(server.processId()), SIGINT);
    QVERIFY(server.waitForFinished(60000));
    const QByteArray serverErr = server.readAllStandardError();  // a sanitizer's report, if any
    QVERIFY2(server.exitCode() == 0, serverErr.constData());
    QVERIFY(serverErr.contains("SIGINT, stopping"));
  }

  // The benchmark's closed loop, both ways: every request answered, figures for each run.
  void benchHttpComparesWithTheDirectPath() {
    CliRun r = runRagraph(QStringList{"bench", "http", "--requests", "6", "--concurrency", "2", "--rounds", "1",
                                      "--max-tokens", "4", "--stream"} +
                          servingOptions());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    const auto& runs = doc->find("runs")->asArray();
    QCOMPARE(runs.size(), size_t{2});
    QCOMPARE(runs[0].find("mode")->asString(), std::string("direct"));
    QCOMPARE(runs[1].find("mode")->asString(), std::string("http-stream"));
    for (const JsonValue& run : runs) {
      QVERIFY2(*run.find("completed")->asInt64() == 6, qPrintable(r.out + r.err));  // 2 clients never exceed 2 in flight
      QCOMPARE(*run.find("refused")->asInt64(), int64_t{0});
      QVERIFY(run.find("throughput_rps")->asDouble() > 0);
    }
    QVERIFY(doc->find("summary")->find("http_throughput_cost") != nullptr);
    // An open loop: Poisson arrivals, every request counted against the SLO.
    r = runRagraph(QStringList{"bench", "http", "--requests", "6", "--concurrency", "2", "--rounds", "1",
                               "--max-tokens", "4", "--rps", "50", "--slo", "30"} +
                   servingOptions());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QCOMPARE(doc->find("settings")->find("rps")->asDouble(), 50.0);
    for (const JsonValue& run : doc->find("runs")->asArray()) {
      QCOMPARE(*run.find("completed")->asInt64(), int64_t{6});
      QCOMPARE(run.find("slo_attainment")->asDouble(), 1.0);  // 30 s is beyond any of these requests
    }
    r = runRagraph(QStringList{"bench", "http", "--workflow", "nothing"} + servingOptions());
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("oneshot"), qPrintable(r.err));
  }

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

    QProcess server;
    const QString url = startServer(server, {"--deterministic"});
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
    QVERIFY2(server.exitCode() == 0, server.readAllStandardError().constData());  // a sanitizer's report, if any
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

QTEST_GUILESS_MAIN(TestHttpCli)
#include "test_http_cli.moc"
