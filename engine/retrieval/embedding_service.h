// WindVE's embedding service (papers/windve.txt §4): embedding instances on a main device and
// an auxiliary device, each behind a bounded queue, and a queue manager that routes every query
// by Algorithm 1: to the main queue while it has room, to the auxiliary queue when the main one
// is full (heterogeneous mode only), and BUSY otherwise. A queue's depth is the concurrency its
// device sustains within the latency SLO (queue_depth.h computes it), so a query is either
// answered in time or refused at once: the service never holds an unbounded backlog.
//
//   auto main = std::make_shared<MyEmbedder>(...);              // any Embedder
//   RAG_ASSIGN_OR_RETURN(auto svc, EmbeddingService::create(
//       {.name = "cpu[0]", .embedder = main, .cores = {0}},
//       EmbeddingInstance{.name = "cpu[1]", .embedder = aux, .cores = {1}},
//       {.mainDepth = 40, .auxDepth = 8}));
//   Submission s = svc->submit("what is a bridge?");
//   if (s.route == Route::Busy) retryLater(s.result.get().status().message());
//   Result<std::vector<float>> v = s.result.get();               // [dim]
//
// Each instance has one worker thread (pinned to its cores when given) doing dynamic batching:
// it takes up to maxBatch queued queries at once and embeds them in one call. A queue's load
// counts queries waiting and being embedded, and drops when their answers are set.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag::retrieval {

// Texts -> unit vectors. One object is one loaded model; the service calls it from one thread
// at a time (its instance's worker).
class Embedder {
public:
  virtual ~Embedder() = default;
  virtual int64_t dim() const = 0;
  // Row-major [texts.size() x dim()], in the order given. Texts are never empty (the service
  // refuses empty queries before they reach a queue).
  virtual Result<std::vector<float>> embed(std::span<const std::string> texts) = 0;
};

// ---- devices (Algorithm 2) ---------------------------------------------------------------------

enum class DeviceKind : uint8_t { Cpu, Cuda };
std::string_view deviceKindName(DeviceKind kind);

struct DeviceSpec {
  DeviceKind kind = DeviceKind::Cpu;
  std::vector<int> cores;   // CPU cores its worker runs on (empty: wherever the OS puts it)
  std::string name;         // "cuda:0", "cpu[0-3]"
};

struct DeviceDetectParams {
  bool cudaAvailable = false;     // a GPU and a CUDA-enabled libtorch (model::cudaAvailable())
  bool heterogeneous = true;      // offload overflow to the auxiliary device
  std::vector<int> mainCores;     // empty: see detectDevices
  std::vector<int> auxCores;
  std::vector<int> allowedCores;  // cores this process may run on (allowedCores())
};

struct DevicePlan {
  DeviceSpec main;
  std::optional<DeviceSpec> auxiliary;  // none: heterogeneous is off
  bool heterogeneous = false;
  std::string note;                     // why this plan, for the user
};

// With CUDA: main = the GPU (its worker on mainCores when given), auxiliary = a CPU instance on
// auxCores (default all allowed cores). CPU only: main and auxiliary are CPU instances on
// disjoint core sets (default: the first and second half of the allowed cores); with a single
// core the auxiliary is dropped and heterogeneous mode forced off, as in the paper. With
// heterogeneous off there is no auxiliary. InvalidArgument: a core not allowed, an empty or
// overlapping set on a CPU-only machine.
Result<DevicePlan> detectDevices(const DeviceDetectParams& params);

// "0", "0-3", "0,2,5-7" -> sorted distinct cores. InvalidArgument naming the bad part.
Result<std::vector<int>> parseCoreList(std::string_view text);
// The inverse, compact: {0,1,2,5} -> "0-2,5".
std::string formatCoreList(std::span<const int> cores);
// The cores this process may run on (sched_getaffinity).
std::vector<int> allowedCores();
// Pins the calling thread to `cores` (pthread_setaffinity_np). InvalidArgument for a core the
// process may not use.
Status pinCurrentThread(std::span<const int> cores);

// ---- queue manager (Algorithm 1) ---------------------------------------------------------------

enum class Route : uint8_t {
  Main,       // queued on the main device
  Auxiliary,  // the main queue was full: queued on the auxiliary device
  Busy,       // every usable queue was full (normal: try again later)
  Refused,    // bad input (an empty text) or the service has shut down
};
std::string_view routeName(Route route);

// Algorithm 1 on queue loads: main first; the auxiliary only when the main queue is full and
// heterogeneous mode is on; Busy when both are full or when heterogeneous mode is off.
Route chooseRoute(int64_t mainLoad, int64_t mainDepth, int64_t auxLoad, int64_t auxDepth,
                  bool heterogeneous);

struct EmbeddingInstance {
  std::string name;                    // shown in stats and messages, e.g. "cpu[0]"
  std::shared_ptr<Embedder> embedder;  // may be shared with other services, one at a time
  std::vector<int> cores;              // pin the worker here (empty: no affinity)
};

struct EmbeddingServiceParams {
  int64_t mainDepth = 32;      // most queries waiting or in flight on the main device
  int64_t auxDepth = 8;        // the same on the auxiliary device
  bool heterogeneous = true;   // false: the auxiliary queue is never used
  int64_t maxBatch = 32;       // most queries one embed call takes (dynamic batching)
};

struct Submission {
  Route route = Route::Refused;
  // The unit vector [dim]; Busy (with the depths that were full), InvalidArgument (an empty
  // text), Cancelled (shut down before it ran), or the embedder's error.
  std::future<Result<std::vector<float>>> result;
};

struct QueueStats {
  std::string device;
  int64_t depth = 0;
  int64_t queued = 0;     // waiting for the worker
  int64_t running = 0;    // in the batch being embedded
  int64_t accepted = 0;   // routed here since start
  int64_t served = 0;     // answered with a vector
  int64_t failed = 0;     // answered with an embedder error or Cancelled
  int64_t full = 0;       // queries that found this queue full
  int64_t batches = 0;
  int64_t largestBatch = 0;
  double embedSeconds = 0;     // wall time in embed calls
  double embedCpuSeconds = 0;  // the worker thread's CPU time in them: / embedSeconds is the
                               // share of its core the instance got (below 1: other load)
};

// A consistent snapshot (taken under one lock), cheap enough to poll from a GUI panel.
struct EmbeddingServiceStats {
  QueueStats main;
  std::optional<QueueStats> auxiliary;
  bool heterogeneous = false;
  int64_t busy = 0;       // answered Busy
  int64_t refused = 0;    // empty texts and queries after shutdown
};

class EmbeddingService {
public:
  // InvalidArgument: no main embedder, depths < 1 (auxiliary: only when given), maxBatch < 1,
  // embedders of different dimensions; pinning errors of a worker.
  static Result<std::unique_ptr<EmbeddingService>> create(EmbeddingInstance main,
                                                          std::optional<EmbeddingInstance> auxiliary,
                                                          const EmbeddingServiceParams& params);
  ~EmbeddingService();  // shutdown()
  EmbeddingService(const EmbeddingService&) = delete;
  EmbeddingService& operator=(const EmbeddingService&) = delete;

  // Never blocks on embedding: the route is decided and the query queued (or answered) at once.
  Submission submit(std::string text);

  // Queued queries are answered Cancelled, batches being embedded finish, workers join; later
  // submissions are Refused. Every future handed out is ready afterwards.
  void shutdown();

  EmbeddingServiceStats stats() const;
  int64_t dim() const;
  bool heterogeneous() const;

  struct Impl;

private:
  explicit EmbeddingService(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag::retrieval
