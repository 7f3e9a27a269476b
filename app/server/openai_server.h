// `ragraph serve`: an OpenAI-compatible HTTP server (cpp-httplib) on the Engine the workbench
// embeds. Every workflow it serves is a model: the built-ins are "ragraph/oneshot", ..., and
// workflow files loaded at start are named by their file stem.
//
//   POST /v1/chat/completions, POST /v1/completions   (stream: true -> server-sent events)
//   GET  /v1/models, GET /v1/models/{id}, GET /health, GET /metrics (Prometheus text)
//
//   std::vector<ServedWorkflow> models = *builtinServedWorkflows();
//   EngineParams ep = ...;                            // corpus, serving.modelDir, ...
//   auto server = OpenAiServer::create(ep, models, {.host = "127.0.0.1", .port = 8000});
//   if (!server) return fail(server.status());       // names the address or the missing model
//   RAG_RETURN_IF_ERROR((*server)->start());         // serves on its own threads
//   ...
//   (*server)->stop();                                // cancels live requests, joins threads
//
// Overload: at most maxInFlight completions are admitted at once; the next one is answered at
// once with 429 and Retry-After (503 while the server stops). HTTP worker threads are
// maxInFlight + spareThreads, so refusals, /health and /metrics are answered while every
// admitted request runs; accepted connections wait in a queue of at most maxQueuedConnections,
// beyond which the accepting thread pauses and the kernel's listen backlog holds the rest. No
// queue in the server is unbounded. A kept-alive connection holds its worker thread while it
// waits for its next request (keepAliveSeconds at most): more idle kept-alive clients than
// spare threads delay new connections (they wait in the queue), they are not refused.
//
// Streaming: see answer_stream.h for which tokens are sent as they are generated. Progress
// chunks with an empty delta carry workflow events in "ragraph": {"event", "node"}; the last
// chunk carries finish_reason and the "ragraph" extension (passages, stage timings).
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rag/engine.h"
#include "rag/workflow.h"

namespace rag::server {

struct ServedWorkflow {
  std::string model;   // the id clients send as "model"
  WorkflowGraph graph;
  std::string source;  // "built-in" or the file it was loaded from
};

// The built-in workflows as models "ragraph/<name>".
Result<std::vector<ServedWorkflow>> builtinServedWorkflows();

struct ServerParams {
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: any free port (port() says which)
  int32_t maxInFlight = 32;             // completions admitted at once; more get 429
  int32_t spareThreads = 8;             // HTTP threads beyond maxInFlight
  int32_t maxQueuedConnections = 128;   // accepted connections waiting for a thread
  int32_t listenBacklog = 512;          // connections the kernel holds before they are accepted
  int32_t retryAfterSeconds = 1;
  size_t maxBodyBytes = 1 << 20;
  time_t keepAliveSeconds = 5;           // an idle kept-alive connection is closed after this
  size_t keepAliveMaxRequests = 1000;    // requests on one connection before it is closed
};

// "HOST:PORT", "[IPv6]:PORT" or ":PORT" (127.0.0.1); InvalidArgument naming the form otherwise.
Result<std::pair<std::string, int>> parseListenAddress(std::string_view address);

class OpenAiServer {
public:
  // Creates the engine (its onEvent is the server's; serving.maxLiveRequests becomes
  // 2 x maxInFlight, see the .cpp) and binds the address. InvalidArgument for duplicate or invalid workflows,
  // IoError when the address cannot be bound, the engine's error when it cannot serve.
  static Result<std::unique_ptr<OpenAiServer>> create(EngineParams engine, std::vector<ServedWorkflow> models,
                                                      ServerParams params);
  ~OpenAiServer();  // stop()
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  int port() const;
  std::string url() const;  // "http://127.0.0.1:8000"
  Engine& engine();

  // Serves on background threads until stop().
  Status start();
  // Refuses new completions (503), cancels the live ones, stops the HTTP threads. Idempotent.
  void stop();

private:
  struct Impl;
  explicit OpenAiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag::server
