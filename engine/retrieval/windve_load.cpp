#include "retrieval/windve_load.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <thread>

#include "core/clock.h"

namespace rag::retrieval {

namespace {

bool stopped(const std::atomic<bool>* stop) { return stop && stop->load(std::memory_order_relaxed); }

Status checkSlo(double slo) {
  if (!std::isfinite(slo) || slo <= 0)
    return Status::invalidArgument("the SLO must be a positive number of seconds, not " + std::to_string(slo));
  return Status::ok();
}

}  // namespace

Result<DeviceCalibration> calibrateDevice(const EmbeddingInstance& instance, std::span<const std::string> texts,
                                          const CalibrationParams& params,
                                          const std::function<void(const LatencySample&)>& onSample,
                                          const std::atomic<bool>* stop) {
  RAG_RETURN_IF_ERROR(checkSlo(params.slo));
  if (params.maxConcurrency < 2)
    return Status::invalidArgument("the calibration's largest burst must be at least 2 (the fit needs two levels), not " +
                                   std::to_string(params.maxConcurrency));
  if (params.repeats < 1) return Status::invalidArgument("the calibration needs at least 1 burst per level");
  if (texts.empty()) return Status::invalidArgument("the calibration needs query texts");
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingService> svc,
                       EmbeddingService::create(instance, std::nullopt,
                                                {.mainDepth = params.maxConcurrency, .heterogeneous = false,
                                                 .maxBatch = params.maxBatch}));
  const Status cancelled = Status::cancelled("the calibration of " + instance.name + " was stopped");
  if (stopped(stop)) return cancelled;
  // Every text a burst will use once, untimed: the tokenizer's word cache and the allocator warm up.
  const auto warm = std::min<int64_t>(static_cast<int64_t>(texts.size()), params.maxConcurrency);
  RAG_RETURN_IF_ERROR(timeBurst(*svc, texts, warm).status().withContext("warming up " + instance.name));
  const MeasureLatency measure = medianOf(
      [&](int64_t c) -> Result<double> {
        if (stopped(stop)) return cancelled;
        return timeBurst(*svc, texts, c);
      },
      params.repeats);
  DeviceCalibration out;
  out.device = instance.name;
  RAG_ASSIGN_OR_RETURN(out.samples, profileLevels(
                                        [&](int64_t c) -> Result<double> {
                                          RAG_ASSIGN_OR_RETURN(double s, measure(c));
                                          if (onSample) onSample({c, s});
                                          return s;
                                        },
                                        {.slo = params.slo, .maxConcurrency = params.maxConcurrency}));
  RAG_ASSIGN_OR_RETURN(out.fit, fitLatency(out.samples));
  out.depth = depthWithinSlo(out.fit, params.slo, params.maxConcurrency);
  return out;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

ClosedLoopLoad::ClosedLoopLoad(EmbeddingService& service, std::span<const std::string> texts, ClosedLoopParams params)
    : m_service(service), m_texts(texts), m_params(params) {}

Result<ClosedLoopSummary> ClosedLoopLoad::run(const std::atomic<bool>* stop) {
  const ClosedLoopParams& p = m_params;
  if (p.clients < 1) return Status::invalidArgument("the load needs at least 1 client, not " + std::to_string(p.clients));
  if (!std::isfinite(p.seconds) || p.seconds <= 0)
    return Status::invalidArgument("the load's duration must be a positive number of seconds, not " + std::to_string(p.seconds));
  if (!std::isfinite(p.busyBackoffSeconds) || p.busyBackoffSeconds < 0 || !(p.windowSeconds > 0))
    return Status::invalidArgument("the BUSY back-off must be >= 0 and the window > 0 seconds");
  if (m_texts.empty()) return Status::invalidArgument("the load needs query texts");

  struct Client {
    std::future<Result<std::vector<float>>> pending;
    bool waiting = false;
    double sentAt = 0, nextAt = 0;
  };
  std::vector<Client> clients(static_cast<size_t>(p.clients));
  size_t nextText = 0;
  int64_t submitted = 0, routedMain = 0, routedAux = 0, busy = 0, failed = 0;
  std::vector<double> latencies;
  std::vector<Answer> fresh;
  Status error;
  const Stopwatch clock;
  double lastPublish = -1;
  for (;;) {
    const double now = clock.elapsedSeconds();
    const bool ending = now >= p.seconds || stopped(stop) || !error.isOk();
    bool inFlight = false;
    for (Client& c : clients) {
      if (c.waiting) {
        if (c.pending.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
          inFlight = true;
          continue;
        }
        Result<std::vector<float>> r = c.pending.get();
        c.waiting = false;
        c.nextAt = clock.elapsedSeconds();
        if (r) {
          latencies.push_back(c.nextAt - c.sentAt);
          fresh.push_back({c.nextAt, c.nextAt - c.sentAt});
        } else {
          ++failed;
          if (error.isOk()) error = r.status();
        }
      }
      if (ending || !error.isOk() || now < c.nextAt) continue;
      Submission s = m_service.submit(m_texts[nextText++ % m_texts.size()]);
      ++submitted;
      if (s.route == Route::Busy) {  // answered at once; the client backs off
        ++busy;
        c.nextAt = now + p.busyBackoffSeconds;
        continue;
      }
      if (s.route == Route::Refused) {
        ++failed;
        error = s.result.get().status();
        continue;
      }
      ++(s.route == Route::Main ? routedMain : routedAux);
      c.pending = std::move(s.result);
      c.waiting = true;
      c.sentAt = clock.elapsedSeconds();
      inFlight = true;
    }
    const bool done = ending && !inFlight;
    if (done || now - lastPublish >= 0.01) {
      publish(clock.elapsedSeconds(), fresh, submitted, routedMain, routedAux, busy, failed, !done);
      lastPublish = now;
    }
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!error.isOk()) return error.withContext("the closed-loop load");
  ClosedLoopSummary s;
  s.seconds = clock.elapsedSeconds();
  s.clients = p.clients;
  s.submitted = submitted;
  s.routedMain = routedMain;
  s.routedAux = routedAux;
  s.served = static_cast<int64_t>(latencies.size());
  s.busy = busy;
  for (double l : latencies) {
    s.maxSeconds = std::max(s.maxSeconds, l);
    if (p.sloSeconds > 0 && l <= p.sloSeconds) ++s.withinSlo;
  }
  s.p50Seconds = percentile(latencies, 0.5);
  s.p99Seconds = percentile(std::move(latencies), 0.99);
  return s;
}

void ClosedLoopLoad::publish(double now, std::vector<Answer>& fresh, int64_t submitted, int64_t routedMain,
                             int64_t routedAux, int64_t busy, int64_t failed, bool running) {
  std::lock_guard lock(m_mutex);
  ClosedLoopSnapshot& t = m_totals;
  t.running = running;
  t.seconds = now;
  t.submitted = submitted;
  t.routedMain = routedMain;
  t.routedAux = routedAux;
  t.served += static_cast<int64_t>(fresh.size());
  t.busy = busy;
  t.failed = failed;
  m_window.insert(m_window.end(), fresh.begin(), fresh.end());
  fresh.clear();
  const double from = now - m_params.windowSeconds;
  while (!m_window.empty() && m_window.front().at < from) m_window.pop_front();
  m_checkpoints.push_back({now, t.served, busy});
  // The front stays the last checkpoint at or before the window's start: the rates span it all.
  while (m_checkpoints.size() >= 2 && m_checkpoints[1].at <= from) m_checkpoints.pop_front();
}

ClosedLoopSnapshot ClosedLoopLoad::snapshot() const {
  ClosedLoopSnapshot s;
  std::vector<double> window;
  {
    std::lock_guard lock(m_mutex);
    s = m_totals;
    window.reserve(m_window.size());
    for (const Answer& a : m_window) window.push_back(a.latency);
    if (m_checkpoints.size() >= 2) {
      const Checkpoint& a = m_checkpoints.front();
      const Checkpoint& b = m_checkpoints.back();
      if (b.at > a.at) {
        s.servedPerSecond = static_cast<double>(b.served - a.served) / (b.at - a.at);
        s.busyPerSecond = static_cast<double>(b.busy - a.busy) / (b.at - a.at);
      }
    }
  }
  s.windowServed = static_cast<int64_t>(window.size());
  s.p50Seconds = percentile(window, 0.5);
  s.p99Seconds = percentile(std::move(window), 0.99);
  s.service = m_service.stats();
  return s;
}

}  // namespace rag::retrieval
