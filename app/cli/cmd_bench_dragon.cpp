// `ragraph bench dragon`: every DRAGON method side by side over the link at several added
// latencies (the cloud a second process of this binary), answer accuracy and perplexity with
// 0..8 passages per side, and the aggregator policies on the schedule simulator.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include "commands.h"
#include "core/clock.h"
#include "core/json_writer.h"
#include "core/random.h"
#include "corpus/corpus_db.h"
#include "corpus/qa_reader.h"
#include "dragon/schedule_sim.h"
#include "dragon_side.h"
#include "rag/corpus.h"

extern char** environ;

namespace rag::cli {

namespace {

using namespace rag::dragon;

struct CloudChild {
  pid_t pid = -1;
  ~CloudChild() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  }
};

Result<uint16_t> freePort() {
  RAG_ASSIGN_OR_RETURN(Listener l, Listener::listen("127.0.0.1:0"));
  RAG_ASSIGN_OR_RETURN(auto hp, parseAddress(l.address()));
  return hp.second;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}


}  // namespace

int cmdBenchDragon(Args& args) {
  const bool quick = args.flag("quick");
  const bool jsonFlag = args.flag("json");
  const std::string out = args.getOr("out", "");
  const std::string latList = args.getOr("latencies", "0,25,50,100,200,300");
  const std::string methodList = args.getOr("methods", "dragon,drdg_tw,drdg_sw,device_only,cloud_only,drcg_text,drcg_kv");
  auto questions = args.getInt("questions", quick ? 3 : 8);
  auto accQuestions = args.getInt("accuracy-questions", quick ? 10 : 40);
  const std::string docCounts = args.getOr("accuracy-docs", quick ? "0,2,8" : "0,1,2,4,8");
  auto settings = readRunSettings(args);
  auto opts = readSideOptions(args);
  const std::string cloudKernels = args.getOr("cloud-kernels", "on");
  // Where the two processes are pinned (on machines with two cores or more); -1: not pinned.
  auto deviceCore = args.getInt("device-core", 0);
  auto cloudCore = args.getInt("cloud-core", 1);
  if (!deviceCore) return fail(deviceCore.status());
  if (!cloudCore) return fail(cloudCore.status());
  if (!questions) return fail(questions.status());
  if (!accQuestions) return fail(accQuestions.status());
  if (!settings) return fail(settings.status());
  if (!opts) return fail(opts.status());
  if (Status s = args.finish(); !s) return fail(s);
  std::vector<double> latencies;
  {
    std::stringstream ss(latList);
    std::string item;
    while (std::getline(ss, item, ','))
      try {
        latencies.push_back(std::stod(item));
      } catch (...) {
        return fail(Status::invalidArgument("--latencies takes comma-separated milliseconds, e.g. 0,100,300"));
      }
  }
  std::vector<Method> methods;
  {
    std::stringstream ss(methodList);
    std::string item;
    while (std::getline(ss, item, ',')) {
      auto m = parseMethod(item);
      if (!m) return fail(m.status());
      methods.push_back(*m);
    }
  }
  restartWithPassiveOpenMp();

  // The questions: test-split items of both kinds (FOLDOC terms and WordNet), spread evenly.
  std::vector<std::string> qs;
  std::vector<std::vector<std::string>> answers;
  {
    auto db = corpus::openCorpus(opts->corpusPath);
    if (!db) return fail(db.status());
    for (const char* type : {"foldoc", "definition"}) {
      auto ids = corpus::listQaIds(*db, "test", type);
      if (!ids) return fail(ids.status());
      for (int64_t id : spreadEvenly(*ids, (*questions + 1) / 2)) {
        auto item = corpus::readQaItem(*db, id);
        if (!item) return fail(item.status());
        qs.push_back(item->question);
        answers.push_back(item->answers);
      }
    }
    if (qs.size() > static_cast<size_t>(*questions)) {
      qs.resize(static_cast<size_t>(*questions));
      answers.resize(qs.size());
    }
    if (qs.empty()) return fail(Status::notFound("the corpus has no test questions; rebuild it with `ragraph corpus build`"));
  }

  // The cloud: a second process of this binary on --cloud-core (the device on --device-core).
  auto port = freePort();
  if (!port) return fail(port.status());
  const std::string addr = "127.0.0.1:" + std::to_string(*port);
  const unsigned ncores = std::max(1u, std::thread::hardware_concurrency());
  for (int64_t c : {*deviceCore, *cloudCore})
    if (c < -1 || c >= static_cast<int64_t>(ncores))
      return fail(Status::invalidArgument("--device-core and --cloud-core take a core in [0, " + std::to_string(ncores) +
                                          ") or -1 (not pinned), not " + std::to_string(c)));
  std::vector<std::string> cargv = {"ragraph", "dragon", "cloud", "--listen", addr, "--once",
                                    "--corpus", opts->corpusPath, "--kernels", cloudKernels};
  if (!opts->model.dir.empty()) cargv.insert(cargv.end(), {"--model", opts->model.dir.string()});
  if (opts->deterministic) cargv.push_back("--deterministic");
  if (ncores >= 2 && *cloudCore >= 0) cargv.insert(cargv.end(), {"--core", std::to_string(*cloudCore)});
  std::vector<char*> cargs;
  for (std::string& s : cargv) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  CloudChild child;
  // The child's stdout goes to our stderr: stdout carries only the benchmark's JSON.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  const int rc = ::posix_spawn(&child.pid, "/proc/self/exe", &fa, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    child.pid = -1;
    return fail(Status::ioError(std::string("cannot start the cloud process: ") + std::strerror(rc)));
  }
  if (ncores >= 2) opts->core = static_cast<int>(*deviceCore);
  auto side = loadSide(Side::Device, *opts);
  if (!side) return fail(side.status());
  std::unique_ptr<Transport> link;
  for (Stopwatch sw; !link;) {
    auto t = Transport::connect(addr, {}, 1000);
    if (t) {
      link = std::move(*t);
      break;
    }
    int st = 0;
    if (::waitpid(child.pid, &st, WNOHANG) == child.pid) {
      child.pid = -1;
      return fail(Status::unavailable("the cloud process exited before listening (its error is above)"));
    }
    if (sw.elapsedMs() > 120000) return fail(Status::unavailable("the cloud process did not listen within 120 s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::fprintf(stderr, "bench dragon: cloud process %d on %s; %zu questions, %zu latencies, %zu methods\n",
               static_cast<int>(child.pid), addr.c_str(), qs.size(), latencies.size(), methods.size());

  struct Cell {
    std::vector<double> perToken, ttft, bytes, tokens;
    double accepted[2] = {0, 0}, rejected[2] = {0, 0};
    double stale = 0, handovers = 0;
    std::map<std::string, double> bytesByType;
  };
  std::map<std::string, std::map<double, Cell>> cells;  // method -> latency -> cell
  std::map<double, std::vector<double>> pings;
  std::map<double, RttEstimate> inband;
  int64_t identical = 0, compared = 0;
  std::vector<double> decodeSamples[2];  // measured draft decode times in the dragon runs, by side
  SessionOptions so{.peerTimeoutMs = 30000};
  Stopwatch total;
  for (double lat : latencies) {
    for (const std::string& q : qs) {
      std::vector<uint32_t> dragonTokens, twTokens;
      {
        // Unmeasured warm-up: both sides retrieve for this question once (BM25 remembers each
        // word's passage count), so the first method measured is not charged for it.
        Hello h = *settings;
        h.method = Method::DrcgText;
        h.maxTokens = 1;
        h.latencyMs = lat;
        h.question = q;
        auto warm = runDevice(link.get(), (*side)->demo->res, h, so);
        if (!warm) return fail(warm.status().withContext("warm-up run"));
      }
      for (Method m : methods) {
        Hello h = *settings;
        h.method = m;
        h.latencyMs = lat;
        h.question = q;
        h.ignoreEos = true;  // every method decodes exactly max-tokens: per-token figures compare
        auto rep = runDevice(link.get(), (*side)->demo->res, h, so);
        if (!rep) return fail(rep.status().withContext(std::string(methodName(m)) + " at " + std::to_string(lat) + " ms"));
        if (!rep->note.empty()) return fail(Status::unavailable(rep->note));
        Cell& c = cells[std::string(methodName(m))][lat];
        c.perToken.push_back(rep->perTokenMs());
        c.ttft.push_back(rep->ttftMs);
        c.tokens.push_back(static_cast<double>(rep->tokens.size()));
        const double bytes = static_cast<double>(rep->link.bytesSent() + rep->link.bytesReceived());
        c.bytes.push_back(rep->tokens.empty() ? 0 : bytes / static_cast<double>(rep->tokens.size()));
        for (int i = 1; i < kMsgTypeCount; ++i) {
          const double b = static_cast<double>(rep->link.sent[i].bytes + rep->link.received[i].bytes);
          if (b > 0) c.bytesByType[std::string(msgTypeName(static_cast<MsgType>(i)))] += b / static_cast<double>(qs.size());
        }
        for (int s = 0; s < 2; ++s) {
          c.accepted[s] += static_cast<double>(rep->accepted[s]);
          c.rejected[s] += static_cast<double>(rep->rejected[s]);
        }
        c.stale += static_cast<double>(rep->staleDrafts);
        c.handovers += static_cast<double>(rep->handovers);
        if (m == Method::Dragon) {
          for (int s = 0; s < 2; ++s)
            decodeSamples[s].insert(decodeSamples[s].end(), rep->decodeMs[s].begin(), rep->decodeMs[s].end());
          dragonTokens = rep->tokens;
          inband[lat] = rep->rtt;
        }
        if (m == Method::DrdgTw) twTokens = rep->tokens;
      }
      if (!dragonTokens.empty() && !twTokens.empty()) {
        ++compared;
        identical += dragonTokens == twTokens;
      }
    }
    auto p = pingRtt(*link, quick ? 5 : 10, so.peerTimeoutMs + static_cast<int>(lat) * 2);
    if (!p) return fail(p.status());
    pings[lat] = *p;
    std::fprintf(stderr, "bench dragon: latency %.0f ms done (%.0f s so far)\n", lat, total.elapsedSeconds());
  }
  // Fig. 5's shape: answer accuracy with 0..8 passages per side, device-only, cloud-only and
  // DRAGON, at no added latency (accuracy does not depend on it).
  std::vector<uint32_t> docsList;
  {
    std::stringstream ss(docCounts);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) docsList.push_back(static_cast<uint32_t>(std::stoul(item)));
  }
  std::map<std::string, std::map<uint32_t, double>> accuracy, perplexity;
  int64_t accItems = 0;
  if (*accQuestions > 0) {
    auto db = corpus::openCorpus(opts->corpusPath);
    if (!db) return fail(db.status());
    std::vector<QaItem> items;
    for (const char* type : {"foldoc", "definition"}) {
      auto ids = corpus::listQaIds(*db, "test", type);
      if (!ids) return fail(ids.status());
      for (int64_t id : spreadEvenly(*ids, (*accQuestions + 1) / 2)) {
        auto item = corpus::readQaItem(*db, id);
        if (!item) return fail(item.status());
        items.push_back(std::move(*item));
      }
    }
    accItems = static_cast<int64_t>(items.size());
    for (uint32_t docs : docsList)
      for (Method m : {Method::DeviceOnly, Method::CloudOnly, Method::Dragon}) {
        int correct = 0;
        double logpSum = 0, logpCount = 0;
        for (const QaItem& item : items) {
          {
            Hello sh = *settings;
            sh.method = Method::Score;
            sh.scored = m;
            sh.latencyMs = 0;
            sh.docsPerSide = docs;
            sh.question = item.question;
            sh.answer = item.answers.empty() ? std::string() : item.answers[0];
            auto sc = runDevice(link.get(), (*side)->demo->res, sh, so);
            if (!sc) return fail(sc.status().withContext("perplexity run"));
            for (float v : sc->answerLogp) logpSum += v;
            logpCount += static_cast<double>(sc->answerLogp.size());
          }
          Hello h = *settings;
          h.method = m;
          h.latencyMs = 0;
          h.docsPerSide = docs;
          h.question = item.question;
          h.ignoreEos = false;
          auto rep = runDevice(link.get(), (*side)->demo->res, h, so);
          if (!rep) return fail(rep.status().withContext("accuracy run"));
          correct += answerContainsGold(textOf(**side, rep->tokens), item.answers) ? 1 : 0;
        }
        accuracy[std::string(methodName(m))][docs] = items.empty() ? 0 : static_cast<double>(correct) / static_cast<double>(items.size());
        perplexity[std::string(methodName(m))][docs] = logpCount > 0 ? std::exp(-logpSum / logpCount) : 0.0;
      }
    std::fprintf(stderr, "bench dragon: accuracy done (%.0f s so far)\n", total.elapsedSeconds());
  }
  link->close(500);

  // Fig. 8's shape: the aggregator policies on the timing simulator, fed with the acceptance
  // rates and decode times measured above (50 Bernoulli sequences of 100 tokens per latency).
  std::map<double, std::map<std::string, double>> simMs;
  double simDecode[2] = {0, 0};
  if (cells.count("dragon")) {
    double acc[2] = {0, 0};
    for (int s = 0; s < 2; ++s) {
      double a = 0, n = 0;
      for (auto& [lat, c] : cells["dragon"]) {
        a += c.accepted[s];
        n += c.accepted[s] + c.rejected[s];
      }
      acc[s] = n > 0 ? a / n : 0.5;
      simDecode[s] = mean(decodeSamples[s]);
    }
    for (double lat : latencies) {
      Rng rng(17);
      std::vector<std::vector<uint8_t>> seqs[2];
      for (int k = 0; k < 50; ++k)
        for (int s = 0; s < 2; ++s) {
          std::vector<uint8_t> v(100);
          for (auto& x : v) x = rng.uniform01() < acc[s] ? 1 : 0;
          seqs[s].push_back(std::move(v));
        }
      const double rtt = pings.count(lat) ? mean(pings[lat]) : lat;
      for (AggregatorPolicy pol : {AggregatorPolicy::Greedy, AggregatorPolicy::Device, AggregatorPolicy::Cloud,
                                   AggregatorPolicy::Random}) {
        double sum = 0;
        for (int k = 0; k < 50; ++k)
          sum += simulateSchedule({.decodeMs = {simDecode[0], simDecode[1]}, .rttMs = rtt, .maxAhead = settings->maxAhead},
                                  seqs[0][static_cast<size_t>(k)], seqs[1][static_cast<size_t>(k)], pol,
                                  static_cast<uint64_t>(k + 1));
        simMs[lat][std::string(policyName(pol))] = sum / 50;
      }
    }
  }

  std::ostringstream os;
  {
    JsonWriter w(os, true);
    auto latKey = [](double l) {
      char b[32];
      std::snprintf(b, sizeof b, "%g", l);
      return std::string(b);
    };
    w.beginObject();
    w.key("bench").value("dragon");
    w.key("quick").value(quick);
    w.key("questions").value(static_cast<int64_t>(qs.size()));
    w.key("max_tokens").value(static_cast<int64_t>(settings->maxTokens));
    w.key("docs_per_side").value(static_cast<int64_t>(settings->docsPerSide));
    w.key("max_ahead").value(static_cast<int64_t>(settings->maxAhead));
    w.key("policy").value(policyName(settings->policy));
    w.key("device_kernels").value(opts->kernels);
    w.key("cloud_kernels").value(cloudKernels == "on");
    w.key("deterministic").value(opts->deterministic);
    w.key("device_core").value(ncores >= 2 ? *deviceCore : int64_t{-1});
    w.key("cloud_core").value(ncores >= 2 ? *cloudCore : int64_t{-1});
    w.key("link").value("loopback TCP, TCP_NODELAY, delay line in the transport: latency/2 each way, jitter latency/5");
    for (const char* what : {"latency_ms_per_token", "ttft_ms", "bytes_per_token", "tokens"}) {
      w.key(what).beginObject();
      for (auto& [method, byLat] : cells) {
        w.key(method).beginObject();
        for (auto& [lat, c] : byLat) {
          const std::string k = what;
          w.key(latKey(lat)).value(mean(k == "latency_ms_per_token" ? c.perToken
                                        : k == "ttft_ms"            ? c.ttft
                                        : k == "bytes_per_token"    ? c.bytes
                                                                    : c.tokens));
        }
        w.endObject();
      }
      w.endObject();
    }
    w.key("bytes_by_type_per_request").beginObject();
    for (auto& [method, byLat] : cells) {
      w.key(method).beginObject();
      for (auto& [type, b] : byLat.begin()->second.bytesByType) w.key(type).value(b);
      w.endObject();
    }
    w.endObject();
    w.key("dragon_acceptance").beginObject();
    if (cells.count("dragon"))
      for (auto& [lat, c] : cells["dragon"]) {
        w.key(latKey(lat)).beginObject();
        for (int s = 0; s < 2; ++s) {
          const double n = c.accepted[s] + c.rejected[s];
          w.key(sideName(static_cast<Side>(s))).value(n > 0 ? c.accepted[s] / n : 0.0);
        }
        w.key("stale_drafts").value(c.stale);
        w.key("handovers").value(c.handovers);
        w.endObject();
      }
    w.endObject();
    w.key("measured_rtt_ms").beginObject();
    for (auto& [lat, v] : pings) {
      std::vector<double> s = v;
      std::sort(s.begin(), s.end());
      w.key(latKey(lat)).beginObject();
      w.key("ping_median").value(s[s.size() / 2]);
      w.key("ping_min").value(s.front());
      w.key("ping_max").value(s.back());
      w.key("inband_instant").value(inband[lat].instantMs);
      w.key("inband_historical").value(inband[lat].historicalMs);
      w.endObject();
    }
    w.endObject();
    if (cells.count("dragon") && cells.count("drdg_tw")) {
      w.key("dragon_vs_drdg_tw_reduction").beginObject();
      for (auto& [lat, c] : cells["dragon"]) {
        const double tw = mean(cells["drdg_tw"][lat].perToken);
        w.key(latKey(lat)).value(tw > 0 ? 1.0 - mean(c.perToken) / tw : 0.0);
      }
      w.endObject();
    }
    if (cells.count("dragon") && cells.count("device_only")) {
      w.key("dragon_vs_device_only_overhead").beginObject();
      for (auto& [lat, c] : cells["dragon"]) {
        const double d = mean(cells["device_only"][lat].perToken);
        w.key(latKey(lat)).value(d > 0 ? mean(c.perToken) / d - 1.0 : 0.0);
      }
      w.endObject();
    }
    w.key("dragon_tokens_equal_drdg_tw").beginObject().key("equal").value(identical).key("compared").value(compared);
    w.endObject();
    w.key("accuracy").beginObject();
    w.key("questions").value(accItems);
    for (auto& [method, byDocs] : accuracy) {
      w.key(method).beginObject();
      for (auto& [docs, a] : byDocs) w.key(std::to_string(docs)).value(a);
      w.endObject();
    }
    w.endObject();
    w.key("answer_perplexity").beginObject();  // gold answer (+ EOS), tokens pooled
    for (auto& [method, byDocs] : perplexity) {
      w.key(method).beginObject();
      for (auto& [docs, v] : byDocs) w.key(std::to_string(docs)).value(v);
      w.endObject();
    }
    w.endObject();
    w.key("scheduler_simulation_ms_per_100_tokens").beginObject();
    w.key("decode_ms").beginObject().key("device").value(simDecode[0]).key("cloud").value(simDecode[1]).endObject();
    for (auto& [lat, byPol] : simMs) {
      w.key(latKey(lat)).beginObject();
      for (auto& [pol, ms] : byPol) w.key(pol).value(ms);
      w.endObject();
    }
    w.endObject();
    w.key("seconds").value(total.elapsedSeconds());
    w.endObject();
    os << "\n";
  }
  if (!jsonFlag && out.empty()) {
    // A table on stdout.
    std::printf("%-12s", "ms/token");
    for (double l : latencies) std::printf(" %9.0fms", l);
    std::printf("\n");
    for (auto& [method, byLat] : cells) {
      std::printf("%-12s", method.c_str());
      for (double l : latencies) std::printf(" %11.2f", mean(byLat[l].perToken));
      std::printf("\n");
    }
    return 0;
  }
  return emitJson(os.str(), out);
}


}  // namespace rag::cli
