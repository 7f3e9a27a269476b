// `ragraph bench embed`: WindVE's queue depths and the concurrency its auxiliary device adds
// (papers/windve.txt §4.2, Tables 1 and 3), on the shipped embedder and real query texts.
//
//  1. Devices (Algorithm 2): a CUDA main instance when libtorch has CUDA; otherwise two CPU
//     instances on disjoint cores (on 2 cores: main on core 0, auxiliary on core 1).
//  2. Calibration, per device alone: bursts of C = 1, 2, 4, ... concurrent queries (median of
//     --repeats), a fit latency = α·C + β with α, β ≥ 0, and depth_fit = the largest C within
//     the SLO. --calibrate stops here. On a shared machine, a burst during which other
//     processes took over 10% of the instances' cores (thread CPU time / wall time of the
//     embed calls) is measured again, and the count reported.
//  3. --stress: the stress test per device (C = step, 2·step, ... until the SLO is missed).
//  4. Maximum concurrency within the SLO through the service, main-only (heterogeneous off)
//     and main + auxiliary, by one rule: from the fitted depth(s) down in steps of ~3%, the
//     capacity split over the queues in proportion to the fitted depths, until a burst of the
//     whole capacity meets the SLO (the paper's fine-tuning); then both capacities measured
//     alternately, and one query past each capacity, which must be answered BUSY.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "commands.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "model/runner.h"
#include "retrieval/query_texts.h"
#include "retrieval/queue_depth.h"
#include "retrieval/text_embedder_instance.h"
#include "retriever.h"

namespace rag::cli {

namespace fs = std::filesystem;
using namespace rag::retrieval;

namespace {

struct DeviceResult {
  DeviceSpec spec;
  std::shared_ptr<TextEmbedderInstance> embedder;
  std::vector<LatencySample> profile;
  LatencyFit fit;
  int64_t depthFit = 0;
  std::optional<StressResult> stress;
  int64_t stressStep = 0;
};

EmbeddingInstance instanceOf(const DeviceResult& d) { return {d.spec.name, d.embedder, d.spec.cores}; }

// Queue depths of a service: main only when aux is 0.
struct Capacity {
  int64_t main = 0, aux = 0;
  int64_t total() const { return main + aux; }
};

// `total` queries split over the two queues in proportion to the fitted depths (at least one
// on the main queue, which Algorithm 1 fills first).
Capacity splitCapacity(int64_t total, int64_t mainFit, int64_t auxFit) {
  if (auxFit <= 0 || total <= 1) return {total, 0};
  const auto m = static_cast<int64_t>(std::llround(static_cast<double>(total) * static_cast<double>(mainFit) /
                                                   static_cast<double>(mainFit + auxFit)));
  const int64_t main = std::clamp<int64_t>(m, 1, total);
  return {main, total - main};
}

// A service with these depths; heterogeneous when the capacity has an auxiliary share.
Result<std::unique_ptr<EmbeddingService>> serviceFor(const DeviceResult& main, const DeviceResult* aux,
                                                     Capacity c, int64_t maxBatch) {
  std::optional<EmbeddingInstance> a;
  if (aux && c.aux > 0) a = instanceOf(*aux);
  return EmbeddingService::create(instanceOf(main), std::move(a),
                                  {.mainDepth = std::max<int64_t>(1, c.main), .auxDepth = std::max<int64_t>(1, c.aux),
                                   .heterogeneous = a.has_value(), .maxBatch = maxBatch});
}

// The share of their cores the service's workers got between two snapshots: CPU time over
// wall time of their embed calls (1 when nothing was embedded).
double coreShare(const EmbeddingServiceStats& before, const EmbeddingServiceStats& after) {
  double cpu = after.main.embedCpuSeconds - before.main.embedCpuSeconds;
  double wall = after.main.embedSeconds - before.main.embedSeconds;
  if (before.auxiliary && after.auxiliary) {
    cpu += after.auxiliary->embedCpuSeconds - before.auxiliary->embedCpuSeconds;
    wall += after.auxiliary->embedSeconds - before.auxiliary->embedSeconds;
  }
  return wall > 0 ? cpu / wall : 1.0;
}

// A burst during which another process took more than 10% of the instances' cores measures the
// machine's other load, not the device: it is measured again (at most 3 more times, counted in
// `retried`; then the last one stands). The median of `repeats` such bursts.
MeasureLatency burstsOf(EmbeddingService& svc, const std::vector<std::string>& texts, int repeats, int64_t& retried) {
  return medianOf(
      [&svc, &texts, &retried](int64_t c) -> Result<double> {
        Result<double> t = Status::internal("no burst was measured");
        for (int attempt = 0; attempt < 4; ++attempt) {
          const EmbeddingServiceStats before = svc.stats();
          t = timeBurst(svc, texts, c);
          if (!t || coreShare(before, svc.stats()) >= 0.9) return t;
          ++retried;
        }
        return t;
      },
      repeats);
}

// Queries of a burst one past the capacity that were answered BUSY.
Result<int64_t> busyPastCapacity(EmbeddingService& svc, const std::vector<std::string>& texts, int64_t capacity) {
  std::vector<Submission> subs;
  for (int64_t i = 0; i <= capacity; ++i) subs.push_back(svc.submit(texts[static_cast<size_t>(i) % texts.size()]));
  int64_t busy = 0;
  for (Submission& s : subs) {
    Result<std::vector<float>> r = s.result.get();
    if (r.status().code() == StatusCode::Busy) ++busy;
    else if (!r) return r.status();
  }
  return busy;
}

void writeSamples(JsonWriter& w, const std::vector<LatencySample>& samples) {
  w.beginArray();
  for (const LatencySample& s : samples) {
    w.beginArray();
    w.value(s.concurrency);
    w.value(s.seconds);
    w.endArray();
  }
  w.endArray();
}

void writeDevice(JsonWriter& w, const DeviceResult& d) {
  w.beginObject();
  w.key("name").value(d.spec.name);
  w.key("kind").value(deviceKindName(d.spec.kind));
  w.key("cores").value(formatCoreList(d.spec.cores));
  w.key("alpha").value(d.fit.alpha);
  w.key("beta").value(d.fit.beta);
  w.key("fit_rmse").value(d.fit.rmse);
  w.key("profile");
  writeSamples(w, d.profile);
  w.key("depth_fit").value(d.depthFit);
  if (d.stress) {
    w.key("depth_stress").value(d.stress->depth);
    w.key("stress_step").value(d.stressStep);
    w.key("stress_reached_cap").value(d.stress->reachedCap);
    w.key("stress_samples");
    writeSamples(w, d.stress->samples);
    w.key("fit_vs_stress_relative_difference");
    if (d.stress->depth > 0)
      w.value(static_cast<double>(d.depthFit - d.stress->depth) / static_cast<double>(d.stress->depth));
    else
      w.null();
  } else {
    w.key("depth_stress").null();
  }
  w.endObject();
}

}  // namespace

int cmdBenchEmbed(Args& args) {
  const fs::path corpus = args.get("corpus") ? fs::path(*args.get("corpus")) : defaultCorpusPath();
  Result<fs::path> dir = readEmbedderDir(args);
  Result<double> slo = args.getDouble("slo", 1.0);
  Result<int64_t> maxBatch = args.getInt("max-batch", 32);
  Result<int64_t> repeats = args.getInt("repeats", 3);
  Result<int64_t> maxConcurrency = args.getInt("max-concurrency", 1024);
  Result<int64_t> stressStepArg = args.getInt("stress-step", 0);
  const std::optional<std::string> mainCoresArg = args.get("main-cores"), auxCoresArg = args.get("aux-cores");
  const bool calibrateOnly = args.flag("calibrate"), stress = args.flag("stress"), json = args.flag("json");
  const bool hetero = !args.flag("no-hetero");
  for (const Status& s : {dir.status(), slo.status(), maxBatch.status(), repeats.status(), maxConcurrency.status(),
                          stressStepArg.status(), args.finish()})
    if (!s) return fail(s);
  if (!std::isfinite(*slo) || *slo <= 0) return fail(Status::invalidArgument("--slo must be a positive number of seconds"));
  if (*maxBatch < 1 || *repeats < 1 || *maxConcurrency < 2 || *stressStepArg < 0)
    return fail(Status::invalidArgument("--max-batch and --repeats must be >= 1, --max-concurrency >= 2, "
                                        "--stress-step >= 0 (0: about 1/32 of the fitted depth)"));
  if (calibrateOnly && stress) return fail(Status::invalidArgument("--calibrate and --stress exclude each other"));
  DeviceDetectParams dp;
  dp.cudaAvailable = model::cudaAvailable();
  dp.heterogeneous = hetero;
  dp.allowedCores = allowedCores();
  for (auto [arg, out] : {std::pair{&mainCoresArg, &dp.mainCores}, std::pair{&auxCoresArg, &dp.auxCores}}) {
    if (!*arg) continue;
    Result<std::vector<int>> cores = parseCoreList(**arg);
    if (!cores) return fail(cores.status());
    *out = std::move(*cores);
  }
  if (!hetero && auxCoresArg) return fail(Status::invalidArgument("--aux-cores has no use with --no-hetero"));
  Result<DevicePlan> plan = detectDevices(dp);
  if (!plan) return fail(plan.status());

  std::vector<DeviceResult> devices;
  for (const DeviceSpec* spec : {&plan->main, plan->auxiliary ? &*plan->auxiliary : nullptr})
    if (spec) devices.emplace_back().spec = *spec;
  // libtorch's and BLAS's pools are process-wide: as many threads as one instance has cores.
  size_t threads = SIZE_MAX;
  for (const DeviceResult& d : devices)
    if (d.spec.kind == DeviceKind::Cpu) threads = std::min(threads, d.spec.cores.size());
  model::setComputeThreads(static_cast<int>(threads == SIZE_MAX ? 1 : std::max<size_t>(1, threads)));

  for (DeviceResult& d : devices) {
    auto e = TextEmbedderInstance::load({.dir = *dir, .device = d.spec.kind});
    if (!e) return fail(e.status().withContext("loading the embedder for " + d.spec.name));
    d.embedder = std::move(*e);
  }
  Result<QueryTexts> texts = loadQueryTexts(corpus, *dir, *maxConcurrency);
  if (!texts) return fail(texts.status());
  const std::vector<std::string>& q = texts->texts;
  const int reps = static_cast<int>(*repeats);
  int64_t retried = 0;  // bursts measured again because other processes took the cores
  if (!json) std::fprintf(stderr, "%s\nqueries: %s (%zu)\n", plan->note.c_str(), texts->source.c_str(), q.size());

  // 2–3: each device alone.
  for (DeviceResult& d : devices) {
    auto svc = serviceFor(d, nullptr, {*maxConcurrency, 0}, *maxBatch);
    if (!svc) return fail(svc.status());
    // Every text once: the tokenizer's word cache and the allocator warm up before timing.
    if (auto warm = timeBurst(**svc, q, static_cast<int64_t>(q.size())); !warm) return fail(warm.status());
    MeasureLatency measure = burstsOf(**svc, q, reps, retried);
    auto profile = profileLevels(measure, {.slo = *slo, .maxConcurrency = *maxConcurrency});
    if (!profile) return fail(profile.status().withContext("profiling " + d.spec.name));
    d.profile = std::move(*profile);
    auto fit = fitLatency(d.profile);
    if (!fit) return fail(fit.status());
    d.fit = *fit;
    d.depthFit = depthWithinSlo(d.fit, *slo, *maxConcurrency);
    if (!json)
      std::fprintf(stderr, "%s: latency = %.6f * C + %.6f s, depth within %.3f s: %lld\n", d.spec.name.c_str(),
                   d.fit.alpha, d.fit.beta, *slo, static_cast<long long>(d.depthFit));
    if (stress) {
      d.stressStep = *stressStepArg > 0 ? *stressStepArg : std::max<int64_t>(1, d.depthFit / 32);
      auto st = stressDepth(measure, {.slo = *slo, .step = d.stressStep, .maxConcurrency = *maxConcurrency});
      if (!st) return fail(st.status().withContext("stress test on " + d.spec.name));
      d.stress = std::move(*st);
      if (!json)
        std::fprintf(stderr, "%s: stress-test depth (step %lld): %lld\n", d.spec.name.c_str(),
                     static_cast<long long>(d.stressStep), static_cast<long long>(d.stress->depth));
    }
  }
  const DeviceResult& mainDev = devices[0];
  const DeviceResult* auxDev = devices.size() > 1 ? &devices[1] : nullptr;

  // 4: the service's capacity within the SLO, main-only and with the auxiliary, by the same
  // rule: from the fitted depths down until a burst of the whole capacity meets the SLO.
  Capacity mainOnly, mainAux;
  double latMainOnly = 0, latMainAux = 0;
  double shareMainOnly = 0;                       // CPU time / wall time of the workers' embed calls
  std::pair<double, double> shareMainAux{0, 0};
  int64_t busyMainOnly = 0, busyMainAux = 0;
  if (!calibrateOnly) {
    if (mainDev.depthFit < 1)
      return fail(Status::invalidArgument("one query alone misses the SLO of " + std::to_string(*slo) + " s on " +
                                          mainDev.spec.name + " (beta " + std::to_string(mainDev.fit.beta) +
                                          " s); raise --slo"));
    const int64_t auxFit = auxDev ? auxDev->depthFit : 0;
    auto capacityOf = [&](bool withAux) -> MeasureLatency {
      return [&, withAux](int64_t total) -> Result<double> {
        const Capacity c = splitCapacity(total, mainDev.depthFit, withAux ? auxFit : 0);
        RAG_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingService> svc, serviceFor(mainDev, auxDev, c, *maxBatch));
        return burstsOf(*svc, q, reps, retried)(total);
      };
    };
    // Both searches step down in lockstep, so the shared machine's load drifts over both alike.
    std::vector<MeasureLatency> measures = {capacityOf(false)};
    std::vector<int64_t> starts = {mainDev.depthFit}, steps;
    if (auxFit > 0) {
      measures.push_back(capacityOf(true));
      starts.push_back(mainDev.depthFit + auxFit);
    }
    for (int64_t s : starts) steps.push_back(std::max<int64_t>(1, s / 32));
    auto found = largestWithinSlo(measures, starts, steps, *slo);
    if (!found) return fail(found.status());
    mainOnly = {(*found)[0].concurrency, 0};
    mainAux = auxFit > 0 ? splitCapacity((*found)[1].concurrency, mainDev.depthFit, auxFit) : mainOnly;
    // Side by side: the two capacities alternately, then one query past each.
    auto one = serviceFor(mainDev, auxDev, mainOnly, *maxBatch);
    auto two = serviceFor(mainDev, auxDev, mainAux, *maxBatch);
    if (!one || !two) return fail(!one ? one.status() : two.status());
    std::vector<double> a, b;
    for (int r = 0; r < reps && mainOnly.total() > 0; ++r) {
      auto x = timeBurst(**one, q, mainOnly.total());
      auto y = timeBurst(**two, q, mainAux.total());
      if (!x || !y) return fail(!x ? x.status() : y.status());
      a.push_back(*x);
      b.push_back(*y);
    }
    latMainOnly = median(a);
    latMainAux = median(b);
    auto share = [](const QueueStats& q) { return q.embedSeconds > 0 ? q.embedCpuSeconds / q.embedSeconds : 0.0; };
    const EmbeddingServiceStats s1 = (*one)->stats(), s2 = (*two)->stats();
    shareMainOnly = share(s1.main);
    shareMainAux = {share(s2.main), s2.auxiliary ? share(*s2.auxiliary) : 0.0};
    auto b1 = busyPastCapacity(**one, q, mainOnly.total());
    auto b2 = busyPastCapacity(**two, q, mainAux.total());
    if (!b1 || !b2) return fail(!b1 ? b1.status() : b2.status());
    busyMainOnly = *b1;
    busyMainAux = *b2;
  }

  if (json) {
    JsonWriter w(std::cout);
    w.beginObject();
    w.key("slo_seconds").value(*slo);
    w.key("embedder").value(mainDev.embedder->model().fingerprint());
    w.key("queries").value(texts->source);
    w.key("query_texts").value(static_cast<int64_t>(q.size()));
    w.key("plan").value(plan->note);
    w.key("heterogeneous").value(plan->heterogeneous);
    w.key("max_batch").value(*maxBatch);
    w.key("repeats").value(*repeats);
    w.key("disturbed_bursts_remeasured").value(retried);
    w.key("compute_threads_per_instance").value(static_cast<int64_t>(threads == SIZE_MAX ? 1 : threads));
    w.key("devices").beginObject();
    w.key("main");
    writeDevice(w, mainDev);
    if (auxDev) {
      w.key("auxiliary");
      writeDevice(w, *auxDev);
    }
    w.endObject();
    if (!calibrateOnly) {
      w.key("max_concurrency_main_only").value(mainOnly.total());
      w.key("max_concurrency_main_aux");
      if (auxDev) w.value(mainAux.total()); else w.null();
      w.key("depths_fine_tuned").beginObject();
      w.key("main_only").value(mainOnly.main);
      w.key("main_aux").beginArray().value(mainAux.main).value(mainAux.aux).endArray();
      w.endObject();
      w.key("ratio");
      if (auxDev && mainOnly.total() > 0)
        w.value(static_cast<double>(mainAux.total()) / static_cast<double>(mainOnly.total()));
      else
        w.null();
      w.key("latency_at_max_main_only").value(latMainOnly);
      w.key("latency_at_max_main_aux").value(latMainAux);
      // Below 1: other processes took part of the instance's core during the final bursts.
      w.key("core_share_side_by_side").beginObject();
      w.key("main_only").value(shareMainOnly);
      w.key("main_aux").beginArray().value(shareMainAux.first).value(shareMainAux.second).endArray();
      w.endObject();
      w.key("busy_one_past_capacity").beginObject();
      w.key("main_only").value(busyMainOnly);
      w.key("main_aux").value(busyMainAux);
      w.endObject();
    }
    w.endObject();
    std::cout << std::endl;
    return 0;
  }
  for (const DeviceResult& d : devices)
    std::printf("%-10s alpha %.6f s/query  beta %.6f s  depth_fit %lld%s\n", d.spec.name.c_str(), d.fit.alpha,
                d.fit.beta, static_cast<long long>(d.depthFit),
                d.stress ? (std::string("  depth_stress ") + std::to_string(d.stress->depth)).c_str() : "");
  if (!calibrateOnly) {
    std::printf("max concurrency within %.3f s: main only %lld (%.3f s)", *slo,
                static_cast<long long>(mainOnly.total()), latMainOnly);
    if (auxDev)
      std::printf(", main + auxiliary %lld + %lld (%.3f s)", static_cast<long long>(mainAux.main),
                  static_cast<long long>(mainAux.aux), latMainAux);
    else
      std::printf("; no auxiliary instance (%s)", plan->note.c_str());
    if (auxDev && mainOnly.total() > 0)
      std::printf(", ratio %.3f", static_cast<double>(mainAux.total()) / static_cast<double>(mainOnly.total()));
    std::printf("\n");
  }
  return 0;
}

}  // namespace rag::cli
