// `ragraph serve`'s HTTP server in-process (app/server/), on loopback and a free port, over the
// tiny serving fixture (random models: the answers are noise, the plumbing is real). Plain and
// streamed completions against the engine's own answer, bad input, concurrency past the
// in-flight limit, the Prometheus exposition. No timing is asserted.
#include <QtTest>

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "../fixtures/serving/tiny_serving.h"
#include "core/json.h"
#include "server/answer_stream.h"
#include "server/bounded_task_queue.h"
#include "server/openai_protocol.h"
#include "server/openai_server.h"
#include "server/utf8_stream.h"

using namespace rag;
namespace fs = std::filesystem;

namespace {

constexpr const char* kQuestion = "What is entity 7 a kind of?";

std::string chatBody(const std::string& model, const std::string& question, bool stream, int maxTokens = 8) {
  std::ostringstream out;
  out << "{\"model\": \"" << model << "\", \"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, "
      << "{\"role\": \"user\", \"content\": \"" << question << "\"}], \"max_tokens\": " << maxTokens;
  if (stream) out << ", \"stream\": true, \"stream_options\": {\"include_usage\": true}";
  out << "}";
  return out.str();
}

// The JSON payloads of a server-sent event stream, in order ("[DONE]" included as text).
std::vector<std::string> sseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

JsonValue parse(const std::string& text) {
  Result<JsonValue> v = parseJson(text);
  if (!v) qWarning("not JSON (%s): %s", v.status().message().c_str(), text.substr(0, 400).c_str());
  return v ? *v : JsonValue();
}

std::string errorCode(const std::string& body) {
  JsonValue v = parse(body);
  const JsonValue* e = v.find("error");
  const JsonValue* c = e ? e->find("code") : nullptr;
  return c && c->isString() ? c->asString() : std::string();
}

std::string errorField(const std::string& body, const char* field) {
  JsonValue v = parse(body);
  const JsonValue* e = v.find("error");
  const JsonValue* f = e ? e->find(field) : nullptr;
  return f && f->isString() ? f->asString() : std::string();
}

// A value of one sample line of the Prometheus text ("name{labels} value"), -1 when absent.
double metric(const std::string& text, const std::string& sample) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(sample + " ", 0) == 0) return std::stod(line.substr(sample.size() + 1));
  return -1;
}

}  // namespace

class TestHttpServer : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  testing::TinyServing m_fixture;
  std::unique_ptr<server::OpenAiServer> m_server;
  int m_refused = 0;  // 429s the tests saw

  httplib::Client client() {
    httplib::Client c("127.0.0.1", m_server->port());
    c.set_read_timeout(120);
    c.set_connection_timeout(10);
    return c;
  }

  EngineParams engineParams() {
    EngineParams ep;
    ep.corpus = m_fixture.corpus;
    ep.workerThreads = 1;
    ep.traceCapacity = 2;
    ep.serving.modelDir = m_fixture.model;
    ep.serving.embedderDir = m_fixture.embedder;
    ep.serving.nprobe = 4;
    ep.serving.deterministic = true;  // answers do not depend on what else is in the batch
    return ep;
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    auto t = testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    m_fixture = *t;
    auto models = server::builtinServedWorkflows();
    QVERIFY2(models.isOk(), models.status().message().c_str());
    server::ServerParams sp;
    sp.port = 0;
    sp.maxInFlight = 2;
    sp.spareThreads = 4;
    auto s = server::OpenAiServer::create(engineParams(), std::move(*models), sp);
    QVERIFY2(s.isOk(), s.status().message().c_str());
    m_server = std::move(*s);
    QVERIFY(m_server->port() > 0);
    QVERIFY(m_server->start().isOk());
  }

  void cleanupTestCase() {
    if (m_server) m_server->stop();
  }

  void utf8IsRepairedHoweverTheTextIsCut() {
    const std::string text = "caf\xC3\xA9 \xF0\x9F\x98\x80 bad\xFF\xC3 end\xE2\x82";
    const std::string whole = server::sanitizeUtf8(text);
    QVERIFY(parseJson("\"" + whole + "\"").isOk());  // valid UTF-8 (the strict reader checks)
    QCOMPARE(whole, std::string("caf\xC3\xA9 \xF0\x9F\x98\x80 bad\xEF\xBF\xBD\xEF\xBF\xBD end\xEF\xBF\xBD"));
    for (size_t cut = 0; cut <= text.size(); ++cut)
      for (size_t cut2 = cut; cut2 <= text.size(); cut2 += 3) {
        server::Utf8Assembler a;
        std::string pieces = a.push(text.substr(0, cut));
        pieces += a.push(text.substr(cut, cut2 - cut));
        pieces += a.push(text.substr(cut2));
        pieces += a.flush();
        QCOMPARE(pieces, whole);
      }
  }

  // max_tokens, temperature and stop change the answer-writing generation nodes and nothing
  // else, in every built-in (whatever node kinds it has).
  void samplingOptionsTouchOnlyTheAnswerNodes() {
    server::CompletionRequest req;
    req.maxTokens = 7;
    req.temperature = 0.5;
    req.stop = {"###"};
    for (Workflow w : kAllWorkflows) {
      const WorkflowGraph g = *builtinWorkflow(w);
      const WorkflowGraph a = server::applySamplingOptions(g, req);
      QVERIFY(a.validate().isOk());
      QCOMPARE(a.edges(), g.edges());
      QCOMPARE(a.nodes().size(), g.nodes().size());
      int answerNodes = 0;
      for (size_t i = 0; i < g.nodes().size(); ++i) {
        const WorkflowNode& before = g.nodes()[i];
        const WorkflowNode& after = a.nodes()[i];
        if (before.kind != NodeKind::Generation || before.outputVar != g.answerVar()) {
          QVERIFY2(after == before, before.id.c_str());
          continue;
        }
        ++answerNodes;
        QCOMPARE(after.generation.maxTokens, int64_t{7});
        QCOMPARE(after.generation.temperature, 0.5);
        QCOMPARE(after.generation.stop.back(), std::string("###"));
        QCOMPARE(after.promptTemplate, before.promptTemplate);
      }
      QVERIFY2(answerNodes >= 1, std::string(workflowName(w)).c_str());
    }
  }

  // The accepting thread waits while maxQueued connections wait: nothing queues without bound.
  void taskQueueIsBounded() {
    std::atomic<int64_t> queued{0};
    server::BoundedThreadPool pool(1, 1, &queued);
    std::mutex m;
    std::condition_variable cv;
    bool release = false;
    std::atomic<int> ran{0};
    auto blocker = [&] {
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return release; });
      ++ran;
    };
    pool.enqueue(blocker);  // taken by the one thread
    for (int i = 0; i < 200 && queued.load() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.enqueue(blocker);  // waits in the queue
    QCOMPARE(queued.load(), int64_t{1});
    std::atomic<bool> thirdIn{false};
    std::thread accept([&] {
      pool.enqueue(blocker);  // the queue is full: this waits
      thirdIn = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    QVERIFY(!thirdIn.load());
    {
      std::lock_guard lock(m);
      release = true;
    }
    cv.notify_all();
    accept.join();
    QVERIFY(thirdIn.load());
    pool.shutdown();
    QCOMPARE(ran.load(), 3);
  }

  // Which tokens stream live, from the engine's events alone (no timing involved).
  void answerStreamSendsOnlyTheFinalAnswersTokensLive() {
    using K = RequestEvent::Kind;
    auto ev = [](K kind, const char* node, const char* text) { return RequestEvent{kind, 1, node, text}; };
    const WorkflowGraph oneshot = *builtinWorkflow(Workflow::OneShot);
    QCOMPARE(server::AnswerStream::terminalAnswerNodes(oneshot), std::set<std::string>{"answer"});
    QVERIFY(server::AnswerStream::terminalAnswerNodes(*builtinWorkflow(Workflow::Irg)).empty());  // it loops
    {
      // Live, trimmed as the engine trims the node's output: no leading white space, trailing
      // white space only once something follows it.
      server::AnswerStream s(oneshot);
      QCOMPARE(s.onEvent(ev(K::NodeStarted, "retrieve", "retrieve")), std::string());
      QCOMPARE(s.onEvent(ev(K::NodeFinished, "retrieve", "passages")), std::string());
      QCOMPARE(s.onEvent(ev(K::NodeStarted, "answer", "answer")), std::string());
      QCOMPARE(s.onEvent(ev(K::Tokens, "answer", " ")), std::string());
      QCOMPARE(s.onEvent(ev(K::Tokens, "answer", " a dog")), std::string("a dog"));
      QCOMPARE(s.onEvent(ev(K::Tokens, "answer", " \xC3")), std::string(" "));  // half a character waits
      QCOMPARE(s.onEvent(ev(K::Tokens, "answer", "\xA9 ")), std::string("\xC3\xA9"));  // so does white space
      QCOMPARE(s.onEvent(ev(K::NodeFinished, "answer", "a dog \xC3\xA9")), std::string());
      QCOMPARE(s.onEvent(ev(K::Finished, "", "a dog \xC3\xA9")), std::string());
      QVERIFY(s.consistent() && s.streamedLive());
    }
    {
      // A run adopted from a speculative generation missed its first tokens: sent at the end.
      server::AnswerStream s(oneshot);
      s.onEvent(ev(K::NodeStarted, "retrieve", "retrieve"));
      s.onEvent(ev(K::Speculation, "retrieve", "answer"));
      s.onEvent(ev(K::NodeFinished, "retrieve", "passages"));
      s.onEvent(ev(K::NodeStarted, "answer", "answer"));
      QCOMPARE(s.onEvent(ev(K::Tokens, "answer", " cat")), std::string());
      QCOMPARE(s.onEvent(ev(K::Finished, "", "a cat")), std::string("a cat"));
      QVERIFY(s.consistent() && !s.streamedLive());
    }
    {
      // A rolled-back speculation: the node's own run streams live again.
      server::AnswerStream s(oneshot);
      s.onEvent(ev(K::Speculation, "retrieve", "answer"));
      s.onEvent(ev(K::Rollback, "retrieve", "answer"));
      s.onEvent(ev(K::NodeStarted, "answer", "answer"));
      QCOMPARE(s.onEvent(ev(K::Tokens, "answer", "yes")), std::string("yes"));
      QCOMPARE(s.onEvent(ev(K::Finished, "", "yes")), std::string());
    }
    {
      // irg writes its answer in a loop: nothing before the end, then the last round's answer.
      server::AnswerStream s(*builtinWorkflow(Workflow::Irg));
      s.onEvent(ev(K::NodeStarted, "generate", "generate"));
      QCOMPARE(s.onEvent(ev(K::Tokens, "generate", "first round")), std::string());
      s.onEvent(ev(K::NodeFinished, "generate", "first round"));
      s.onEvent(ev(K::NodeStarted, "generate", "generate"));
      QCOMPARE(s.onEvent(ev(K::Tokens, "generate", "second")), std::string());
      QCOMPARE(s.onEvent(ev(K::Finished, "", "second")), std::string("second"));
    }
  }

  void modelsHealthAndUnknownRoutes() {
    auto c = client();
    auto r = c.Get("/v1/models");
    QVERIFY(r);
    QCOMPARE(r->status, 200);
    JsonValue models = parse(r->body);
    QCOMPARE(models.find("object")->asString(), std::string("list"));
    std::set<std::string> ids;
    for (const JsonValue& m : models.find("data")->asArray()) ids.insert(m.find("id")->asString());
    std::set<std::string> builtins;
    for (Workflow w : kAllWorkflows) builtins.insert("ragraph/" + std::string(workflowName(w)));
    QVERIFY(builtins.count("ragraph/oneshot") && builtins.count("ragraph/irg"));
    QCOMPARE(ids, builtins);
    r = c.Get("/v1/models/ragraph/irg");
    QVERIFY(r);
    QCOMPARE(r->status, 200);
    QCOMPARE(parse(r->body).find("id")->asString(), std::string("ragraph/irg"));
    r = c.Get("/v1/models/ragraph/nothing");
    QVERIFY(r);
    QCOMPARE(r->status, 404);
    QCOMPARE(errorCode(r->body), std::string("model_not_found"));
    r = c.Get("/health");
    QVERIFY(r);
    QCOMPARE(r->status, 200);
    QCOMPARE(parse(r->body).find("status")->asString(), std::string("ok"));
    r = c.Get("/v2/anything");
    QVERIFY(r);
    QCOMPARE(r->status, 404);
    QCOMPARE(errorCode(r->body), std::string("unknown_endpoint"));
    QVERIFY(errorField(r->body, "message").find("/v1/chat/completions") != std::string::npos);
  }

  // The server's answer is the engine's answer for the same question and workflow, with the
  // passages and stage timings in the extension.
  void plainChatCompletionIsTheEnginesAnswer() {
    auto c = client();
    auto r = c.Post("/v1/chat/completions", chatBody("ragraph/oneshot", kQuestion, false), "application/json");
    QVERIFY(r);
    QVERIFY2(r->status == 200, r->body.c_str());
    QVERIFY(r->get_header_value("Content-Type").find("application/json") != std::string::npos);
    JsonValue doc = parse(r->body);
    QCOMPARE(doc.find("object")->asString(), std::string("chat.completion"));
    QCOMPARE(doc.find("model")->asString(), std::string("ragraph/oneshot"));
    QVERIFY(doc.find("id")->asString().rfind("chatcmpl-", 0) == 0);
    const JsonValue& choice = doc.find("choices")->asArray().at(0);
    QCOMPARE(choice.find("message")->find("role")->asString(), std::string("assistant"));
    const std::string content = choice.find("message")->find("content")->asString();
    const std::string finish = choice.find("finish_reason")->asString();
    QVERIFY(finish == "stop" || finish == "length");

    const JsonValue* ext = doc.find("ragraph");
    QVERIFY(ext != nullptr);
    QCOMPARE(ext->find("passages")->size(), size_t{5});  // oneshot's top-k
    for (const JsonValue& p : ext->find("passages")->asArray()) {
      QVERIFY(p.find("id")->asInt64().value_or(0) >= 1);
      QVERIFY(p.find("text")->asString().find("entity ") != std::string::npos);
    }
    const auto& stages = ext->find("stages")->asArray();
    QCOMPARE(stages.size(), size_t{2});
    QCOMPARE(stages[0].find("node")->asString(), std::string("retrieve"));
    QCOMPARE(stages[1].find("kind")->asString(), std::string("generation"));
    const int64_t tokens = *stages[1].find("tokens")->asInt64();
    QVERIFY(tokens >= 1 && tokens <= 8);  // max_tokens 8 reached the answer node
    QCOMPARE(*doc.find("usage")->find("completion_tokens")->asInt64(), tokens);
    QVERIFY(*doc.find("usage")->find("prompt_tokens")->asInt64() > 0);

    // The same request straight through Engine::submit.
    server::CompletionRequest req;
    QVERIFY(!server::parseCompletionRequest(chatBody("ragraph/oneshot", kQuestion, false),
                                            server::Endpoint::ChatCompletions, req));
    const WorkflowGraph g = server::applySamplingOptions(*builtinWorkflow(Workflow::OneShot), req);
    QCOMPARE(g.findNode("answer")->generation.maxTokens, int64_t{8});
    auto h = m_server->engine().submit(kQuestion, g);
    QVERIFY(h.isOk());
    auto direct = h->wait();
    QVERIFY2(direct.isOk(), direct.status().message().c_str());
    QCOMPARE(content, server::sanitizeUtf8(direct->answer));
  }

  void plainCompletionEndpoint() {
    auto c = client();
    auto r = c.Post("/v1/completions",
                    std::string("{\"model\": \"ragraph/irg\", \"prompt\": [\"") + kQuestion + "\"], \"max_tokens\": 4}",
                    "application/json");
    QVERIFY(r);
    QVERIFY2(r->status == 200, r->body.c_str());
    JsonValue doc = parse(r->body);
    QCOMPARE(doc.find("object")->asString(), std::string("text_completion"));
    QVERIFY(doc.find("choices")->asArray().at(0).find("text")->isString());
    // irg: retrieve, then (generate, retrieve_again) twice and generate: its loop ran.
    QCOMPARE(doc.find("ragraph")->find("stages")->size(), size_t{6});
  }

  // A stream's content is the answer a plain request gets; the role comes first, workflow
  // events ride along in the extension, and the last chunks carry finish_reason and usage.
  void streamedChatMatchesThePlainAnswer() {
    for (const char* model : {"ragraph/oneshot", "ragraph/hyde", "ragraph/irg"}) {
      auto c = client();
      auto plain = c.Post("/v1/chat/completions", chatBody(model, kQuestion, false, 12), "application/json");
      QVERIFY(plain);
      QCOMPARE(plain->status, 200);
      const std::string answer =
          parse(plain->body).find("choices")->asArray().at(0).find("message")->find("content")->asString();
      // Clients such as Node's fetch ask for compression; a compressed event stream would reach
      // them only when the compressor flushes.
      auto r = c.Post("/v1/chat/completions", httplib::Headers{{"Accept-Encoding", "gzip, deflate, br"}},
                      chatBody(model, kQuestion, true, 12), "application/json");
      QVERIFY(r);
      QVERIFY2(r->status == 200, r->body.c_str());
      QVERIFY(r->get_header_value("Content-Type").find("text/event-stream") != std::string::npos);
      QCOMPARE(r->get_header_value("Content-Encoding"), std::string());
      const std::vector<std::string> data = sseData(r->body);
      QVERIFY(data.size() >= 4);
      QCOMPARE(data.back(), std::string("[DONE]"));
      std::string content;
      int contentChunks = 0;
      std::vector<std::string> started;
      const JsonValue* finalExt = nullptr;
      std::vector<JsonValue> chunks;
      for (size_t i = 0; i + 1 < data.size(); ++i) chunks.push_back(parse(data[i]));
      QCOMPARE(chunks.front().find("choices")->asArray().at(0).find("delta")->find("role")->asString(),
               std::string("assistant"));
      const JsonValue* usage = nullptr;
      for (const JsonValue& ch : chunks) {
        QCOMPARE(ch.find("object")->asString(), std::string("chat.completion.chunk"));
        if (const JsonValue* u = ch.find("usage")) usage = u;
        if (ch.find("choices")->size() == 0) continue;
        const JsonValue& choice = ch.find("choices")->asArray().at(0);
        if (const JsonValue* t = choice.find("delta")->find("content"); t && !t->asString().empty()) {
          content += t->asString();
          ++contentChunks;
        }
        if (const JsonValue* ev = ch.find("ragraph"); ev && ev->find("event") &&
                                                      ev->find("event")->asString() == "node_started")
          started.push_back(ev->find("node")->asString());
        if (choice.find("finish_reason")->isString()) finalExt = ch.find("ragraph");
      }
      QCOMPARE(content, answer);
      QVERIFY(finalExt != nullptr);
      QCOMPARE(finalExt->find("stages")->size(), started.size());
      QCOMPARE(started.front(), std::string(std::string(model) == "ragraph/hyde" ? "hypothesis" : "retrieve"));
      QVERIFY(usage != nullptr && *usage->find("completion_tokens")->asInt64() >= 1);
      qInfo("%s: %d content chunks, answer %zu bytes", model, contentChunks, answer.size());
    }
  }

  void badInputIsNamed() {
    auto c = client();
    struct Case {
      const char* path;
      std::string body;
      int status;
      const char* param;    // expected error.param ("" for null)
      const char* message;  // a part of error.message
    };
    const std::vector<Case> cases = {
        {"/v1/chat/completions", "{\"model\": ", 400, "", "not valid JSON"},
        {"/v1/chat/completions", "", 400, "", "empty"},
        {"/v1/chat/completions", "[1, 2]", 400, "", "JSON object"},
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}", 400, "model", "'model'"},
        {"/v1/chat/completions", "{\"model\": \"ragraph/oneshot\"}", 400, "messages", "'messages'"},
        {"/v1/chat/completions", "{\"model\": \"ragraph/oneshot\", \"messages\": [{\"role\": \"system\", \"content\": \"x\"}]}",
         400, "messages", "role 'user'"},
        {"/v1/chat/completions", "{\"model\": \"ragraph/oneshot\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 0}",
         400, "max_tokens", "max_tokens"},
        {"/v1/chat/completions", "{\"model\": \"ragraph/oneshot\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": 2}",
         400, "n", "'n'"},
        {"/v1/chat/completions", "{\"model\": \"ragraph/oneshot\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stream\": \"yes\"}",
         400, "stream", "'stream'"},
        {"/v1/chat/completions", "{\"model\": \"ragraph/oneshot\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
         400, "messages[0].content", "text parts"},
        {"/v1/completions", "{\"model\": \"ragraph/oneshot\", \"prompt\": [\"a\", \"b\"]}", 400, "prompt", "one prompt"},
        {"/v1/completions", "{\"model\": \"ragraph/oneshot\", \"prompt\": \"  \"}", 400, "prompt", "empty"},
        {"/v1/completions", "{\"model\": \"gpt-4\", \"prompt\": \"hi\"}", 404, "model", "ragraph/oneshot"},
    };
    for (const Case& k : cases) {
      auto r = c.Post(k.path, k.body, "application/json");
      QVERIFY(r);
      QVERIFY2(r->status == k.status, (k.body + " -> " + std::to_string(r->status) + " " + r->body).c_str());
      JsonValue doc = parse(r->body);
      const JsonValue* e = doc.find("error");
      QVERIFY2(e != nullptr, r->body.c_str());
      QVERIFY2(e->find("message")->asString().find(k.message) != std::string::npos, r->body.c_str());
      QCOMPARE(e->find("type")->asString(), std::string("invalid_request_error"));
      if (std::string(k.param).empty()) QVERIFY(e->find("param")->isNull());
      else QCOMPARE(e->find("param")->asString(), std::string(k.param));
    }
  }

  void oversizedBodiesAndFailingWorkflows() {
    auto c = client();
    auto r = c.Post("/v1/completions", std::string(2 << 20, ' '), "application/json");
    QVERIFY(r);
    QCOMPARE(r->status, 413);
    QVERIFY2(errorField(r->body, "message").find("larger than") != std::string::npos, r->body.c_str());
    // A question far past the model's context: what the engine says, as an OpenAI error.
    std::string huge;
    for (int i = 0; i < 3000; ++i) huge += "entity " + std::to_string(i) + " ";
    r = c.Post("/v1/chat/completions", chatBody("ragraph/oneshot", huge, false), "application/json");
    QVERIFY(r);
    QVERIFY2(r->status == 400, r->body.c_str());
    QVERIFY2(errorField(r->body, "message").find("context window") != std::string::npos, r->body.c_str());
    // Streamed, the failure comes after the 200: an error event (which OpenAI clients raise),
    // then [DONE].
    r = c.Post("/v1/chat/completions", chatBody("ragraph/oneshot", huge, true), "application/json");
    QVERIFY(r);
    QCOMPARE(r->status, 200);
    const std::vector<std::string> data = sseData(r->body);
    QVERIFY(data.size() >= 2);
    QCOMPARE(data.back(), std::string("[DONE]"));
    QVERIFY2(errorField(data[data.size() - 2], "message").find("context window") != std::string::npos, r->body.c_str());
  }

  // More clients than the in-flight limit (2): each request is answered 200 or refused with
  // 429, Retry-After and an OpenAI error; retried, every one is answered. The refusals are
  // what /metrics counts, and nothing stays in flight.
  void concurrencyBeyondTheLimitIsRefusedNotQueued() {
    constexpr int kClients = 10;
    std::atomic<int> ok{0}, refused{0}, bad{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i)
      threads.emplace_back([&, i] {
        httplib::Client c("127.0.0.1", m_server->port());
        c.set_read_timeout(120);
        const bool stream = i % 2 == 1;
        for (int attempt = 0; attempt < 400; ++attempt) {
          auto r = c.Post("/v1/chat/completions",
                          chatBody("ragraph/oneshot", "Question " + std::to_string(i) + " about entity 3?", stream, 16),
                          "application/json");
          if (!r) {
            ++bad;
            return;
          }
          if (r->status == 200) {
            ++ok;
            return;
          }
          if (r->status != 429 || r->get_header_value("Retry-After") != "1" || errorCode(r->body) != "server_busy") {
            ++bad;
            return;
          }
          ++refused;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));  // shorter than Retry-After: the test's patience
        }
        ++bad;
      });
    for (std::thread& t : threads) t.join();
    QCOMPARE(bad.load(), 0);
    QCOMPARE(ok.load(), kClients);
    m_refused += refused.load();
    qInfo("%d clients, in-flight limit 2: %d refusals (429) before all were answered", kClients, refused.load());

    auto c = client();
    auto r = c.Get("/metrics");
    QVERIFY(r);
    QCOMPARE(r->status, 200);
    QCOMPARE(metric(r->body, "ragraph_busy_refusals_total{code=\"429\"}"), double(m_refused));
    QCOMPARE(metric(r->body, "ragraph_http_inflight_requests"), 0.0);
    QCOMPARE(metric(r->body, "ragraph_http_inflight_limit"), 2.0);
  }

  // As many clients as the limit, each sending its next request the moment it has read the
  // last one (a new connection each time): a slot is free again before its client can read the
  // end of a response, so none is ever refused.
  void clientsWithinTheLimitAreNeverRefused() {
    std::atomic<int> ok{0}, other{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
      threads.emplace_back([&, i] {
        for (int k = 0; k < 10; ++k) {
          httplib::Client c("127.0.0.1", m_server->port());  // no keep-alive: a new connection per request
          c.set_read_timeout(120);
          auto r = c.Post("/v1/chat/completions", chatBody("ragraph/oneshot", kQuestion, (i + k) % 2 == 0, 4),
                          "application/json");
          (r && r->status == 200 ? ok : other)++;
        }
      });
    for (std::thread& t : threads) t.join();
    QCOMPARE(other.load(), 0);
    QCOMPARE(ok.load(), 20);
  }

  void metricsArePrometheusText() {
    auto c = client();
    auto r = c.Get("/metrics");
    // A client has its answer a moment before the engine counts the request finished: wait for
    // the engine to drain (bounded), then read the figures.
    for (int i = 0; i < 100 && r && metric(r->body, "ragraph_engine_live_requests") != 0.0; ++i) {
      QTest::qWait(20);
      r = c.Get("/metrics");
    }
    QVERIFY(r);
    QCOMPARE(r->status, 200);
    QVERIFY(r->get_header_value("Content-Type").find("text/plain; version=0.0.4") != std::string::npos);
    const std::string& m = r->body;
    QVERIFY(m.find("# TYPE ragraph_request_duration_seconds histogram") != std::string::npos);
    const double count = metric(m, "ragraph_request_duration_seconds_count");
    QVERIFY(count >= 10);  // every completion above that ran
    QCOMPARE(metric(m, "ragraph_request_duration_seconds_bucket{le=\"+Inf\"}"), count);
    QVERIFY(metric(m, "ragraph_request_duration_seconds_bucket{le=\"0.025\"}") <= count);
    QVERIFY(metric(m, "ragraph_http_requests_total{endpoint=\"/v1/chat/completions\",code=\"200\"}") >= 10);
    QVERIFY(metric(m, "ragraph_http_requests_total{endpoint=\"/v1/chat/completions\",code=\"400\"}") >= 10);
    QVERIFY(metric(m, "ragraph_http_requests_total{endpoint=\"/v1/completions\",code=\"404\"}") >= 1);
    QVERIFY(metric(m, "ragraph_kv_blocks_total") > 0);
    QCOMPARE(metric(m, "ragraph_engine_live_requests"), 0.0);
    QVERIFY(metric(m, "ragraph_engine_finished_requests_total") >= 10);
    QCOMPARE(metric(m, "ragraph_stream_content_mismatches_total"), 0.0);
    // Each worker thread's busy share, the embedding thread's included (the server serves hedra).
    for (const char* gauge : {"ragraph_generation_load", "ragraph_retrieval_load", "ragraph_embedding_load"}) {
      const double load = metric(m, gauge);
      QVERIFY2(load >= 0.0 && load <= 1.0, gauge);
    }
    // Every sample line is "name[{labels}] number".
    std::istringstream in(m);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      QVERIFY2(space != std::string::npos, line.c_str());
      char* end = nullptr;
      std::strtod(line.c_str() + space + 1, &end);
      QVERIFY2(*end == '\0', line.c_str());
    }
  }

  // A client that leaves mid-stream: its request is cancelled and its slot freed.
  void aClientLeavingFreesItsSlot() {
    httplib::Client c("127.0.0.1", m_server->port());
    std::atomic<int> chunks{0};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.body = chatBody("ragraph/irg", kQuestion, true, 64);
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };  // hang up
    auto r = c.send(req);
    QVERIFY(!r);  // cancelled by the receiver
    QVERIFY(chunks.load() >= 1);
    // The server notices at its next write or idle check; poll the gauge (bounded count).
    auto m = client();
    double inFlight = -1;
    for (int i = 0; i < 200 && inFlight != 0; ++i) {
      auto mr = m.Get("/metrics");
      QVERIFY(mr);
      inFlight = metric(mr->body, "ragraph_http_inflight_requests");
      if (inFlight != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    QCOMPARE(inFlight, 0.0);
  }

  // Last: stopping with streams in flight ends every response and returns (the HTTP threads
  // are joined only after the engine cancelled what they were streaming).
  void stopEndsStreamsInFlight() {
    std::vector<std::thread> clients;
    for (int i = 0; i < 2; ++i)
      clients.emplace_back([&] {
        httplib::Client c("127.0.0.1", m_server->port());
        c.set_read_timeout(120);
        // Whole, or cut short by the stop: what matters is that the call returns.
        (void)c.Post("/v1/chat/completions", chatBody("ragraph/irg", kQuestion, true, 512), "application/json");
      });
    // Wait (bounded) until both are admitted, then stop under them.
    auto c = client();
    for (int i = 0; i < 400; ++i) {
      auto h = c.Get("/health");
      if (h && parse(h->body).find("in_flight")->asInt64().value_or(0) == 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    m_server->stop();
    for (std::thread& t : clients) t.join();
    QVERIFY(!c.Get("/health"));  // nothing listens any more
  }
};

QTEST_GUILESS_MAIN(TestHttpServer)
#include "test_http_server.moc"  // (moc misreads raw string literals: this file has none)
