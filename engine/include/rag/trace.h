// Trace events: what every stage of the engine records, for the GUI timeline, the run store
// and Chrome-trace / Perfetto export.
//
// Events are packed 32-byte PODs pushed into a lock-free ring (telemetry/trace_ring.h) by any
// thread; one consumer drains them. Instrument a scope with
//
//   RAG_TRACE_ZONE(ring, lane, rag::TraceStage::Decode, requestId);
//
// which records [begin, end) when the scope exits, and compiles to nothing when the build
// option RAGWB_TRACING is off.
#pragma once

#include <cstdint>
#include <string_view>
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
  Count_
};

std::string_view traceStageName(TraceStage s);

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

#ifndef RAGWB_TRACING
#define RAGWB_TRACING 1
#endif

// The zone guard is engine-internal (telemetry/trace_zone.h): code outside engine/ (widgets) sees
// the event types only, and RAG_TRACE_ZONE stays undefined there.
#if RAGWB_TRACING && __has_include("telemetry/trace_zone.h")
#include "telemetry/trace_zone.h"
#define RAG_TRACE_ZONE(ring, lane, stage, requestId) \
  ::rag::TraceZone RAG_TRACE_CONCAT(rag_trace_zone_, __LINE__)((ring), (lane), (stage), (requestId))
#define RAG_TRACE_CONCAT_INNER(a, b) a##b
#define RAG_TRACE_CONCAT(a, b) RAG_TRACE_CONCAT_INNER(a, b)
#elif !RAGWB_TRACING
#define RAG_TRACE_ZONE(ring, lane, stage, requestId) ((void)0)
#endif
