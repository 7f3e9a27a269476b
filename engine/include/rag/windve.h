// WindVE live for the workbench (papers/windve.txt §3.2, §4): the embedding service with a main
// and an auxiliary instance of the embedder, each behind a queue whose depth is the concurrency
// its device answers within the latency SLO, and a load of closed-loop clients against it, so a
// user watches peak load spill from the main queue onto the auxiliary one and, past both, come
// back BUSY.
//
//   RAG_ASSIGN_OR_RETURN(auto live, rag::WindVeLive::create({.embedderDir = dir, .corpusPath = db}));  // seconds
//   RAG_RETURN_IF_ERROR(live->calibrate({.sloSeconds = 0.5},
//       [](rag::WindVeDevice d, const rag::WindVeSample& s) { ... },           // each profiled level
//       [](const rag::Result<rag::WindVeCalibration>& c) { ... }));            // once, last
//   ... once calibrated:
//   RAG_RETURN_IF_ERROR(live->run({.clients = 64, .seconds = 10, .heterogeneous = true},
//       [](const rag::Result<rag::WindVeLoadSummary>& r) { ... }));
//   rag::WindVeSnapshot s = live->snapshot();   // any thread, cheap: poll it every 100 ms
//   live->stop();                               // ends a calibration or a load early
//
// Devices (Algorithm 2): with a CUDA libtorch and a GPU the main instance is the GPU and the
// auxiliary a CPU instance; on a CPU-only machine both are CPU instances on disjoint cores (on
// 2 cores: main on core 0, auxiliary on core 1), each loading its own copy of the embedder.
// Calibration profiles each device alone (bursts of C = 1, 2, 4, ... concurrent queries, the fit
// latency = α·C + β with α, β >= 0, the deepest queue within the SLO); a load runs on a service
// with those depths. The queries are the corpus's test-split questions, or without a corpus
// sentences of words from the embedder's tokenizer (querySource() says which).
//
// Threading: create() blocks (it loads the embedder twice): call it off the GUI thread.
// calibrate() and run() return at once and work on this object's worker thread, one at a time;
// their callbacks are called on that thread, must return quickly and must not call back into
// this object. The compute threads of the embedder's kernels are process-wide: create() sets
// them to one instance's cores (model::setComputeThreads), as `ragraph bench embed` does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rag/status.h"

namespace rag {

struct WindVeParams {
  std::filesystem::path embedderDir;  // config.json, model.safetensors, tokenizer.json
  std::filesystem::path corpusPath;   // its test-split questions are the queries (may be missing)
  int64_t queryTexts = 512;           // how many distinct query texts the clients cycle through
  bool heterogeneous = true;          // false: no auxiliary instance is loaded at all
  // Called first on the thread each calibration and load runs on. Every other thread of a
  // calibration or load (the service's workers, the clients) starts from that one, so a nice
  // value set here holds for all of them: the workbench runs them below its GUI thread.
  std::function<void()> onWorkerStart;
};

struct WindVeCalibrationSettings {
  double sloSeconds = 0.5;        // the latency every answer should meet
  int64_t maxConcurrency = 256;   // the largest burst profiled and the cap of a depth, >= 2
  int repeats = 3;                // bursts per level, [1, 10] (their median counts)
};

enum class WindVeDevice : uint8_t { Main = 0, Auxiliary = 1 };

struct WindVeSample {
  int64_t concurrency = 0;
  double seconds = 0;  // until the last answer of a burst of `concurrency` queries
};

struct WindVeDeviceProfile {
  std::string name;                   // "cpu[0]", "cuda:0"
  std::vector<WindVeSample> samples;  // the profiled levels
  double alpha = 0, beta = 0;         // latency = alpha·C + beta seconds
  double rmse = 0;                    // of the fit
  int64_t depth = 0;                  // the queue depth: the largest C within the SLO
};

struct WindVeCalibration {
  double sloSeconds = 0;
  int64_t maxConcurrency = 0;
  WindVeDeviceProfile main;
  std::optional<WindVeDeviceProfile> auxiliary;  // none: a single device (heterogeneous off)
};

struct WindVeLoadSettings {
  int64_t clients = 64;          // closed-loop clients, [1, 4096]
  double seconds = 10;           // (0, 3600]
  bool heterogeneous = true;     // false: overflow past the main queue is BUSY, the auxiliary idles
  double busyBackoffMs = 5;      // a client answered BUSY waits this long, [0, 1000]
  double windowSeconds = 1;      // the snapshot's rates and percentiles cover this last span
};

struct WindVeQueueState {
  std::string device;
  int64_t depth = 0;
  int64_t queued = 0, running = 0;  // waiting, and in the batch being embedded
  int64_t served = 0;               // since the load started
  // The instance's worker CPU time over the wall time of its embed calls since the load started:
  // below 1, other processes took part of its cores (0: nothing embedded yet).
  double coreShare = 0;
  int64_t load() const { return queued + running; }
};

struct WindVeSnapshot {
  bool running = false;                         // a load is in flight
  double seconds = 0;                           // since the load started
  WindVeQueueState main;
  std::optional<WindVeQueueState> auxiliary;    // present while the load's service has one
  int64_t served = 0, busy = 0, failed = 0;     // answers to the clients since the load started
  double servedPerSecond = 0, busyPerSecond = 0;  // over the last window
  double p50Seconds = 0, p99Seconds = 0;        // latencies of the last window's answers (0: none)
};

struct WindVeLoadSummary {
  int64_t clients = 0;
  bool heterogeneous = false;
  double sloSeconds = 0;
  int64_t mainDepth = 0, auxDepth = 0;          // auxDepth 0: no auxiliary queue in this load
  double seconds = 0;
  int64_t served = 0, servedMain = 0, servedAux = 0, busy = 0;
  double servedPerSecond = 0;
  double busyShare = 0;                         // BUSY answers over all answers, [0, 1]
  double p50Seconds = 0, p99Seconds = 0, maxSeconds = 0;
  double withinSloShare = 0;                    // served answers within the SLO, [0, 1]
  double mainCoreShare = 0, auxCoreShare = 0;   // as WindVeQueueState::coreShare, over the load
};

class WindVeLive {
public:
  using SampleSink = std::function<void(WindVeDevice, const WindVeSample&)>;
  using CalibrationSink = std::function<void(const Result<WindVeCalibration>&)>;
  using LoadSink = std::function<void(const Result<WindVeLoadSummary>&)>;

  // Detects the devices, loads the embedder on each and reads the query texts. NotFound naming
  // the directory when it has no embedder (train one with `ragraph train embedder`); the
  // loaders' and the device detection's errors otherwise.
  static Result<std::unique_ptr<WindVeLive>> create(const WindVeParams& params);
  ~WindVeLive();  // stop(), then waits for the worker (a burst or the answers in flight: about an SLO)
  WindVeLive(const WindVeLive&) = delete;
  WindVeLive& operator=(const WindVeLive&) = delete;

  // Starts the calibration. InvalidArgument for bad settings (naming the field and its range),
  // Busy while a calibration or load is in flight. onDone's error: Cancelled after stop(),
  // InvalidArgument when one query alone misses the SLO on the main device (raise the SLO).
  Status calibrate(const WindVeCalibrationSettings& settings, SampleSink onSample, CalibrationSink onDone);
  // Starts a load on the calibrated depths. InvalidArgument for bad settings, Busy while one is
  // in flight, and InvalidArgument ("calibrate first") before a calibration has finished. A
  // load stopped early ends normally with what it did.
  Status run(const WindVeLoadSettings& settings, LoadSink onDone);
  void stop();
  bool busy() const;

  WindVeSnapshot snapshot() const;
  std::optional<WindVeCalibration> calibration() const;
  std::string plan() const;         // which devices, and why
  std::string querySource() const;  // where the query texts came from

  struct Impl;

private:
  explicit WindVeLive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag
