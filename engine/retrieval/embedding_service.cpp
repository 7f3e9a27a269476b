#include "retrieval/embedding_service.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/clock.h"
#include "core/thread_pool.h"

namespace rag::retrieval {

std::string_view deviceKindName(DeviceKind kind) { return kind == DeviceKind::Cuda ? "cuda" : "cpu"; }

std::string_view routeName(Route route) {
  switch (route) {
    case Route::Main: return "main";
    case Route::Auxiliary: return "auxiliary";
    case Route::Busy: return "busy";
    case Route::Refused: return "refused";
  }
  return "unknown";
}

// ---- cores -------------------------------------------------------------------------------------

Result<std::vector<int>> parseCoreList(std::string_view text) {
  std::vector<int> cores;
  auto number = [](std::string_view s, int& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size() && out >= 0 && out < CPU_SETSIZE;
  };
  auto bad = [&](std::string_view part) {
    return Status::invalidArgument("bad core list '" + std::string(text) + "' at '" + std::string(part) +
                                   "'; write cores as 0, 0-3 or 0,2,5-7 (numbers below " +
                                   std::to_string(CPU_SETSIZE) + ")");
  };
  if (text.empty()) return bad(text);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view part = text.substr(start, comma - start);
    const size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!number(part, lo)) return bad(part);
      hi = lo;
    } else if (!number(part.substr(0, dash), lo) || !number(part.substr(dash + 1), hi) || hi < lo) {
      return bad(part);
    }
    for (int c = lo; c <= hi; ++c) cores.push_back(c);
    start = comma + 1;
  }
  std::sort(cores.begin(), cores.end());
  cores.erase(std::unique(cores.begin(), cores.end()), cores.end());
  return cores;
}

std::string formatCoreList(std::span<const int> cores) {
  std::string out;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cores[i]);
    if (j > i) out += '-' + std::to_string(cores[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> allowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c) cores.push_back(static_cast<int>(c));
    return cores;
  }
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cores.push_back(c);
  return cores;
}

namespace {

Status checkAllowed(std::span<const int> cores, const std::vector<int>& allowed, std::string_view what) {
  for (int c : cores)
    if (!std::binary_search(allowed.begin(), allowed.end(), c))
      return Status::invalidArgument(std::string(what) + " core " + std::to_string(c) +
                                     " is not available to this process (allowed: " +
                                     formatCoreList(allowed) + ")");
  return Status::ok();
}

DeviceSpec cpuDevice(std::vector<int> cores) {
  DeviceSpec d{DeviceKind::Cpu, std::move(cores), ""};
  d.name = "cpu[" + formatCoreList(d.cores) + "]";
  return d;
}

}  // namespace

Status pinCurrentThread(std::span<const int> cores) {
  if (cores.empty()) return Status::ok();
  RAG_RETURN_IF_ERROR(checkAllowed(cores, allowedCores(), "pinning:"));
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) CPU_SET(c, &set);
  if (int err = pthread_setaffinity_np(pthread_self(), sizeof set, &set); err != 0)
    return Status::invalidArgument("cannot pin a thread to cores " + formatCoreList(cores) +
                                   " (pthread_setaffinity_np error " + std::to_string(err) + ")");
  return Status::ok();
}

Result<DevicePlan> detectDevices(const DeviceDetectParams& p) {
  std::vector<int> allowed = p.allowedCores;
  std::sort(allowed.begin(), allowed.end());
  if (allowed.empty()) return Status::invalidArgument("device detection needs the list of usable cores");
  RAG_RETURN_IF_ERROR(checkAllowed(p.mainCores, allowed, "--main-cores"));
  RAG_RETURN_IF_ERROR(checkAllowed(p.auxCores, allowed, "--aux-cores"));
  DevicePlan plan;
  if (p.cudaAvailable) {
    plan.main = {DeviceKind::Cuda, p.mainCores, "cuda:0"};
    if (p.heterogeneous) {
      plan.auxiliary = cpuDevice(p.auxCores.empty() ? allowed : p.auxCores);
      plan.heterogeneous = true;
      plan.note = "GPU main instance, CPU auxiliary instance on cores " + formatCoreList(plan.auxiliary->cores);
    } else {
      plan.note = "GPU main instance only (heterogeneous mode off)";
    }
    return plan;
  }
  std::vector<int> mainCores = p.mainCores, auxCores = p.auxCores;
  if (mainCores.empty() && auxCores.empty()) {
    if (!p.heterogeneous || allowed.size() < 2) {
      mainCores = allowed;
    } else {
      const auto half = static_cast<std::ptrdiff_t>(allowed.size() / 2);
      mainCores.assign(allowed.begin(), allowed.begin() + half);
      auxCores.assign(allowed.begin() + half, allowed.end());
    }
  } else if (mainCores.empty() || auxCores.empty()) {
    std::vector<int>& missing = mainCores.empty() ? mainCores : auxCores;
    const std::vector<int>& given = mainCores.empty() ? auxCores : mainCores;
    std::set_difference(allowed.begin(), allowed.end(), given.begin(), given.end(), std::back_inserter(missing));
  }
  std::vector<int> common;
  std::set_intersection(mainCores.begin(), mainCores.end(), auxCores.begin(), auxCores.end(), std::back_inserter(common));
  if (p.heterogeneous && !auxCores.empty() && !common.empty())
    return Status::invalidArgument("--main-cores and --aux-cores share core(s) " + formatCoreList(common) +
                                   "; on a CPU-only machine the two instances need disjoint core sets");
  if (mainCores.empty())
    return Status::invalidArgument("no core is left for the main instance; give --main-cores");
  plan.main = cpuDevice(mainCores);
  if (!p.heterogeneous) {
    plan.note = "no GPU: one CPU main instance on cores " + formatCoreList(mainCores) + " (heterogeneous mode off)";
  } else if (auxCores.empty()) {
    plan.note = "no GPU and a single core: one CPU main instance, heterogeneous mode forced off";
  } else {
    plan.auxiliary = cpuDevice(auxCores);
    plan.heterogeneous = true;
    plan.note = "no GPU: main = CPU instance on cores " + formatCoreList(mainCores) +
                ", auxiliary = CPU instance on cores " + formatCoreList(auxCores);
  }
  return plan;
}

// ---- queue manager -----------------------------------------------------------------------------

Route chooseRoute(int64_t mainLoad, int64_t mainDepth, int64_t auxLoad, int64_t auxDepth, bool heterogeneous) {
  if (mainLoad < mainDepth) return Route::Main;
  if (!heterogeneous) return Route::Busy;
  return auxLoad < auxDepth ? Route::Auxiliary : Route::Busy;
}

namespace {

struct Query {
  std::string text;
  std::promise<Result<std::vector<float>>> answer;
};

// One device's queue and its worker. Guarded by the service's mutex, except the embedder, which
// only the worker touches.
struct Lane {
  EmbeddingInstance instance;
  std::deque<Query> queue;
  QueueStats stats;
  std::condition_variable wake;
  std::thread worker;
  int64_t load() const { return stats.queued + stats.running; }
};

double threadCpuSeconds() { return static_cast<double>(threadCpuNs()) * 1e-9; }

template <typename T>
std::future<T> readyFuture(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
}

}  // namespace

struct EmbeddingService::Impl {
  EmbeddingServiceParams params;
  int64_t dim = 0;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<Lane>> lanes;  // [0] main, [1] auxiliary when given
  int64_t busy = 0, refused = 0;
  bool stopping = false;

  bool heterogeneous() const { return params.heterogeneous && lanes.size() > 1; }
  void work(Lane& lane, std::promise<Status>& started);
};

void EmbeddingService::Impl::work(Lane& lane, std::promise<Status>& started) {
  setCurrentThreadName("embed-" + lane.instance.name);
  Status pinned = pinCurrentThread(lane.instance.cores);
  started.set_value(pinned);
  if (!pinned) return;
  std::vector<Query> batch;
  std::vector<std::string> texts;
  for (;;) {
    {
      std::unique_lock lock(mutex);
      lane.wake.wait(lock, [&] { return stopping || !lane.queue.empty(); });
      if (lane.queue.empty()) return;  // stopping; shutdown() answered what was queued
      const auto n = std::min<int64_t>(params.maxBatch, static_cast<int64_t>(lane.queue.size()));
      batch.clear();
      for (int64_t i = 0; i < n; ++i) {
        batch.push_back(std::move(lane.queue.front()));
        lane.queue.pop_front();
      }
      lane.stats.queued -= n;
      lane.stats.running += n;
      lane.stats.batches += 1;
      lane.stats.largestBatch = std::max(lane.stats.largestBatch, n);
    }
    texts.clear();
    for (Query& q : batch) texts.push_back(std::move(q.text));
    const Stopwatch wall;
    const double cpu0 = threadCpuSeconds();
    Result<std::vector<float>> out = lane.instance.embedder->embed(texts);
    const double cpu = threadCpuSeconds() - cpu0, seconds = wall.elapsedSeconds();
    if (out && out->size() != texts.size() * static_cast<size_t>(dim))
      out = Status::internal("embedder " + lane.instance.name + " returned " + std::to_string(out->size()) +
                             " values for " + std::to_string(texts.size()) + " texts of dimension " +
                             std::to_string(dim));
    // The load drops before the answers are set, so whoever sees an answer may submit again
    // and find the room it left.
    {
      std::lock_guard lock(mutex);
      lane.stats.running -= static_cast<int64_t>(batch.size());
      lane.stats.embedSeconds += seconds;
      lane.stats.embedCpuSeconds += cpu;
      (out ? lane.stats.served : lane.stats.failed) += static_cast<int64_t>(batch.size());
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!out) {
        batch[i].answer.set_value(out.status().withContext("embedding on " + lane.instance.name));
        continue;
      }
      const auto d = static_cast<size_t>(dim);
      batch[i].answer.set_value(std::vector<float>(out->begin() + static_cast<std::ptrdiff_t>(i * d),
                                                   out->begin() + static_cast<std::ptrdiff_t>((i + 1) * d)));
    }
  }
}

EmbeddingService::EmbeddingService(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

EmbeddingService::~EmbeddingService() { shutdown(); }

Result<std::unique_ptr<EmbeddingService>> EmbeddingService::create(EmbeddingInstance main,
                                                                   std::optional<EmbeddingInstance> auxiliary,
                                                                   const EmbeddingServiceParams& params) {
  if (!main.embedder) return Status::invalidArgument("the embedding service needs a main embedder");
  if (params.mainDepth < 1) return Status::invalidArgument("the main queue depth must be at least 1");
  if (params.maxBatch < 1) return Status::invalidArgument("the embedding batch (maxBatch) must be at least 1");
  if (auxiliary) {
    if (!auxiliary->embedder) return Status::invalidArgument("the auxiliary instance has no embedder");
    if (params.auxDepth < 1) return Status::invalidArgument("the auxiliary queue depth must be at least 1");
    if (auxiliary->embedder->dim() != main.embedder->dim())
      return Status::invalidArgument("the main and auxiliary embedders differ in dimension (" +
                                     std::to_string(main.embedder->dim()) + " vs " +
                                     std::to_string(auxiliary->embedder->dim()) + "); load the same model on both");
  }
  auto impl = std::make_unique<Impl>();
  impl->params = params;
  impl->dim = main.embedder->dim();
  for (EmbeddingInstance* inst : {&main, auxiliary ? &*auxiliary : nullptr}) {
    if (!inst) continue;
    auto lane = std::make_unique<Lane>();
    lane->stats.device = inst->name;
    lane->stats.depth = impl->lanes.empty() ? params.mainDepth : params.auxDepth;
    lane->instance = std::move(*inst);
    impl->lanes.push_back(std::move(lane));
  }
  std::unique_ptr<EmbeddingService> service(new EmbeddingService(std::move(impl)));
  Impl& s = *service->m_impl;
  for (auto& lane : s.lanes) {
    std::promise<Status> started;
    std::future<Status> ready = started.get_future();
    lane->worker = std::thread([&s, l = lane.get(), p = std::move(started)]() mutable { s.work(*l, p); });
    if (Status st = ready.get(); !st) return st.withContext("starting the worker of " + lane->instance.name);
  }
  return service;
}

Submission EmbeddingService::submit(std::string text) {
  Impl& s = *m_impl;
  Submission sub;
  if (text.empty()) {
    std::lock_guard lock(s.mutex);
    ++s.refused;
    sub.result = readyFuture<Result<std::vector<float>>>(
        Status::invalidArgument("the query text is empty; an embedding needs at least one token"));
    return sub;
  }
  std::unique_lock lock(s.mutex);
  if (s.stopping) {
    ++s.refused;
    sub.result = readyFuture<Result<std::vector<float>>>(
        Status::cancelled("the embedding service has shut down"));
    return sub;
  }
  Lane& main = *s.lanes[0];
  Lane* aux = s.lanes.size() > 1 ? s.lanes[1].get() : nullptr;
  sub.route = chooseRoute(main.load(), main.stats.depth, aux ? aux->load() : 0, aux ? aux->stats.depth : 0,
                          s.heterogeneous());
  if (sub.route == Route::Busy) {
    ++s.busy;
    ++main.stats.full;
    std::string why = "main queue (" + main.instance.name + ") full at depth " + std::to_string(main.stats.depth);
    if (s.heterogeneous()) {
      ++aux->stats.full;
      why += " and auxiliary queue (" + aux->instance.name + ") full at depth " + std::to_string(aux->stats.depth);
    } else {
      why += aux ? " and heterogeneous mode is off" : " and there is no auxiliary device";
    }
    sub.result = readyFuture<Result<std::vector<float>>>(Status::busy(why + "; try again later"));
    return sub;
  }
  if (sub.route == Route::Auxiliary) ++main.stats.full;
  Lane& lane = sub.route == Route::Main ? main : *aux;
  Query q{std::move(text), {}};
  sub.result = q.answer.get_future();
  lane.queue.push_back(std::move(q));
  ++lane.stats.queued;
  ++lane.stats.accepted;
  lock.unlock();
  lane.wake.notify_one();
  return sub;
}

void EmbeddingService::shutdown() {
  Impl& s = *m_impl;
  std::vector<Query> dropped;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopping) return;
    s.stopping = true;
    for (auto& lane : s.lanes) {
      for (Query& q : lane->queue) dropped.push_back(std::move(q));
      lane->stats.failed += static_cast<int64_t>(lane->queue.size());
      lane->stats.queued = 0;
      lane->queue.clear();
    }
  }
  for (Query& q : dropped)
    q.answer.set_value(Status::cancelled("the embedding service shut down before this query ran"));
  for (auto& lane : s.lanes) {
    lane->wake.notify_all();
    if (lane->worker.joinable()) lane->worker.join();
  }
}

EmbeddingServiceStats EmbeddingService::stats() const {
  const Impl& s = *m_impl;
  std::lock_guard lock(s.mutex);
  EmbeddingServiceStats out;
  out.main = s.lanes[0]->stats;
  if (s.lanes.size() > 1) out.auxiliary = s.lanes[1]->stats;
  out.heterogeneous = s.heterogeneous();
  out.busy = s.busy;
  out.refused = s.refused;
  return out;
}

int64_t EmbeddingService::dim() const { return m_impl->dim; }
bool EmbeddingService::heterogeneous() const { return m_impl->heterogeneous(); }

}  // namespace rag::retrieval
