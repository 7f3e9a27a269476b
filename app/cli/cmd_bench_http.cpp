// `ragraph bench http`: what the HTTP front end costs. The same loop runs straight through
// Engine::submit and through `ragraph serve`'s server (in-process, on loopback, one kept-alive
// connection per client), alternately for `--rounds` rounds after an unreported warm-up, each
// run on a fresh engine over one set of loaded models: `--concurrency` clients, each sending its
// next question as soon as its last one is answered (a closed loop) or, with `--rps R`, when
// the question's Poisson arrival comes (an open loop; latency counts from the arrival), over
// `--requests` QA questions of a split. It prints JSON: per run the throughput, latency
// percentiles and the share of requests answered within `--slo`, and the HTTP path's figures
// against the direct one's.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "corpus/qa_prompt.h"
#include "rag/arrivals.h"
#include "serve_run.h"
#include "server/openai_protocol.h"
#include "server/openai_server.h"

namespace rag::cli {

namespace {

struct LoopFigures {
  std::string mode;
  int64_t completed = 0, refused = 0, failed = 0;
  double wallSeconds = 0;
  std::vector<double> latencies;
};

// `clients` threads, each running `one(question)` for the next unclaimed question until all are
// taken; one() returns 0 answered, 1 refused, 2 failed. With `arrivals` (seconds from the start,
// one per question) a thread waits for its question's arrival and the latency counts from it
// (an open loop whose requests wait for a free client thread); else a closed loop.
template <class One>
LoopFigures runLoop(const std::string& mode, const std::vector<std::string>& questions, int64_t clients,
                    const std::vector<double>& arrivals, One makeOne) {
  LoopFigures f;
  f.mode = mode;
  std::atomic<size_t> next{0};
  std::mutex mutex;
  const uint64_t start = nowNs();
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      auto one = makeOne();
      for (size_t i; (i = next.fetch_add(1)) < questions.size();) {
        uint64_t t0 = nowNs();
        if (!arrivals.empty()) {
          t0 = start + static_cast<uint64_t>(arrivals[i] * 1e9);
          const uint64_t now = nowNs();
          if (t0 > now) std::this_thread::sleep_for(std::chrono::nanoseconds(t0 - now));
        }
        const int outcome = one(questions[i]);
        const double latency = static_cast<double>(nowNs() - t0) * 1e-9;
        std::lock_guard lock(mutex);
        if (outcome == 0) {
          ++f.completed;
          f.latencies.push_back(latency);
        } else if (outcome == 1) {
          ++f.refused;
        } else {
          ++f.failed;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  f.wallSeconds = static_cast<double>(nowNs() - start) * 1e-9;
  return f;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

int cmdBenchHttp(Args& args) {
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const std::string workflowName = args.getOr("workflow", "oneshot");
  auto concurrency = args.getInt("concurrency", 4);
  auto requests = args.getInt("requests", 64);
  auto rounds = args.getInt("rounds", 2);
  auto maxTokens = args.getInt("max-tokens", 0);
  auto nprobe = args.getInt("nprobe", 128);
  auto rps = args.getDouble("rps", 0.0);
  auto slo = args.getDouble("slo", 1.0);
  const bool stream = args.flag("stream");
  const std::string split = args.getOr("split", "test");
  const std::string jsonPath = args.getOr("json", "");
  auto serving = readServingParams(args, "hedra");
  if (!serving) return fail(serving.status());
  for (auto* r : {&concurrency, &requests, &rounds, &maxTokens, &nprobe})
    if (!*r) return fail(r->status());
  for (auto* r : {&rps, &slo})
    if (!*r) return fail(r->status());
  if (Status st = args.finish(); !st) return fail(st);
  if (*concurrency < 1 || *concurrency > 1024) return fail(Status::invalidArgument("--concurrency must be from 1 to 1024"));
  if (*requests < 1) return fail(Status::invalidArgument("--requests must be at least 1"));
  if (*rounds < 1) return fail(Status::invalidArgument("--rounds must be at least 1"));
  if (*maxTokens < 0 || *maxTokens > server::kMaxTokensLimit)
    return fail(Status::invalidArgument("--max-tokens must be from 0 (the workflow's own) to " +
                                        std::to_string(server::kMaxTokensLimit)));
  if (*nprobe < 1) return fail(Status::invalidArgument("--nprobe must be at least 1"));
  if (!(*rps >= 0)) return fail(Status::invalidArgument("--rps must be 0 (a closed loop) or a positive rate"));
  if (!(*slo > 0)) return fail(Status::invalidArgument("--slo must be a positive number of seconds"));
  auto w = workflowFromName(workflowName);
  if (!w) return fail(Status::invalidArgument("--workflow takes a built-in: " + builtinWorkflowNames()));
  server::CompletionRequest sampling;
  if (*maxTokens > 0) sampling.maxTokens = *maxTokens;
  const WorkflowGraph graph = server::applySamplingOptions(benchBuiltin(*w), sampling);  // the same graph both ways

  auto reader = corpus::QaPromptReader::open(corpusPath);
  if (!reader) return fail(reader.status());
  auto ids = reader->splitIds(split);
  if (!ids) return fail(ids.status());
  if (ids->empty()) return fail(Status::notFound("the " + split + " split has no questions; rebuild with `ragraph corpus build`"));
  std::vector<std::string> questions;
  for (int64_t id : spreadEvenly(*ids, *requests)) {
    auto item = reader->item(id);
    if (!item) return fail(item.status());
    questions.push_back(item->question);
  }
  while (static_cast<int64_t>(questions.size()) < *requests) questions.push_back(questions[questions.size() % ids->size()]);

  const std::vector<double> arrivals = *rps > 0 ? poissonArrivals(questions.size(), *rps, 1) : std::vector<double>{};
  serving->nprobe = *nprobe;
  // Room for a request answered but not yet erased by the scheduler (as the server leaves).
  serving->maxLiveRequests = static_cast<int32_t>(2 * *concurrency);
  std::fprintf(stderr, "loading the model, the embedder and the passage index...\n");
  auto assets = loadServingAssets(*serving, corpusPath);
  if (!assets) return fail(assets.status());
  EngineParams ep;
  ep.corpus = corpusPath;
  ep.workerThreads = 1;
  ep.traceCapacity = 2;
  ep.serving = *serving;
  ep.assets = *assets;
  const std::string model = "ragraph/" + workflowName;

  {
    // Warm-up, not reported: the first run of a process is slower (first touches of the model
    // and index pages, allocator growth), which would count against whichever path runs first.
    auto engine = Engine::create(ep);
    if (!engine) return fail(engine.status());
    Engine* e = engine->get();
    const std::vector<std::string> warm(questions.begin(),
                                        questions.begin() + std::min<int64_t>(*requests, 4 * *concurrency));
    runLoop("warm-up", warm, *concurrency, {}, [&] {
      return [&, e](const std::string& q) {
        auto h = e->submit(q, graph);
        return h && h->wait().isOk() ? 0 : 2;
      };
    });
  }
  std::vector<LoopFigures> runs;
  for (int64_t round = 0; round < *rounds; ++round) {
    {
      auto engine = Engine::create(ep);
      if (!engine) return fail(engine.status());
      Engine* e = engine->get();
      runs.push_back(runLoop("direct", questions, *concurrency, arrivals, [&] {
        return [&, e](const std::string& q) {
          auto h = e->submit(q, graph);
          if (!h) return h.status().code() == StatusCode::Busy ? 1 : 2;
          return h->wait().isOk() ? 0 : 2;
        };
      }));
    }
    {
      auto served = server::builtinServedWorkflows();
      if (!served) return fail(served.status());
      for (server::ServedWorkflow& s : *served)
        if (s.model == model) s.graph = graph;
      server::ServerParams sp;
      sp.port = 0;
      sp.maxInFlight = static_cast<int32_t>(*concurrency);
      auto srv = server::OpenAiServer::create(ep, std::move(*served), sp);
      if (!srv) return fail(srv.status());
      if (Status st = (*srv)->start(); !st) return fail(st);
      const int port = (*srv)->port();
      std::atomic_flag firstFailure, firstRefusal;
      runs.push_back(runLoop(stream ? "http-stream" : "http", questions, *concurrency, arrivals, [&] {
        auto client = std::make_shared<httplib::Client>("127.0.0.1", port);
        client->set_keep_alive(true);
        client->set_tcp_nodelay(true);
        client->set_read_timeout(600);
        return [&, client](const std::string& q) {
          std::ostringstream body;
          JsonWriter jw(body);
          jw.beginObject().key("model").value(model).key("stream").value(stream).key("messages").beginArray();
          jw.beginObject().key("role").value("user").key("content").value(q).endObject();
          jw.endArray().endObject();
          auto r = client->Post("/v1/chat/completions", body.str(), "application/json");
          auto failed = [&](const std::string& why) {
            if (!firstFailure.test_and_set()) std::fprintf(stderr, "first failed request: %s\n", why.c_str());
            return 2;
          };
          if (!r) return failed("no response (" + httplib::to_string(r.error()) + ")");
          if (r->status == 429) {
            if (!firstRefusal.test_and_set()) std::fprintf(stderr, "first refusal: %s\n", r->body.c_str());
            return 1;
          }
          if (r->status != 200) return failed("HTTP " + std::to_string(r->status) + ": " + r->body);
          if (stream && r->body.find("data: [DONE]") == std::string::npos) return failed("no [DONE]: " + r->body);
          return 0;
        };
      }));
      (*srv)->stop();
    }
    const LoopFigures& d = runs[runs.size() - 2];
    const LoopFigures& h = runs.back();
    std::fprintf(stderr, "round %lld: direct %.2f req/s, %s %.2f req/s (refused %lld, failed %lld)\n",
                 static_cast<long long>(round + 1), static_cast<double>(d.completed) / d.wallSeconds, h.mode.c_str(),
                 static_cast<double>(h.completed) / h.wallSeconds, static_cast<long long>(h.refused),
                 static_cast<long long>(h.failed));
  }

  std::ostringstream out;
  JsonWriter jw(out, true);
  jw.beginObject();
  jw.key("settings").beginObject();
  jw.key("workflow").value(workflowName).key("mode").value(servePolicyName(serving->policy));
  jw.key("concurrency").value(*concurrency).key("requests").value(*requests).key("rounds").value(*rounds);
  jw.key("stream").value(stream).key("max_tokens").value(*maxTokens).key("nprobe").value(*nprobe);
  jw.key("loop").value(*rps > 0 ? "open (Poisson arrivals at rps)" : "closed").key("rps").value(*rps);
  jw.key("slo_s").value(*slo);
  jw.key("split").value(split).key("model").value(serving->modelDir.string());
  jw.key("hardware_threads").value(static_cast<int64_t>(std::thread::hardware_concurrency()));
  jw.endObject();
  std::vector<double> rate[2], p50[2], attained[2];
  jw.key("runs").beginArray();
  for (size_t i = 0; i < runs.size(); ++i) {
    const LoopFigures& f = runs[i];
    const double throughput = f.wallSeconds > 0 ? static_cast<double>(f.completed) / f.wallSeconds : 0;
    const double within = static_cast<double>(std::count_if(f.latencies.begin(), f.latencies.end(),
                                                             [&](double l) { return l <= *slo; })) /
                          static_cast<double>(questions.size());
    rate[i % 2].push_back(throughput);
    p50[i % 2].push_back(percentile(f.latencies, 0.5));
    attained[i % 2].push_back(within);
    jw.beginObject().key("mode").value(f.mode).key("completed").value(f.completed).key("refused").value(f.refused);
    jw.key("failed").value(f.failed).key("wall_s").value(f.wallSeconds).key("throughput_rps").value(throughput);
    jw.key("mean_latency_s").value(mean(f.latencies)).key("p50_latency_s").value(percentile(f.latencies, 0.5));
    jw.key("p99_latency_s").value(percentile(f.latencies, 0.99));
    jw.key("slo_attainment").value(within);  // answered within --slo, of all requests
    jw.endObject();
  }
  jw.endArray();
  jw.key("summary").beginObject();
  jw.key("direct_rps").value(mean(rate[0])).key("http_rps").value(mean(rate[1]));
  jw.key("http_throughput_cost").value(mean(rate[0]) > 0 ? 1.0 - mean(rate[1]) / mean(rate[0]) : 0.0);
  jw.key("direct_slo_attainment").value(mean(attained[0])).key("http_slo_attainment").value(mean(attained[1]));
  jw.key("direct_p50_latency_s").value(mean(p50[0])).key("http_p50_latency_s").value(mean(p50[1]));
  jw.endObject();
  jw.endObject();
  out << "\n";
  return emitJson(out.str(), jsonPath);
}

}  // namespace rag::cli
