#include "telemetry/trace_ring.h"

#include <bit>
#include <iterator>

namespace rag {

namespace {
constexpr std::string_view kLaneKindNames[] = {"other",      "engine",    "workers",   "scheduler",
                                               "requests",   "generation", "retrieval", "embedding",
                                               "gpu",        "gpu-cache-swaps", "kv-tiers"};
static_assert(std::size(kLaneKindNames) == static_cast<size_t>(LaneKind::Count_));
}  // namespace

std::string_view laneKindName(LaneKind k) {
  const auto i = static_cast<size_t>(k);
  return i < std::size(kLaneKindNames) ? kLaneKindNames[i] : "other";
}

LaneKind laneKindFromName(std::string_view kindName) {
  for (size_t i = 0; i < std::size(kLaneKindNames); ++i)
    if (kLaneKindNames[i] == kindName) return static_cast<LaneKind>(i);
  return LaneKind::Other;
}

std::vector<std::string> laneNames(const std::vector<TraceLane>& lanes) {
  std::vector<std::string> out;
  out.reserve(lanes.size());
  for (const TraceLane& l : lanes) out.push_back(l.name);
  return out;
}

std::string_view traceStageName(TraceStage s) {
  switch (s) {
    case TraceStage::Unknown: return "unknown";
    case TraceStage::Request: return "request";
    case TraceStage::Schedule: return "schedule";
    case TraceStage::Prefill: return "prefill";
    case TraceStage::Decode: return "decode";
    case TraceStage::Embed: return "embed";
    case TraceStage::RetrievalStep: return "retrieval";
    case TraceStage::ClusterScan: return "cluster-scan";
    case TraceStage::CacheSwap: return "cache-swap";
    case TraceStage::KvTransfer: return "kv-transfer";
    case TraceStage::Aggregate: return "aggregate";
    case TraceStage::CorpusBuild: return "corpus-build";
    case TraceStage::User: return "user";
    case TraceStage::KvAssemble: return "kv-assemble";
    case TraceStage::Compress: return "compress";
    case TraceStage::Count_: break;
  }
  return "unknown";
}

TraceRing::TraceRing(size_t capacity) {
  size_t cap = std::bit_ceil(std::max<size_t>(capacity, 2));
  m_mask = cap - 1;
  m_slots = std::make_unique<Slot[]>(cap);
  for (size_t i = 0; i < cap; ++i) m_slots[i].seq.store(i, std::memory_order_relaxed);
}

bool TraceRing::push(const TraceEvent& ev) {
  size_t pos = m_head.load(std::memory_order_relaxed);
  for (;;) {
    Slot& slot = m_slots[pos & m_mask];
    size_t seq = slot.seq.load(std::memory_order_acquire);
    auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
    if (diff == 0) {
      if (m_head.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        slot.event = ev;
        slot.seq.store(pos + 1, std::memory_order_release);
        m_pushed.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    } else if (diff < 0) {
      m_dropped.fetch_add(1, std::memory_order_relaxed);  // full: drop, never block a worker
      return false;
    } else {
      pos = m_head.load(std::memory_order_relaxed);
    }
  }
}

size_t TraceRing::drain(std::vector<TraceEvent>& out, size_t maxEvents) {
  size_t n = 0;
  size_t pos = m_tail.load(std::memory_order_relaxed);
  while (n < maxEvents) {
    Slot& slot = m_slots[pos & m_mask];
    size_t seq = slot.seq.load(std::memory_order_acquire);
    auto diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos + 1);
    if (diff == 0) {
      if (m_tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        out.push_back(slot.event);
        slot.seq.store(pos + m_mask + 1, std::memory_order_release);
        ++n;
        ++pos;
      }
    } else if (diff < 0) {
      break;  // empty
    } else {
      pos = m_tail.load(std::memory_order_relaxed);
    }
  }
  return n;
}

uint16_t TraceRing::registerLane(const std::string& name, LaneKind kind) {
  std::lock_guard lock(m_laneMutex);
  for (size_t i = 0; i < m_lanes.size(); ++i)
    if (m_lanes[i].name == name) return static_cast<uint16_t>(i);
  m_lanes.push_back({name, kind});
  return static_cast<uint16_t>(m_lanes.size() - 1);
}

std::vector<TraceLane> TraceRing::lanes() const {
  std::lock_guard lock(m_laneMutex);
  return m_lanes;
}

std::string deviceLaneName(const std::string& base, const std::string& device) {
  return device == "cpu" ? base : base + " · " + device.substr(0, device.find(' '));
}

}  // namespace rag
