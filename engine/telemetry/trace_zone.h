// Instrumenting a scope: records [begin, end) of the scope as one trace event when it exits.
//
//   {
//     RAG_TRACE_ZONE(zone, ring, lane, TraceStage::Decode, requestId);
//     ... the work ...
//     zone.setArgs(rows, sequences);   // stage-specific payload, before the scope ends
//   }
//
// With the build option RAGWB_TRACING off, the zone is an empty object and records nothing; a
// null ring records nothing either (untraced engines pay one branch).
#pragma once

#ifndef RAGWB_TRACING
#define RAGWB_TRACING 1
#endif

#include "core/clock.h"
#include "rag/trace.h"

namespace rag {

class TraceRing;
bool tracePush(TraceRing* ring, const TraceEvent& ev);  // null ring: no-op

class TraceZone {
public:
  TraceZone(TraceRing* ring, uint16_t lane, TraceStage stage, uint32_t requestId)
      : m_ring(ring) {
    m_ev.beginNs = ring ? nowNs() : 0;
    m_ev.lane = lane;
    m_ev.stage = stage;
    m_ev.requestId = requestId;
  }
  TraceZone(TraceRing& ring, uint16_t lane, TraceStage stage, uint32_t requestId)
      : TraceZone(&ring, lane, stage, requestId) {}
  ~TraceZone() {
    if (!m_ring) return;
    m_ev.endNs = nowNs();
    tracePush(m_ring, m_ev);
  }
  TraceZone(const TraceZone&) = delete;
  TraceZone& operator=(const TraceZone&) = delete;

  // Stage-specific payload, set before the scope ends.
  void setArgs(uint32_t arg0, uint32_t arg1 = 0) { m_ev.arg0 = arg0; m_ev.arg1 = arg1; }
  void addFlags(uint8_t f) { m_ev.flags |= f; }

private:
  TraceRing* m_ring;
  TraceEvent m_ev{};
};

// What RAG_TRACE_ZONE declares when tracing is compiled out.
class TraceZoneOff {
public:
  void setArgs(uint32_t, uint32_t = 0) {}
  void addFlags(uint8_t) {}
};

}  // namespace rag

#if RAGWB_TRACING
#define RAG_TRACE_ZONE(name, ring, lane, stage, requestId) ::rag::TraceZone name((ring), (lane), (stage), (requestId))
#else
#define RAG_TRACE_ZONE(name, ring, lane, stage, requestId) ::rag::TraceZoneOff name
#endif
