// EngineBridge: the workbench's one door to the serving engine. The engine runs on its own
// threads; the bridge turns what it does into queued Qt signals and never lets the GUI thread
// wait on it: creating an engine (loading the model, embedder and index), running a workload
// and saving it to the run history all happen on background threads.
//
//   EngineBridge bridge;
//   connect(&bridge, &EngineBridge::traceEvents, timeline, ...);   // ~30 times a second
//   connect(&bridge, &EngineBridge::requestFinished, table, ...);
//   connect(&bridge, &EngineBridge::kvBlocks, kvHeatmap, ...);      // twice a second
//   bridge.startEngine(config);                                     // -> engineReady / engineFailed
//   bridge.startRun(run);                    // -> runStarted (once recorded), requestFinished..., runFinished
//   bridge.stopRun();                                               // cancels what is live; finished requests stay
//
// Every run is recorded in the run history (rag::RunStore) as it goes: settings at the start,
// each request when it finishes, metrics and the whole trace at the end (also after a stop).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <deque>
#include <functional>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "rag/engine.h"
#include "rag/run_store.h"
#include "rag/trace.h"
#include "rag/workflow.h"

namespace ragwb {

struct EngineConfig {
  std::filesystem::path corpus;
  std::filesystem::path modelDir;     // empty: datasets/models/rag-llama next to the sources
  std::filesystem::path embedderDir;  // empty: datasets/models/rag-embedder
  std::filesystem::path runStore;     // empty: rag::defaultRunStoreLocation()
  rag::ServePolicy policy;
  int64_t nprobe = 128;
  bool prefixCache = true;
  // Block-Attention (rag::ServingParams::blockAttention); with no modelDir given, the shipped
  // block-fine-tuned model datasets/models/rag-llama-block is served when it exists.
  bool blockAttention = false;
  // The prefix cache's eviction policy (rag::ServingParams::evictionPolicy: lru, lfu, pgdsf or
  // lacr) and LACR's α (in [0, 1]; another value fails the engine's load with a message).
  std::string evictionPolicy = "lru";
  double lacrAlpha = 0.2;
  // Where generation runs (rag::ServingParams::device): cpu, cuda or cuda:N; a device that
  // cannot be used fails the engine's load with a message naming the fix.
  std::string device = "cpu";
};

struct RunQuestion {
  std::string text;
  std::vector<std::string> goldAnswers;  // empty for free text
};

struct RunRequest {
  rag::WorkflowGraph graph;
  std::vector<RunQuestion> questions;  // empty: `count` questions of `split`, read on the driver thread
  QString split;             // QA split ("test", "dev", "train"); recorded in the history
  int count = 20;            // questions taken from `split`, spread over its question types
  double rps = 4;            // Poisson arrivals; 0: all at once
  double sloSeconds = 1.0;
};

class EngineBridge : public QObject {
  Q_OBJECT
public:
  explicit EngineBridge(QObject* parent = nullptr);
  ~EngineBridge() override;  // stops a run (its finished requests stay recorded), then the engine

  // Loads (or reloads, e.g. for another policy) the engine in the background.
  void startEngine(const EngineConfig& config);
  bool isEngineReady() const { return m_engine != nullptr; }
  const EngineConfig& config() const { return m_config; }
  std::filesystem::path runStorePath() const;

  // Starts a workload on the engine; false (and runFailed) when no engine or a run is going.
  bool startRun(const RunRequest& run);
  void stopRun();
  bool running() const { return m_running.load(); }

  rag::ServingStats stats() const;
  // Block-Attention's block store (rag::Engine::blockStoreEntries: a copy of the worker's last
  // list, cheap); empty without an engine or a block store.
  std::vector<rag::BlockStoreEntry> blockStoreEntries() const;
  // Asks for the prefix KV tree, taken and decoded off the GUI thread; answered by kvTree (not
  // when no engine is loaded, and at most one request in flight).
  void requestKvTree();
  // The trace collected so far in the current (or last) run, for exports.
  std::vector<rag::TraceEvent> runTrace() const;
  std::vector<rag::TraceLane> lanes() const;

Q_SIGNALS:
  void engineLoading(const QString& what);
  void engineReady(const QString& description);
  void engineFailed(const QString& message);
  void runStarted(qint64 runId, int requests);
  void requestFinished(const rag::RequestRecord& record);
  void runProgress(int finished, int total);
  void runFinished(qint64 runId, const rag::RunMetrics& metrics);
  void runFailed(const QString& message);
  // New trace events since the last emission (drained from the engine's ring).
  void traceEvents(const std::vector<rag::TraceEvent>& events, const std::vector<rag::TraceLane>& lanes);
  // Cluster visits and residency (twice a second while an engine is up).
  void clusterHeat(const rag::ClusterHeat& heat, const rag::ServingStats& stats);
  // Who holds each KV pool block, with the same report's counters (with clusterHeat, and only
  // while something is connected: asking makes the generation worker take the map).
  void kvBlocks(const rag::KvBlockMap& map, const rag::ServingStats& stats);
  void requestEvent(const rag::RequestEvent& event);
  void kvTree(const std::vector<rag::KvTreeNode>& nodes);

private:
  void drainTrace();
  void pollHeat();
  void runDriver(RunRequest run);  // records the run in the history, then plays it
  void joinDriver();
  // A finished request fans out to every view (a few ms of GUI work each): such deliveries run
  // one per pass of the event loop, in order, so that paints and timers run between them even
  // when several requests finish together (posted events would all run in one pass).
  void deliverInTurn(std::function<void()> fn);
  void deliverNext();

  EngineConfig m_config;
  std::shared_ptr<rag::Engine> m_engine;  // shared with the driver thread
  std::atomic<int> m_generation{0};       // engine loads started; stale loads are dropped
  std::thread m_loader;
  std::thread m_driver;
  std::atomic<bool> m_running{false};
  std::atomic<bool> m_stop{false};
  bool m_kvTreeInFlight = false;  // GUI thread only
  QTimer m_traceTimer, m_heatTimer;
  QTimer m_deliverTimer;                          // 0 ms, single shot: the next delivery
  std::deque<std::function<void()>> m_deliveries;  // GUI thread only
  mutable std::mutex m_traceMutex;
  std::vector<rag::TraceEvent> m_runTrace;
  std::vector<rag::TraceLane> m_lanes;
};

}  // namespace ragwb

Q_DECLARE_METATYPE(rag::RequestRecord)
Q_DECLARE_METATYPE(rag::RunMetrics)
Q_DECLARE_METATYPE(rag::ClusterHeat)
Q_DECLARE_METATYPE(rag::KvBlockMap)
Q_DECLARE_METATYPE(rag::ServingStats)
Q_DECLARE_METATYPE(rag::RequestEvent)
