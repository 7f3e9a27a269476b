// A bounded multi-producer, multi-consumer ring of TraceEvents (Vyukov's sequence-numbered
// slots). push() never blocks and never allocates: when the ring is full the event is dropped
// and counted, so tracing can never stall a worker. Consumers drain in batches.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rag/trace.h"

namespace rag {

class TraceRing {
public:
  // capacity is rounded up to a power of two (minimum 2).
  explicit TraceRing(size_t capacity = 1u << 16);
  TraceRing(const TraceRing&) = delete;
  TraceRing& operator=(const TraceRing&) = delete;

  // Thread-safe, wait-free in the common case. False (and dropped() grows) when full.
  bool push(const TraceEvent& ev);

  // Moves up to maxEvents events, oldest first, to the end of `out`. Returns how many.
  size_t drain(std::vector<TraceEvent>& out, size_t maxEvents = SIZE_MAX);

  size_t capacity() const { return m_mask + 1; }
  uint64_t dropped() const { return m_dropped.load(std::memory_order_relaxed); }
  uint64_t pushed() const { return m_pushed.load(std::memory_order_relaxed); }

  // Lanes for display and export: a name ("scheduler", "generation", "retrieval-0", ...) and the
  // kind of spans it holds. Registering a name again returns its lane.
  uint16_t registerLane(const std::string& name, LaneKind kind = LaneKind::Other);
  std::vector<TraceLane> lanes() const;

private:
  struct alignas(64) Slot {
    std::atomic<size_t> seq;
    TraceEvent event;
  };
  std::unique_ptr<Slot[]> m_slots;
  size_t m_mask;
  alignas(64) std::atomic<size_t> m_head{0};  // next write position
  alignas(64) std::atomic<size_t> m_tail{0};  // next read position
  alignas(64) std::atomic<uint64_t> m_dropped{0};
  std::atomic<uint64_t> m_pushed{0};

  mutable std::mutex m_laneMutex;
  std::vector<TraceLane> m_lanes;
};

// A worker's lane name that says where it computes: `base` on the CPU, "base · cuda:0" on a
// device (`device`: "cpu" or a description that starts with the device's name, as
// StepBackend::description() and TextEmbedder::device() give).
std::string deviceLaneName(const std::string& base, const std::string& device);

}  // namespace rag
