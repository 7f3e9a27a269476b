// The scope guard behind RAG_TRACE_ZONE (rag/trace.h): records [construction, destruction).
#pragma once

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

}  // namespace rag
