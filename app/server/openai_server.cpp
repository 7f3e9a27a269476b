#include "server/openai_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/json_writer.h"
#include "server/answer_stream.h"
#include "server/bounded_task_queue.h"
#include "server/openai_protocol.h"
#include "server/request_events.h"
#include "server/server_metrics.h"

namespace rag::server {

namespace {

using httplib::DataSink;

// Debian's cpp-httplib is a compiled library whose listen() backlog is 5 (CPPHTTPLIB_LISTEN_BACKLOG
// is fixed when the library is built): a burst of new connections beyond 5 loses SYNs, and
// their clients retry a second later. Calling listen() again on the bound socket sets a deeper
// backlog (Linux; capped by net.core.somaxconn).
class HttpServer : public httplib::Server {
public:
  bool widenBacklog(int backlog) { return ::listen(svr_sock_.load(), backlog) == 0; }
};
using HttpRequest = httplib::Request;
using HttpResponse = httplib::Response;

// One admitted completion; releases its slot when the last holder drops it.
struct Ticket {
  std::atomic<int64_t>* inFlight;
  ~Ticket() { inFlight->fetch_sub(1); }
};

int64_t unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string sse(std::string_view json) { return "data: " + std::string(json) + "\n\n"; }

// The endpoint label of a request in the metrics (unknown paths share one label).
std::string endpointLabel(const HttpRequest& req) {
  static const std::set<std::string> known = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health",
                                              "/metrics"};
  if (known.count(req.path)) return req.path;
  if (req.path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

}  // namespace

Result<std::vector<ServedWorkflow>> builtinServedWorkflows() {
  std::vector<ServedWorkflow> out;
  for (Workflow w : kAllWorkflows) {
    RAG_ASSIGN_OR_RETURN(WorkflowGraph g, builtinWorkflow(w));
    out.push_back({"ragraph/" + std::string(workflowName(w)), std::move(g), "built-in"});
  }
  return out;
}

Result<std::pair<std::string, int>> parseListenAddress(std::string_view address) {
  const std::string form = "give the address to listen on as HOST:PORT, e.g. 127.0.0.1:8000 or [::1]:8000, not '" +
                           std::string(address) + "'";
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return Status::invalidArgument(form);
  std::string host(address.substr(0, colon));
  const std::string_view portText = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos) return Status::invalidArgument(form);
  if (host.empty()) host = "127.0.0.1";
  int port = -1;
  auto [p, ec] = std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (portText.empty() || ec != std::errc() || p != portText.data() + portText.size() || port < 0 || port > 65535)
    return Status::invalidArgument(form + " (the port is a number from 0 to 65535; 0 picks a free one)");
  return std::pair{host, port};
}

struct OpenAiServer::Impl {
  ServerParams params;
  std::vector<ServedWorkflow> models;
  int64_t startedAt = unixSeconds();
  // The hub outlives the engine, whose scheduler thread calls it.
  RequestEventHub hub;
  std::unique_ptr<Engine> engine;
  ServerMetrics metrics;
  HttpServer http;
  std::thread listener;
  int boundPort = -1;
  std::atomic<int64_t> inFlight{0};
  std::atomic<int64_t> queuedConnections{0};
  std::atomic<uint64_t> nextReply{1};
  std::atomic<bool> stopping{false};
  std::mutex stopMutex;
  bool stopped = false;

  void routes();
  const ServedWorkflow* findModel(const std::string& id) const {
    for (const ServedWorkflow& m : models)
      if (m.model == id) return &m;
    return nullptr;
  }
  std::string modelList() const {
    std::string s;
    for (const ServedWorkflow& m : models) s += (s.empty() ? "" : ", ") + m.model;
    return s;
  }
  std::shared_ptr<Ticket> admit() {
    if (inFlight.fetch_add(1) >= params.maxInFlight) {
      inFlight.fetch_sub(1);
      return nullptr;
    }
    return std::shared_ptr<Ticket>(new Ticket{&inFlight});  // no temporary: its destructor frees the slot
  }
  void sendError(HttpResponse& res, const ApiError& e) {
    res.status = e.status;
    if (e.status == 429 || e.status == 503) {
      res.set_header("Retry-After", std::to_string(params.retryAfterSeconds));
      metrics.countRefusal(e.status);
    }
    res.set_content(errorJson(e), "application/json");
  }
  void refuse(HttpResponse& res, int status, std::string message, std::string code) {
    ApiError e;
    e.status = status;
    e.type = status == 429 ? "rate_limit_error" : "server_error";
    e.message = std::move(message);
    e.code = std::move(code);
    sendError(res, e);
  }
  void complete(const HttpRequest& req, HttpResponse& res, Endpoint endpoint);
  void modelJson(JsonWriter& w, const ServedWorkflow& m) const {
    w.beginObject().key("id").value(m.model).key("object").value("model").key("created").value(startedAt);
    w.key("owned_by").value("ragraph");
    w.key("ragraph").beginObject().key("workflow").value(m.graph.name()).key("description").value(m.graph.description());
    w.key("source").value(m.source).key("nodes").value(static_cast<int64_t>(m.graph.nodes().size())).endObject();
    w.endObject();
  }
};

// One streamed completion, shared by the content provider and its releaser.
struct StreamJob {
  ServerMetrics* metrics = nullptr;
  Engine* engine = nullptr;
  RequestEventHub* hub = nullptr;
  CompletionRequest req;
  ReplyInfo reply;
  std::shared_ptr<const WorkflowGraph> graph;
  RequestHandle handle;
  std::shared_ptr<EventQueue> events;
  std::unique_ptr<AnswerStream> answer;
  std::shared_ptr<Ticket> ticket;
  uint64_t arrivalNs = 0;
  bool roleSent = false;
  bool ended = false;  // Finished or Failed was sent
};

namespace {

// A request the engine failed: 400 when the input was at fault (a prompt past the model's
// context, say), else 500.
ApiError workflowFailure(const Status& st) {
  ApiError e;
  e.message = "the workflow failed: " + st.message();
  if (st.code() == StatusCode::InvalidArgument) return e;  // 400 invalid_request_error
  e.status = 500;
  e.type = "server_error";
  return e;
}

// The next piece of a streamed response: what one event adds. Sets job.ended at the end.
std::string streamStep(StreamJob& job, const RequestEvent& e) {
  using K = RequestEvent::Kind;
  std::string out;
  auto content = [&](const std::string& text) {
    if (text.empty()) return;
    out += sse(contentChunk(job.req, job.reply, text, !job.roleSent && job.req.endpoint == Endpoint::ChatCompletions));
    job.roleSent = true;
  };
  switch (e.kind) {
    case K::NodeStarted:
      job.answer->onEvent(e);
      out += sse(progressChunk(job.req, job.reply, "node_started", e.node));
      break;
    case K::NodeFinished:
      job.answer->onEvent(e);
      out += sse(progressChunk(job.req, job.reply, "node_finished", e.node));
      break;
    case K::Tokens:
    case K::Speculation:
    case K::Rollback:
      content(job.answer->onEvent(e));
      break;
    case K::Finished: {
      content(job.answer->onEvent(e));
      if (!job.answer->consistent()) {
        job.metrics->countStreamMismatch();
        std::fprintf(stderr, "ragraph serve: request %u: streamed tokens were not a prefix of the answer\n",
                     job.handle.id());
      }
      Result<RequestResult> r = job.handle.wait();  // set right after the Finished event
      if (r) {
        out += sse(finalChunk(job.req, job.reply, *job.graph, *r));
        if (job.req.includeUsage) out += sse(usageChunk(job.req, job.reply, *r));
      }
      out += "data: [DONE]\n\n";
      job.ended = true;
      job.metrics->observeLatency(static_cast<double>(nowNs() - job.arrivalNs) * 1e-9);
      break;
    }
    case K::Failed: {
      Result<RequestResult> r = job.handle.wait();  // its status is set right after the event
      out += sse(errorJson(workflowFailure(r.isOk() ? Status::internal(e.text) : r.status()))) + "data: [DONE]\n\n";
      job.ended = true;
      break;
    }
    case K::Submitted:
      break;
  }
  return out;
}

}  // namespace

void OpenAiServer::Impl::complete(const HttpRequest& hreq, HttpResponse& res, Endpoint endpoint) {
  const uint64_t arrival = nowNs();
  CompletionRequest req;
  if (std::optional<ApiError> e = parseCompletionRequest(hreq.body, endpoint, req)) return sendError(res, *e);
  const ServedWorkflow* served = findModel(req.model);
  if (!served) {
    ApiError e = invalidRequest("the model '" + req.model + "' does not exist; this server serves " + modelList(),
                                "model");
    e.status = 404;
    e.code = "model_not_found";
    return sendError(res, e);
  }
  if (stopping.load()) return refuse(res, 503, "the server is shutting down", "server_stopping");
  std::shared_ptr<Ticket> ticket = admit();
  if (!ticket)
    return refuse(res, 429,
                  std::to_string(params.maxInFlight) + " requests are in flight, the server's limit; retry after " +
                      std::to_string(params.retryAfterSeconds) + " s",
                  "server_busy");
  auto graph = std::make_shared<const WorkflowGraph>(applySamplingOptions(served->graph, req));
  if (Status v = graph->validate(); !v) return sendError(res, invalidRequest(v.message()));
  RequestEventHub::Submitted sub = hub.submit(*engine, req.question, *graph, req.stream);
  if (!sub.handle) {
    const Status& st = sub.handle.status();
    if (st.code() == StatusCode::Busy) return refuse(res, 429, st.message(), "engine_busy");
    if (st.code() == StatusCode::Cancelled || st.code() == StatusCode::Unavailable)
      return refuse(res, 503, st.message(), "engine_unavailable");
    if (st.code() == StatusCode::InvalidArgument) return sendError(res, invalidRequest(st.message()));
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = st.message();
    return sendError(res, e);
  }
  const uint64_t n = nextReply.fetch_add(1);
  ReplyInfo reply{(endpoint == Endpoint::ChatCompletions ? "chatcmpl-" : "cmpl-") + std::to_string(n), unixSeconds()};

  if (!req.stream) {
    Result<RequestResult> r = sub.handle->wait();
    if (!r) {
      if (r.status().code() == StatusCode::Cancelled) return refuse(res, 503, r.status().message(), "server_stopping");
      return sendError(res, workflowFailure(r.status()));
    }
    res.set_content(completionJson(req, reply, *graph, *r), "application/json");
    metrics.observeLatency(static_cast<double>(nowNs() - arrival) * 1e-9);
    return;
  }

  auto job = std::make_shared<StreamJob>();
  job->metrics = &metrics;
  job->engine = engine.get();
  job->hub = &hub;
  job->req = std::move(req);
  job->reply = std::move(reply);
  job->graph = graph;
  job->handle = *sub.handle;
  job->events = sub.events;
  job->answer = std::make_unique<AnswerStream>(*graph);
  job->ticket = std::move(ticket);
  job->arrivalNs = arrival;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job](size_t, DataSink& sink) -> bool {
        std::string out;
        if (!job->roleSent && job->req.endpoint == Endpoint::ChatCompletions) {
          out = sse(contentChunk(job->req, job->reply, "", true));  // the role first, as OpenAI does
          job->roleSent = true;
        }
        if (out.empty()) {
          std::optional<RequestEvent> e = job->events->next(std::chrono::milliseconds(200));
          if (!e && job->handle.done()) {
            // Ended without a last event (a request the scheduler never took before it shut
            // down gets only its result): end the stream from the result.
            e = job->events->next(std::chrono::milliseconds(0));
            if (!e) {
              Result<RequestResult> r = job->handle.wait();
              e = r ? RequestEvent{RequestEvent::Kind::Finished, job->handle.id(), {}, r->answer}
                    : RequestEvent{RequestEvent::Kind::Failed, job->handle.id(), {}, r.status().message()};
            }
          }
          if (!e) return sink.is_writable();  // nothing yet; false ends a response whose client left
          out = streamStep(*job, *e);
          // The request is over in the engine: free its slot before the client can read the last
          // bytes and send its next request (else that one could find the slot still taken).
          if (job->ended) job->ticket.reset();
        }
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (job->ended) sink.done();
        return true;
      },
      [job](bool) {
        // Runs when the response ends, written or not: a request whose client left is cancelled.
        if (!job->ended) (void)job->engine->cancel(job->handle.id());
        job->hub->forget(job->handle.id());
        job->ticket.reset();
      });
}

void OpenAiServer::Impl::routes() {
  http.Post("/v1/chat/completions",
            [this](const HttpRequest& q, HttpResponse& r) { complete(q, r, Endpoint::ChatCompletions); });
  http.Post("/v1/completions", [this](const HttpRequest& q, HttpResponse& r) { complete(q, r, Endpoint::Completions); });
  http.Get("/v1/models", [this](const HttpRequest&, HttpResponse& res) {
    std::ostringstream out;
    JsonWriter w(out);
    w.beginObject().key("object").value("list").key("data").beginArray();
    for (const ServedWorkflow& m : models) modelJson(w, m);
    w.endArray().endObject();
    res.set_content(out.str(), "application/json");
  });
  http.Get(R"(/v1/models/(.+))", [this](const HttpRequest& q, HttpResponse& res) {
    const std::string id = q.matches[1];
    const ServedWorkflow* m = findModel(id);
    if (!m) {
      ApiError e = invalidRequest("the model '" + id + "' does not exist; this server serves " + modelList(), "model");
      e.status = 404;
      e.code = "model_not_found";
      return sendError(res, e);
    }
    std::ostringstream out;
    JsonWriter w(out);
    modelJson(w, *m);
    res.set_content(out.str(), "application/json");
  });
  http.Get("/health", [this](const HttpRequest&, HttpResponse& res) {
    const bool ok = !stopping.load() && engine->serving();
    std::ostringstream out;
    JsonWriter w(out);
    w.beginObject().key("status").value(ok ? "ok" : "unavailable");
    w.key("models").value(static_cast<int64_t>(models.size()));
    w.key("in_flight").value(inFlight.load()).key("in_flight_limit").value(static_cast<int64_t>(params.maxInFlight));
    w.endObject();
    res.status = ok ? 200 : 503;
    res.set_content(out.str(), "application/json");
  });
  http.Get("/metrics", [this](const HttpRequest&, HttpResponse& res) {
    res.set_content(metrics.render(engine->servingStats(), inFlight.load(), params.maxInFlight, queuedConnections.load()),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const HttpRequest& q, HttpResponse& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // our own error object
    ApiError e;
    e.status = res.status;
    if (res.status == 404) {
      e.message = "no endpoint " + q.method + " " + q.path +
                  "; this server answers POST /v1/chat/completions, POST /v1/completions, GET /v1/models, "
                  "GET /health and GET /metrics";
      e.code = "unknown_endpoint";
    } else if (res.status == 413) {
      e.message = "the request body is larger than " + std::to_string(params.maxBodyBytes) + " bytes";
    } else {
      e.message = "HTTP " + std::to_string(res.status) + " for " + q.method + " " + q.path;
      if (res.status >= 500) e.type = "server_error";
    }
    res.set_content(errorJson(e), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([this](const HttpRequest&, HttpResponse& res, std::exception_ptr ep) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& x) {
      e.message = std::string("internal error: ") + x.what();
    } catch (...) {
    }
    sendError(res, e);
  });
  http.set_logger([this](const HttpRequest& q, const HttpResponse& res) { metrics.countRequest(endpointLabel(q), res.status); });
}

OpenAiServer::OpenAiServer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

OpenAiServer::~OpenAiServer() { stop(); }

Result<std::unique_ptr<OpenAiServer>> OpenAiServer::create(EngineParams engineParams, std::vector<ServedWorkflow> models,
                                                           ServerParams params) {
  if (models.empty()) return Status::invalidArgument("no workflows to serve");
  if (params.maxInFlight < 1) return Status::invalidArgument("the in-flight limit must be at least 1");
  if (params.spareThreads < 1 || params.maxQueuedConnections < 1)
    return Status::invalidArgument("the server needs at least one spare thread and one queued connection");
  std::set<std::string> ids;
  for (const ServedWorkflow& m : models) {
    if (!ids.insert(m.model).second)
      return Status::invalidArgument("two workflows are both named '" + m.model + "' (" + m.source +
                                     "); rename one file");
    if (Status v = m.graph.validate(); !v) return v.withContext(m.model + " (" + m.source + ")");
  }
  auto impl = std::make_unique<Impl>();
  impl->params = params;
  impl->models = std::move(models);
  engineParams.onEvent = impl->hub.callback();
  // The server's admission is the bound clients see. The engine publishes a result before its
  // scheduler stops counting the request as live, so a client answered at once can come back
  // while its last request still counts: the engine's own limit leaves room for that.
  engineParams.serving.maxLiveRequests = 2 * params.maxInFlight;
  RAG_ASSIGN_OR_RETURN(impl->engine, Engine::create(engineParams));
  if (!impl->engine->serving())
    return Status::unavailable("the engine is not serving: give it a model directory (serving.modelDir)");

  Impl* self = impl.get();
  const size_t threads = static_cast<size_t>(params.maxInFlight) + static_cast<size_t>(params.spareThreads);
  impl->http.new_task_queue = [self, threads] {
    return new BoundedThreadPool(threads, static_cast<size_t>(self->params.maxQueuedConnections), &self->queuedConnections);
  };
  impl->http.set_payload_max_length(params.maxBodyBytes);
  // Headers and body go out in separate writes: with Nagle's algorithm the body waits for the
  // client's delayed ACK of the headers (about 40 ms on Linux) on a kept-alive connection.
  impl->http.set_tcp_nodelay(true);
  impl->http.set_keep_alive_timeout(params.keepAliveSeconds);
  impl->http.set_keep_alive_max_count(params.keepAliveMaxRequests);
  impl->http.set_read_timeout(30);
  impl->http.set_write_timeout(30);
  impl->routes();
  if (params.port == 0) {
    impl->boundPort = impl->http.bind_to_any_port(params.host);
  } else if (impl->http.bind_to_port(params.host, params.port)) {
    impl->boundPort = params.port;
  }
  if (impl->boundPort <= 0)
    return Status::ioError("cannot listen on " + params.host + ":" + std::to_string(params.port) +
                           " (in use, not an address of this machine, or a privileged port); pick another --listen");
  if (!impl->http.widenBacklog(params.listenBacklog))
    std::fprintf(stderr, "ragraph serve: warning: the listen backlog stays at cpp-httplib's 5 connections\n");
  return std::unique_ptr<OpenAiServer>(new OpenAiServer(std::move(impl)));
}

int OpenAiServer::port() const { return m_impl->boundPort; }

std::string OpenAiServer::url() const {
  const std::string& h = m_impl->params.host;
  return "http://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::to_string(port());
}

Engine& OpenAiServer::engine() { return *m_impl->engine; }

Status OpenAiServer::start() {
  std::lock_guard lock(m_impl->stopMutex);
  if (m_impl->stopped || m_impl->listener.joinable()) return Status::invalidArgument("the server was already started");
  m_impl->listener = std::thread([self = m_impl.get()] { self->http.listen_after_bind(); });
  return Status::ok();
}

void OpenAiServer::stop() {
  std::lock_guard lock(m_impl->stopMutex);
  if (m_impl->stopped) return;
  m_impl->stopped = true;
  m_impl->stopping.store(true);
  // Live requests end first (Cancelled), so the threads streaming them finish and the HTTP
  // thread pool can be joined.
  m_impl->engine->shutdown();
  m_impl->http.stop();
  if (m_impl->listener.joinable()) m_impl->listener.join();
}

}  // namespace rag::server
