#include "bridge/engine_bridge.h"

#include <QMetaObject>
#include <QMetaMethod>
#include <QPointer>

#include "bridge/background.h"
#include "rag/arrivals.h"
#include "rag/corpus.h"

#include <algorithm>
#include <chrono>

namespace ragwb {

namespace {

// Runs `fn` on `target`'s thread (the GUI thread) unless `target` is gone by then.
template <typename F>
void onGuiThread(QObject* target, F&& fn) {
  QMetaObject::invokeMethod(target, std::forward<F>(fn), Qt::QueuedConnection);
}

void registerMetaTypes() {
  static const bool once = [] {
    qRegisterMetaType<rag::RequestRecord>();
    qRegisterMetaType<rag::RunMetrics>();
    qRegisterMetaType<rag::ClusterHeat>();
    qRegisterMetaType<rag::KvBlockMap>();
    qRegisterMetaType<rag::ServingStats>();
    qRegisterMetaType<rag::RequestEvent>();
    return true;
  }();
  (void)once;
}

}  // namespace

EngineBridge::EngineBridge(QObject* parent) : QObject(parent) {
  registerMetaTypes();
  m_traceTimer.setObjectName(QStringLiteral("traceTimer"));  // named in the stall meter's events
  m_heatTimer.setObjectName(QStringLiteral("heatTimer"));
  m_deliverTimer.setObjectName(QStringLiteral("deliverTimer"));
  m_traceTimer.setInterval(33);
  connect(&m_traceTimer, &QTimer::timeout, this, &EngineBridge::drainTrace);
  m_heatTimer.setInterval(500);
  connect(&m_heatTimer, &QTimer::timeout, this, &EngineBridge::pollHeat);
  m_deliverTimer.setInterval(0);
  m_deliverTimer.setSingleShot(true);
  connect(&m_deliverTimer, &QTimer::timeout, this, &EngineBridge::deliverNext);
}

void EngineBridge::deliverInTurn(std::function<void()> fn) {
  m_deliveries.push_back(std::move(fn));
  if (!m_deliverTimer.isActive()) m_deliverTimer.start();
}

void EngineBridge::deliverNext() {
  if (m_deliveries.empty()) return;
  std::function<void()> fn = std::move(m_deliveries.front());
  m_deliveries.pop_front();
  if (!m_deliveries.empty()) m_deliverTimer.start();  // the rest after this pass's paints
  fn();
}

EngineBridge::~EngineBridge() {
  stopRun();
  joinDriver();
  if (m_loader.joinable()) m_loader.join();
  m_engine.reset();  // cancels anything left and stops the engine's threads
}

std::filesystem::path EngineBridge::runStorePath() const {
  return m_config.runStore.empty() ? rag::defaultRunStoreLocation() : m_config.runStore;
}

void EngineBridge::startEngine(const EngineConfig& config) {
  if (m_running.load()) {
    Q_EMIT engineFailed(tr("Stop the running workload before reloading the engine."));
    return;
  }
  m_config = config;  // as asked: an empty modelDir stays "the default model of the mode"
  std::filesystem::path modelDir = m_config.modelDir;
  if (modelDir.empty() && m_config.blockAttention) {
    const std::filesystem::path block = rag::defaultModelDirectory().parent_path() / "rag-llama-block";
    std::error_code ec;
    if (std::filesystem::exists(block / "config.json", ec)) modelDir = block;
  }
  if (modelDir.empty()) modelDir = rag::defaultModelDirectory();
  if (m_config.embedderDir.empty()) m_config.embedderDir = rag::defaultEmbedderDirectory();
  m_traceTimer.stop();
  m_heatTimer.stop();
  m_engine.reset();
  if (m_loader.joinable()) m_loader.join();
  const int generation = ++m_generation;
  Q_EMIT engineLoading(tr("Loading the model, the embedder and the passage index (%1)…")
                           .arg(QString::fromStdString(rag::servePolicyName(m_config.policy))));
  rag::EngineParams p;
  p.corpus = m_config.corpus;
  p.workerThreads = 1;
  p.traceCapacity = 1u << 18;
  p.serving.modelDir = modelDir;
  p.serving.device = m_config.device;
  p.serving.embedderDir = m_config.embedderDir;
  p.serving.policy = m_config.policy;
  p.serving.nprobe = m_config.nprobe;
  p.serving.prefixCache = m_config.prefixCache;
  p.serving.blockAttention = m_config.blockAttention;
  p.serving.evictionPolicy = m_config.evictionPolicy;
  p.serving.lacrAlpha = m_config.lacrAlpha;
  QPointer<EngineBridge> self(this);
  p.onEvent = [self](const rag::RequestEvent& e) {
    if (e.kind == rag::RequestEvent::Kind::Tokens) return;  // per-token traffic stays off the GUI queue
    if (!self) return;
    onGuiThread(self.data(), [self, e] {
      if (self) Q_EMIT self->requestEvent(e);
    });
  };
  m_loader = std::thread([self, p, generation] {
    // Every thread of the engine starts here (Engine::create starts the scheduler, the workers
    // and their pools) or on the driver thread, so lowering both puts the whole engine below the
    // GUI thread (bridge/background.h): on busy cores the GUI thread then gets one when it wakes
    // instead of waiting out a worker's time slice, which under Xvfb on two shared cores was most
    // of the longest stalls. Engine throughput only changes while the GUI thread wants the CPU.
    runBelowTheGuiThread();
    auto engine = rag::Engine::create(p);
    if (!self) return;
    std::shared_ptr<rag::Engine> shared;
    QString error;
    if (engine) shared = std::shared_ptr<rag::Engine>(std::move(*engine));
    else error = QString::fromStdString(engine.status().message());
    onGuiThread(self.data(), [self, shared, error, generation] {
      if (!self || generation != self->m_generation.load()) return;  // a newer load superseded this one
      if (!shared) {
        Q_EMIT self->engineFailed(error);
        return;
      }
      self->m_engine = shared;
      self->m_lanes = shared->traceLanes();
      self->m_traceTimer.start();
      self->m_heatTimer.start();
      Q_EMIT self->engineReady(QString::fromStdString(rag::servePolicyName(self->m_config.policy)));
    });
  });
}

std::vector<rag::BlockStoreEntry> EngineBridge::blockStoreEntries() const {
  return m_engine ? m_engine->blockStoreEntries() : std::vector<rag::BlockStoreEntry>{};
}

rag::ServingStats EngineBridge::stats() const { return m_engine ? m_engine->servingStats() : rag::ServingStats{}; }

std::vector<rag::TraceEvent> EngineBridge::runTrace() const {
  std::lock_guard lock(m_traceMutex);
  return m_runTrace;
}

std::vector<rag::TraceLane> EngineBridge::lanes() const { return m_lanes; }

void EngineBridge::drainTrace() {
  if (!m_engine) return;
  std::vector<rag::TraceEvent> fresh;
  if (m_engine->drainTrace(fresh) == 0) return;
  m_lanes = m_engine->traceLanes();
  {
    std::lock_guard lock(m_traceMutex);
    m_runTrace.insert(m_runTrace.end(), fresh.begin(), fresh.end());
  }
  Q_EMIT traceEvents(fresh, m_lanes);
}

void EngineBridge::requestKvTree() {
  if (!m_engine || m_kvTreeInFlight) return;
  m_kvTreeInFlight = true;
  QPointer<EngineBridge> self(this);
  // On Qt's pool, which the application waits for when it quits (the task may hold the engine).
  (void)runInBackground([self, engine = m_engine] {
    auto nodes = std::make_shared<std::vector<rag::KvTreeNode>>(engine->kvTreeSnapshot());
    if (!self) return;
    onGuiThread(self.data(), [self, nodes] {
      if (!self) return;
      self->m_kvTreeInFlight = false;
      Q_EMIT self->kvTree(*nodes);
    });
  });
}

void EngineBridge::pollHeat() {
  if (!m_engine) return;
  const rag::ServingStats stats = m_engine->servingStats();
  Q_EMIT clusterHeat(m_engine->clusterHeat(), stats);
  if (isSignalConnected(QMetaMethod::fromSignal(&EngineBridge::kvBlocks))) Q_EMIT kvBlocks(m_engine->kvBlockMap(), stats);
}

bool EngineBridge::startRun(const RunRequest& run) {
  if (!m_engine) {
    Q_EMIT runFailed(tr("The engine is not loaded yet."));
    return false;
  }
  if (m_running.load()) {
    Q_EMIT runFailed(tr("A workload is already running; stop it first."));
    return false;
  }
  if (run.questions.empty() && (run.split.isEmpty() || run.count < 1)) {
    Q_EMIT runFailed(tr("No questions to run: give questions, or a QA split and a count."));
    return false;
  }
  if (rag::Status v = run.graph.validate(); !v) {
    Q_EMIT runFailed(QString::fromStdString(v.message()));
    return false;
  }
  joinDriver();
  {
    std::lock_guard lock(m_traceMutex);
    m_runTrace.clear();
  }
  drainTrace();  // what happened before the run belongs to no run
  {
    std::lock_guard lock(m_traceMutex);
    m_runTrace.clear();
  }
  m_stop = false;
  m_running = true;
  // The history file is opened and the run recorded on the driver thread (a SQLite open and an
  // insert can wait on the disk); runStarted follows from there with the run's id.
  m_driver = std::thread([this, run] {
    runBelowTheGuiThread();
    runDriver(run);
  });
  return true;
}

void EngineBridge::stopRun() { m_stop = true; }

void EngineBridge::joinDriver() {
  if (m_driver.joinable()) m_driver.join();
}

// On the driver thread: Poisson arrivals, then every answer recorded as it comes.
void EngineBridge::runDriver(RunRequest run) {
  std::shared_ptr<rag::Engine> engine = m_engine;
  QPointer<EngineBridge> self(this);
  auto fail = [&](const QString& message) {
    onGuiThread(this, [self, message] {
      if (self) Q_EMIT self->runFailed(message);
    });
  };
  auto store = rag::RunStore::open(runStorePath());
  if (!store) {
    fail(QString::fromStdString(store.status().message()));
    m_running = false;
    return;
  }
  rag::RunSettings settings;
  settings.workflow = run.graph.name();
  settings.workflowJson = run.graph.toJson();
  settings.mode = rag::servePolicyName(m_config.policy);
  settings.split = run.split.toStdString();
  settings.rps = run.rps;
  settings.requests = run.questions.empty() ? run.count : static_cast<int64_t>(run.questions.size());
  settings.nprobe = m_config.nprobe;
  settings.sloSeconds = run.sloSeconds;
  rag::Result<int64_t> begun = store->beginRun(settings);
  if (!begun) {
    fail(QString::fromStdString(begun.status().message()));
    m_running = false;
    return;
  }
  const int64_t runId = *begun;
  onGuiThread(this, [self, runId, total = static_cast<int>(settings.requests)] {
    if (self) Q_EMIT self->runStarted(runId, total);
  });
  if (run.questions.empty()) {
    // `count` questions of the split, spread evenly over its ids (ids are grouped by type).
    rag::Result<std::vector<int64_t>> ids = engine->listQa(run.split.toStdString()).get();
    if (!ids || ids->empty()) {
      fail(ids ? tr("The %1 split has no questions.").arg(run.split) : QString::fromStdString(ids.status().message()));
      m_running = false;
      return;
    }
    const size_t n = std::min(ids->size(), static_cast<size_t>(run.count));
    for (size_t k = 0; k < n; ++k) {
      rag::Result<rag::QaItem> item = engine->lookupQa((*ids)[k * ids->size() / n]).get();
      if (item) run.questions.push_back({item->question, item->answers});
    }
  }
  const auto graph = std::make_shared<const rag::WorkflowGraph>(run.graph);
  // Arrivals from the engine's one Poisson source (rag/arrivals.h), seeded by the run id, so a
  // run is reproducible on any standard library; rps <= 0 submits everything at once.
  rag::ArrivalPacer pacer(rag::poissonArrivals(run.questions.size(), run.rps, static_cast<uint64_t>(runId)));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::pair<size_t, rag::RequestHandle>> live;
  std::vector<rag::RequestRecord> records;
  auto record = [&](size_t i, const rag::RequestHandle& h) {
    rag::RequestRecord rec;
    rec.requestId = h.id();
    rec.question = run.questions[i].text;
    rec.goldAnswers = run.questions[i].goldAnswers;
    rag::Result<rag::RequestResult> r = h.wait();
    rec.ok = r.isOk();
    if (r) {
      rec.answer = r->answer;
      rec.latencySeconds = r->latencySeconds;
      rec.speculations = r->speculations;
      rec.specAccepted = r->specAccepted;
      rec.rollbacks = r->rollbacks;
      rec.stages = r->stages;
      rec.correct = !rec.goldAnswers.empty() && rag::answerContainsGold(rec.answer, rec.goldAnswers);
    } else {
      rec.error = r.status().message();
    }
    if (rag::Status s = store->addRequests(runId, std::span<const rag::RequestRecord>(&rec, 1)); !s)
      fail(QString::fromStdString(s.message()));
    records.push_back(rec);
    const int done = static_cast<int>(records.size()), total = static_cast<int>(run.questions.size());
    onGuiThread(this, [self, rec, done, total] {
      if (!self) return;
      self->deliverInTurn([self, rec, done, total] {
        Q_EMIT self->requestFinished(rec);
        Q_EMIT self->runProgress(done, total);
      });
    });
  };
  bool cancelled = false;
  while (!pacer.finished() || !live.empty()) {
    if (m_stop.load() && !cancelled) {  // once: what is live is cancelled, what is unsent never goes
      for (auto& [i, h] : live) (void)engine->cancel(h.id());
      pacer.stop();
      cancelled = true;
    }
    if (pacer.due()) {
      const size_t i = pacer.next();
      pacer.advance();
      auto h = engine->submit(run.questions[i].text, *graph);
      if (h) {
        live.emplace_back(i, *h);
      } else {
        rag::RequestRecord rec;
        rec.question = run.questions[i].text;
        rec.ok = false;
        rec.error = h.status().message();
        records.push_back(rec);
      }
      continue;
    }
    // Collect whatever finished; wait a little when nothing did.
    bool any = false;
    for (size_t k = 0; k < live.size();) {
      if (live[k].second.done()) {
        record(live[k].first, live[k].second);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        any = true;
      } else {
        ++k;
      }
    }
    if (!any)
      std::this_thread::sleep_for(std::chrono::nanoseconds(
          pacer.finished() ? 2'000'000 : std::clamp<uint64_t>(pacer.nsUntilDue(), 1, 2'000'000)));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rag::RunMetrics metrics = rag::computeRunMetrics(records, static_cast<int64_t>(run.questions.size()), run.sloSeconds, wall);
  // The trace: what the GUI drained during the run, plus what is still in the ring (the last
  // requests' spans), which the live views get too.
  std::vector<rag::TraceEvent> fresh, trace;
  engine->drainTrace(fresh);
  std::vector<rag::TraceLane> lanes = engine->traceLanes();
  {
    std::lock_guard lock(m_traceMutex);
    m_runTrace.insert(m_runTrace.end(), fresh.begin(), fresh.end());
    trace = m_runTrace;
  }
  if (!fresh.empty())
    onGuiThread(this, [self, fresh, lanes] {
      if (self) Q_EMIT self->traceEvents(fresh, lanes);
    });
  if (rag::Status s = store->finishRun(runId, metrics, trace, lanes); !s) fail(QString::fromStdString(s.message()));
  m_running = false;
  onGuiThread(this, [self, runId, metrics] {  // after the requests still waiting their turn
    if (self) self->deliverInTurn([self, runId, metrics] { Q_EMIT self->runFinished(runId, metrics); });
  });
}

}  // namespace ragwb
