// `ragraph serve --listen HOST:PORT`: the OpenAI-compatible HTTP server (app/server/) on one
// Engine. Every built-in workflow is a model ("ragraph/oneshot", ...); --workflows adds workflow
// files, each a model named by its file stem. Runs until SIGINT or SIGTERM, then cancels live
// requests and exits 0.
//
//   ragraph serve --listen 127.0.0.1:8000
//   curl -s localhost:8000/v1/chat/completions -H 'Content-Type: application/json' -d '{"model": "ragraph/oneshot", "messages": [{"role": "user", "content": "What is a dog a kind of?"}]}'
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "commands.h"
#include "core/fs.h"
#include "serve_run.h"
#include "server/openai_server.h"

namespace rag::cli {

int cmdServeHttp(Args& args) {
  const auto listen = args.get("listen");
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const std::string files = args.getOr("workflows", "");
  auto maxInFlight = args.getInt("max-inflight", 32);
  auto retryAfter = args.getInt("retry-after", 1);
  auto nprobe = args.getInt("nprobe", 128);
  auto serving = readServingParams(args, "hedra");
  if (!serving) return fail(serving.status());
  for (auto* r : {&maxInFlight, &retryAfter, &nprobe})
    if (!*r) return fail(r->status());
  if (Status st = args.finish(); !st) return fail(st);
  if (!args.positionals().empty())
    return fail(Status::invalidArgument("unexpected argument '" + args.positionals().front() +
                                        "'; workflow files go in --workflows FILE,FILE"));
  if (!listen) return fail(Status::invalidArgument("give the address to serve on: --listen 127.0.0.1:8000"));
  auto address = server::parseListenAddress(*listen);
  if (!address) return fail(address.status());
  if (*maxInFlight < 1 || *maxInFlight > 4096) return fail(Status::invalidArgument("--max-inflight must be from 1 to 4096"));
  if (*retryAfter < 1) return fail(Status::invalidArgument("--retry-after must be at least 1 (seconds)"));
  if (*nprobe < 1) return fail(Status::invalidArgument("--nprobe must be at least 1"));

  auto models = server::builtinServedWorkflows();
  if (!models) return fail(models.status());
  std::stringstream list(files);
  for (std::string file; std::getline(list, file, ',');) {
    if (file.empty()) continue;
    Result<WorkflowGraph> g = WorkflowGraph::load(file);
    if (!g) return fail(g.status().withContext("--workflows " + file));
    if (Status v = g->validate(); !v) return fail(v.withContext("--workflows " + file));
    models->push_back({std::filesystem::path(file).stem().string(), std::move(*g), file});
  }

  // SIGINT and SIGTERM are taken by sigwait() below; blocked before any thread starts, so every
  // thread inherits the mask and none is interrupted.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  serving->nprobe = *nprobe;
  std::vector<const WorkflowGraph*> served;
  for (const server::ServedWorkflow& m : *models) served.push_back(&m.graph);
  if (Status s = prepareLexicalIndex(corpusPath, served); !s) return fail(s);
  EngineParams ep;
  ep.corpus = corpusPath;
  ep.workerThreads = 1;
  ep.traceCapacity = 2;  // nobody drains the trace here
  ep.serving = *serving;
  server::ServerParams sp;
  sp.host = address->first;
  sp.port = address->second;
  sp.maxInFlight = static_cast<int32_t>(*maxInFlight);
  sp.retryAfterSeconds = static_cast<int32_t>(*retryAfter);
  std::fprintf(stderr, "loading the model, the embedder and the passage index...\n");
  auto srv = server::OpenAiServer::create(ep, std::move(*models), sp);
  if (!srv) return fail(srv.status());
  if (Status st = (*srv)->start(); !st) return fail(st);
  // One line on stdout when ready (scripts wait for it); the port is the bound one (--listen :0).
  std::printf("ragraph serve: listening on %s\n", (*srv)->url().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stopSignals, &sig);
  std::fprintf(stderr, "ragraph serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*srv)->stop();
  return 0;
}

}  // namespace rag::cli
