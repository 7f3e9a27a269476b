// Trace events: what every stage of the engine records, for the GUI timeline, the run store
// and Chrome-trace / Perfetto export.
//
// Events are packed 32-byte PODs pushed into a lock-free ring (telemetry/trace_ring.h) by any
// thread; one consumer drains them. Inside the engine a scope is instrumented with
// RAG_TRACE_ZONE (telemetry/trace_zone.h), which compiles to nothing when the build option
// RAGWB_TRACING is off; code outside engine/ (widgets) sees the event types only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <type_traits>

namespace rag {

enum class TraceStage : uint8_t {
  Unknown = 0,
  Request,        // a whole request, submit to result
  Schedule,       // one scheduler cycle
  Prefill,
  Decode,
  Embed,
  RetrievalStep,  // one sub-stage of IVF search (a few clusters)
  ClusterScan,    // a GPU cluster-cache scan
  CacheSwap,      // GPU cache update
  KvTransfer,     // KV blocks moved between tiers
  Aggregate,      // DRAGON output aggregation
  CorpusBuild,
  User,           // anything else; arg fields say what
  KvAssemble,     // a segmented prompt's KV: segments looked up (arg1 1, arg0 tokens found) or
                  // copied into the sequence and re-encoded (arg1 2, arg0 tokens placed)
  Compress,       // a compression node's run (requests lane: arg0 sentences scored, arg1 node index)
  Count_
};

std::string_view traceStageName(TraceStage s);

// What a lane's spans are, so that views read arg0/arg1 and pick colours by kind, whatever the
// lane is called ("generation", "generation (cloud)", "retrieval-1", ...).
enum class LaneKind : uint8_t {
  Other = 0,
  Engine,         // the facade's own work
  Workers,        // the corpus-lookup thread pool
  Scheduler,      // scheduler cycles
  Requests,       // whole requests and their node runs (arg0: work, arg1: node index)
  Generation,     // prefill/decode steps (arg0: rows, arg1: batch)
  Retrieval,      // search sub-stages (arg0: clusters, arg1: tasks)
  Embedding,      // query embedding
  Gpu,            // GPU cluster-cache scans
  GpuCacheSwaps,  // GPU cluster-cache updates
  KvTiers,        // KV blocks moved between memory tiers (arg0: blocks, arg1: 1 to host, 2 back)
  Count_
};
std::string_view laneKindName(LaneKind k);             // "generation", "kv-tiers", ...
LaneKind laneKindFromName(std::string_view kindName);  // laneKindName's inverse; Other when unknown

struct TraceLane {
  std::string name;  // what views show
  LaneKind kind = LaneKind::Other;
  bool operator==(const TraceLane&) const = default;
};
std::vector<std::string> laneNames(const std::vector<TraceLane>& lanes);

enum TraceFlags : uint8_t {
  kTraceInstant = 1u << 0,      // a point in time, endNs == beginNs
  kTraceSpeculative = 1u << 1,  // work started before its input was final
  kTraceRollback = 1u << 2,     // speculative work thrown away
  kTraceGpu = 1u << 3,          // ran on the accelerator
};

struct TraceEvent {
  uint64_t beginNs = 0;    // rag::nowNs() at start
  uint64_t endNs = 0;      // rag::nowNs() at end (== beginNs for instants)
  uint32_t requestId = 0;  // 0: not tied to a request
  uint16_t lane = 0;       // worker lane; names are registered on the ring
  TraceStage stage = TraceStage::Unknown;
  uint8_t flags = 0;       // TraceFlags
  uint32_t arg0 = 0;       // stage-specific: tokens decoded, clusters searched, bytes moved
  uint32_t arg1 = 0;       // stage-specific: workflow node id, batch size

  uint64_t durationNs() const { return endNs - beginNs; }
};
static_assert(sizeof(TraceEvent) == 32, "TraceEvent is a packed 32-byte record");
static_assert(std::is_trivially_copyable_v<TraceEvent>);

}  // namespace rag
