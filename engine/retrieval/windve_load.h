// WindVE's two live experiments on any Embedder (the workbench's WindVE page runs them on the
// shipped embedder through rag/windve.h; the tests on fakes):
//  - calibration of one device alone (papers/windve.txt §4.2.2): bursts of C = 1, 2, 4, ...
//    concurrent queries through a service holding only that device, the fit latency = α·C + β and
//    the deepest queue within the SLO (queue_depth.h);
//  - a closed-loop load: N clients, each submitting a query, waiting for its answer and
//    submitting the next, for D seconds; a BUSY answer (Algorithm 1: every usable queue full) is
//    counted and its client backs off before trying again. What the service does meanwhile is
//    readable at any time from another thread (snapshot()).
//
//   RAG_ASSIGN_OR_RETURN(DeviceCalibration cal, calibrateDevice({"cpu[0]", embedder, {0}}, texts,
//       {.slo = 0.5, .maxConcurrency = 256}, [](const LatencySample& s) { ... }, &stop));
//   RAG_ASSIGN_OR_RETURN(auto svc, EmbeddingService::create(main, aux, {.mainDepth = cal.depth, ...}));
//   ClosedLoopLoad load(*svc, texts, {.clients = 64, .seconds = 10});
//   std::thread t([&] { summary = load.run(&stop); });   // elsewhere: load.snapshot() every 100 ms
//
// The clients are one driver thread, not one thread each: it sweeps the clients about every
// millisecond, collects ready answers and submits again, so a latency is measured to within a
// sweep (a millisecond against the tens to hundreds of an embedding) and 512 clients do not
// take 512 threads from the embedders' cores.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "retrieval/embedding_service.h"
#include "retrieval/queue_depth.h"

namespace rag::retrieval {

struct CalibrationParams {
  double slo = 0.5;               // seconds
  int64_t maxConcurrency = 256;   // the largest burst, and the cap of the depth
  int repeats = 1;                // bursts per level (the median counts)
  int64_t maxBatch = 32;          // the service's dynamic batch
};

struct DeviceCalibration {
  std::string device;
  std::vector<LatencySample> samples;  // the profiled levels, in order
  LatencyFit fit;
  int64_t depth = 0;                   // the largest C with α·C + β <= slo (0: one query misses it)
};

// Profiles `instance` alone: one warm-up burst (the tokenizer's caches, the allocator), then
// profileLevels with the median of `repeats` bursts per level, fitLatency and depthWithinSlo.
// `onSample` (may be empty) is called on this thread after each level. Cancelled when `stop`
// is set (looked at between bursts); InvalidArgument for a bad SLO, cap or repeats, or no texts.
Result<DeviceCalibration> calibrateDevice(const EmbeddingInstance& instance, std::span<const std::string> texts,
                                          const CalibrationParams& params,
                                          const std::function<void(const LatencySample&)>& onSample,
                                          const std::atomic<bool>* stop);

struct ClosedLoopParams {
  int64_t clients = 16;
  double seconds = 10;
  double busyBackoffSeconds = 0.005;  // a client answered BUSY waits this long before its next query
  double windowSeconds = 1.0;         // snapshot()'s rates and percentiles cover this last span
  double sloSeconds = 0;              // > 0: the summary counts answers within it
};

// What the load did: totals since run() started, and the last window's rates and latencies.
struct ClosedLoopSnapshot {
  bool running = false;
  double seconds = 0;             // since run() started
  EmbeddingServiceStats service;  // the queues' loads and depths now
  int64_t submitted = 0;          // queries the clients sent (BUSY ones included)
  int64_t routedMain = 0, routedAux = 0;
  int64_t served = 0;             // answered with a vector
  int64_t busy = 0;               // answered BUSY at once
  int64_t failed = 0;             // answered with an error (the run stops at the first)
  double servedPerSecond = 0, busyPerSecond = 0;  // over the window
  double p50Seconds = 0, p99Seconds = 0;          // of the window's served answers (0: none)
  int64_t windowServed = 0;
};

struct ClosedLoopSummary {
  double seconds = 0;             // from the first query to the last answer
  int64_t clients = 0;
  int64_t submitted = 0, routedMain = 0, routedAux = 0, served = 0, busy = 0;
  double p50Seconds = 0, p99Seconds = 0, maxSeconds = 0;  // of every served answer
  int64_t withinSlo = 0;          // served answers within params.sloSeconds (when given)
  double servedPerSecond() const { return seconds > 0 ? static_cast<double>(served) / seconds : 0; }
  // BUSY answers over all answers the clients got.
  double busyShare() const { return served + busy > 0 ? static_cast<double>(busy) / static_cast<double>(served + busy) : 0; }
};

// The value below which a share `q` (in [0, 1]) of `values` lies (nearest rank); 0 for none.
double percentile(std::vector<double> values, double q);

class ClosedLoopLoad {
public:
  // `service` and `texts` must outlive run(); texts must not be empty.
  ClosedLoopLoad(EmbeddingService& service, std::span<const std::string> texts, ClosedLoopParams params);

  // Drives the clients on this thread until `seconds` have passed or `stop` is set, then waits for
  // the answers in flight (each within its queue's bound). InvalidArgument for clients < 1,
  // seconds <= 0 or no texts; the first embedder error or refusal stops the run and is returned.
  // One run per object.
  Result<ClosedLoopSummary> run(const std::atomic<bool>* stop);

  // Any thread, any time (before run(): zeros; after: the final figures with running false). It
  // reads the service's stats too: the service must outlive every call.
  ClosedLoopSnapshot snapshot() const;

private:
  struct Answer {
    double at = 0;       // seconds since the start
    double latency = 0;
  };
  struct Checkpoint {
    double at = 0;
    int64_t served = 0, busy = 0;
  };
  void publish(double now, std::vector<Answer>& fresh, int64_t submitted, int64_t routedMain, int64_t routedAux,
               int64_t busy, int64_t failed, bool running);

  EmbeddingService& m_service;
  std::span<const std::string> m_texts;
  ClosedLoopParams m_params;
  mutable std::mutex m_mutex;       // guards what follows
  ClosedLoopSnapshot m_totals;      // counters (service stats and window figures filled in snapshot())
  std::deque<Answer> m_window;      // served answers of the last windowSeconds
  std::deque<Checkpoint> m_checkpoints;
};

}  // namespace rag::retrieval
