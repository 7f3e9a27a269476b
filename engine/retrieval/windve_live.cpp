// rag/windve.h: the devices and their embedders, a worker thread for calibrations and loads, and
// the translation of retrieval/windve_load.h's figures into the public types. Torch-free, but it
// loads TextEmbedderInstance, so it is built into ragmodel.
#include "rag/windve.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include "core/thread_pool.h"
#include "model/runner.h"
#include "model/text_embedder.h"
#include "retrieval/query_texts.h"
#include "retrieval/text_embedder_instance.h"
#include "retrieval/windve_load.h"

namespace rag {

using namespace rag::retrieval;

namespace {

struct Device {
  DeviceSpec spec;
  std::shared_ptr<TextEmbedderInstance> embedder;
  EmbeddingInstance instance() const { return {spec.name, embedder, spec.cores}; }
};

// One load: its service and driver, kept after the load so that the snapshot shows how it ended.
struct LoadRun {
  std::unique_ptr<EmbeddingService> service;
  std::unique_ptr<ClosedLoopLoad> load;
};

WindVeDeviceProfile profileOf(const DeviceCalibration& c) {
  WindVeDeviceProfile p;
  p.name = c.device;
  for (const LatencySample& s : c.samples) p.samples.push_back({s.concurrency, s.seconds});
  p.alpha = c.fit.alpha;
  p.beta = c.fit.beta;
  p.rmse = c.fit.rmse;
  p.depth = c.depth;
  return p;
}

double coreShare(const QueueStats& q) { return q.embedSeconds > 0 ? q.embedCpuSeconds / q.embedSeconds : 0; }

WindVeQueueState queueOf(const QueueStats& q) {
  return {q.device, q.depth, q.queued, q.running, q.served, coreShare(q)};
}

}  // namespace

struct WindVeLive::Impl {
  std::vector<Device> devices;  // [0] main, [1] auxiliary when there is one
  QueryTexts texts;
  std::string plan;
  std::function<void()> onWorkerStart;  // WindVeParams::onWorkerStart

  mutable std::mutex mutex;  // guards what follows
  std::thread worker;
  bool active = false;
  std::optional<WindVeCalibration> calibration;
  std::shared_ptr<LoadRun> lastLoad;
  std::atomic<bool> stop{false};

  // Starts `job` on the worker; Busy while one is in flight.
  Status launch(std::function<void()> job) {
    std::lock_guard lock(mutex);
    if (active) return Status::busy("a WindVE calibration or load is in flight; stop it or wait for it to finish");
    if (worker.joinable()) worker.join();  // the last job has finished (it cleared `active`)
    active = true;
    stop = false;
    worker = std::thread([job = std::move(job), onStart = onWorkerStart] {
      if (onStart) onStart();
      setCurrentThreadName("windve");  // after onStart: a thread seen by this name has been through it
      job();
    });
    return Status::ok();
  }
  void finished() {
    std::lock_guard lock(mutex);
    active = false;
  }
};

WindVeLive::WindVeLive(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

WindVeLive::~WindVeLive() {
  stop();
  std::thread worker;
  {
    std::lock_guard lock(m_impl->mutex);
    worker = std::move(m_impl->worker);
  }
  if (worker.joinable()) worker.join();
}

Result<std::unique_ptr<WindVeLive>> WindVeLive::create(const WindVeParams& params) {
  std::error_code ec;
  if (!std::filesystem::exists(params.embedderDir / "config.json", ec) ||
      !std::filesystem::exists(params.embedderDir / "model.safetensors", ec))
    return Status::notFound("no embedder in " + params.embedderDir.string() +
                            " (config.json and model.safetensors are needed); train one with `ragraph train "
                            "embedder` or use the shipped datasets/models/rag-embedder");
  if (params.queryTexts < 1) return Status::invalidArgument("WindVeParams::queryTexts must be at least 1");
  auto impl = std::make_unique<Impl>();
  DeviceDetectParams dp;
  dp.cudaAvailable = model::cudaAvailable();
  dp.heterogeneous = params.heterogeneous;
  dp.allowedCores = allowedCores();
  RAG_ASSIGN_OR_RETURN(DevicePlan plan, detectDevices(dp));
  impl->plan = plan.note;
  impl->onWorkerStart = params.onWorkerStart;
  for (const DeviceSpec* spec : {&plan.main, plan.auxiliary ? &*plan.auxiliary : nullptr})
    if (spec) impl->devices.push_back({*spec, nullptr});
  // The kernels' thread team is process-wide: as many threads as one CPU instance has cores.
  size_t threads = SIZE_MAX;
  for (const Device& d : impl->devices)
    if (d.spec.kind == DeviceKind::Cpu) threads = std::min(threads, d.spec.cores.size());
  model::setComputeThreads(static_cast<int>(threads == SIZE_MAX ? 1 : std::max<size_t>(1, threads)));
  for (Device& d : impl->devices) {
    auto e = TextEmbedderInstance::load({.dir = params.embedderDir, .device = d.spec.kind});
    if (!e) return e.status().withContext("loading the embedder for " + d.spec.name);
    d.embedder = std::move(*e);
  }
  RAG_ASSIGN_OR_RETURN(impl->texts, loadQueryTexts(params.corpusPath, params.embedderDir, params.queryTexts));
  return std::unique_ptr<WindVeLive>(new WindVeLive(std::move(impl)));
}

Status WindVeLive::calibrate(const WindVeCalibrationSettings& s, SampleSink onSample, CalibrationSink onDone) {
  if (!std::isfinite(s.sloSeconds) || s.sloSeconds <= 0 || s.sloSeconds > 60)
    return Status::invalidArgument("the SLO must be in (0, 60] seconds, not " + std::to_string(s.sloSeconds));
  if (s.maxConcurrency < 2 || s.maxConcurrency > 4096)
    return Status::invalidArgument("the calibration's max concurrency must be in [2, 4096], not " +
                                   std::to_string(s.maxConcurrency));
  if (s.repeats < 1 || s.repeats > 10)
    return Status::invalidArgument("the calibration's repeats must be in [1, 10], not " + std::to_string(s.repeats));
  Impl* impl = m_impl.get();
  return impl->launch([impl, s, onSample = std::move(onSample), onDone = std::move(onDone)] {
    auto calibrate = [&]() -> Result<WindVeCalibration> {
      WindVeCalibration cal;
      cal.sloSeconds = s.sloSeconds;
      cal.maxConcurrency = s.maxConcurrency;
      for (size_t i = 0; i < impl->devices.size(); ++i) {
        const auto which = i == 0 ? WindVeDevice::Main : WindVeDevice::Auxiliary;
        RAG_ASSIGN_OR_RETURN(
            DeviceCalibration c,
            calibrateDevice(impl->devices[i].instance(), impl->texts.texts,
                            {.slo = s.sloSeconds, .maxConcurrency = s.maxConcurrency, .repeats = s.repeats},
                            [&](const LatencySample& x) {
                              if (onSample) onSample(which, {x.concurrency, x.seconds});
                            },
                            &impl->stop));
        if (i == 0 && c.depth < 1)
          return Status::invalidArgument("one query alone takes " + std::to_string(c.fit.beta) + " s on " + c.device +
                                         ", over the SLO of " + std::to_string(s.sloSeconds) + " s; raise the SLO");
        (i == 0 ? cal.main : cal.auxiliary.emplace()) = profileOf(c);
      }
      return cal;
    };
    Result<WindVeCalibration> r = calibrate();
    if (r) {
      std::lock_guard lock(impl->mutex);
      impl->calibration = *r;
    }
    impl->finished();
    if (onDone) onDone(r);
  });
}

Status WindVeLive::run(const WindVeLoadSettings& s, LoadSink onDone) {
  if (s.clients < 1 || s.clients > 4096)
    return Status::invalidArgument("the load's clients must be in [1, 4096], not " + std::to_string(s.clients));
  if (!std::isfinite(s.seconds) || s.seconds <= 0 || s.seconds > 3600)
    return Status::invalidArgument("the load's duration must be in (0, 3600] seconds, not " + std::to_string(s.seconds));
  if (!std::isfinite(s.busyBackoffMs) || s.busyBackoffMs < 0 || s.busyBackoffMs > 1000 || !(s.windowSeconds > 0))
    return Status::invalidArgument("the BUSY back-off must be in [0, 1000] ms and the window > 0 s");
  if (busy()) return Status::busy("a WindVE calibration or load is in flight; stop it or wait for it to finish");
  const std::optional<WindVeCalibration> cal = calibration();
  if (!cal) return Status::invalidArgument("no queue depths yet: calibrate first (the depths come from the calibration)");
  Impl* impl = m_impl.get();
  // The auxiliary queue only in heterogeneous mode and where its device meets the SLO at all.
  const bool hetero = s.heterogeneous && impl->devices.size() > 1 && cal->auxiliary && cal->auxiliary->depth > 0;
  // The service starts its pinned workers (on a loaded machine that can take a while): on the
  // worker thread, not the caller's.
  return impl->launch([impl, s, cal = *cal, hetero, onDone = std::move(onDone)] {
    auto start = [&]() -> Result<std::shared_ptr<LoadRun>> {
      std::optional<EmbeddingInstance> aux;
      if (hetero) aux = impl->devices[1].instance();
      auto run = std::make_shared<LoadRun>();
      RAG_ASSIGN_OR_RETURN(run->service, EmbeddingService::create(impl->devices[0].instance(), std::move(aux),
                                                                  {.mainDepth = cal.main.depth,
                                                                   .auxDepth = hetero ? cal.auxiliary->depth : 1,
                                                                   .heterogeneous = hetero}));
      run->load = std::make_unique<ClosedLoopLoad>(
          *run->service, impl->texts.texts,
          ClosedLoopParams{.clients = s.clients, .seconds = s.seconds, .busyBackoffSeconds = s.busyBackoffMs / 1000,
                           .windowSeconds = s.windowSeconds, .sloSeconds = cal.sloSeconds});
      return run;
    };
    Result<std::shared_ptr<LoadRun>> started = start();
    if (!started) {
      impl->finished();
      if (onDone) onDone(started.status());
      return;
    }
    const std::shared_ptr<LoadRun> run = *started;
    {
      std::lock_guard lock(impl->mutex);
      impl->lastLoad = run;
    }
    Result<ClosedLoopSummary> r = run->load->run(&impl->stop);
    run->service->shutdown();  // nothing is in flight: the workers end
    Result<WindVeLoadSummary> out = r.status();
    if (r) {
      const EmbeddingServiceStats st = run->service->stats();
      WindVeLoadSummary w;
      w.clients = s.clients;
      w.heterogeneous = hetero;
      w.sloSeconds = cal.sloSeconds;
      w.mainDepth = cal.main.depth;
      w.auxDepth = hetero ? cal.auxiliary->depth : 0;
      w.seconds = r->seconds;
      w.served = r->served;
      w.servedMain = st.main.served;
      w.servedAux = st.auxiliary ? st.auxiliary->served : 0;
      w.busy = r->busy;
      w.servedPerSecond = r->servedPerSecond();
      w.busyShare = r->busyShare();
      w.p50Seconds = r->p50Seconds;
      w.p99Seconds = r->p99Seconds;
      w.maxSeconds = r->maxSeconds;
      w.mainCoreShare = coreShare(st.main);
      w.auxCoreShare = st.auxiliary ? coreShare(*st.auxiliary) : 0;
      w.withinSloShare = r->served > 0 ? static_cast<double>(r->withinSlo) / static_cast<double>(r->served) : 0;
      out = w;
    }
    impl->finished();
    if (onDone) onDone(out);
  });
}

void WindVeLive::stop() { m_impl->stop = true; }

bool WindVeLive::busy() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->active;
}

WindVeSnapshot WindVeLive::snapshot() const {
  std::shared_ptr<LoadRun> run;
  {
    std::lock_guard lock(m_impl->mutex);
    run = m_impl->lastLoad;
  }
  WindVeSnapshot w;
  if (!run) return w;
  const ClosedLoopSnapshot s = run->load->snapshot();
  w.running = s.running;
  w.seconds = s.seconds;
  w.main = queueOf(s.service.main);
  if (s.service.auxiliary) w.auxiliary = queueOf(*s.service.auxiliary);
  w.served = s.served;
  w.busy = s.busy;
  w.failed = s.failed;
  w.servedPerSecond = s.servedPerSecond;
  w.busyPerSecond = s.busyPerSecond;
  w.p50Seconds = s.p50Seconds;
  w.p99Seconds = s.p99Seconds;
  return w;
}

std::optional<WindVeCalibration> WindVeLive::calibration() const {
  std::lock_guard lock(m_impl->mutex);
  return m_impl->calibration;
}

std::string WindVeLive::plan() const { return m_impl->plan; }
std::string WindVeLive::querySource() const { return m_impl->texts.source; }

}  // namespace rag
