// How busy a serving worker's threads are: T_curr / T_max of HedraRAG §4.3's speculation
// trigger (speculate while T_curr < τ·T_max), measured instead of estimated from request counts.
// One gauge per worker, because the trigger is per stage: a speculative generation needs an
// idle generation thread, a speculative retrieval an idle retrieval thread. (One gauge over
// both made hedra speculate generations on a saturated generation thread once shared scans
// left the retrieval thread half idle.)
//
// The paper's GPU counts (16 generating, 32 searching requests) say when the GPU's batch
// throughput saturates. On a CPU the workers saturate their threads much sooner: one IVF search
// at nprobe 512 keeps the retrieval thread busy, and decode throughput stops growing at about 8
// sequences. There, speculative work that finds no idle thread is paid for by real work (with
// speculation on, multistep at SLO 3 s sustained 14.7 rps against 25.8 without), so the
// scheduler also asks this gauge: the share of the last window the worker spent working,
// over the threads that report to it — for a serving worker its one loop thread, whose steps
// keep all its compute threads busy at once (stage_executor.h, kWorkerLoopThreads).
//
//   LoadGauge load(1);                         // the worker's one loop thread
//   load.addBusy(stepNs);                      // the worker, after each unit of work
//   if (load.load(nowNs()) < 0.5) speculate(); // the scheduler thread
//
// addBusy and last() are thread-safe; load() is for one thread (the scheduler).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace rag::sched {

class LoadGauge {
public:
  // capacity: the threads whose work is reported; window: how often load() takes a new sample.
  explicit LoadGauge(double capacityThreads, uint64_t windowNs = 100'000'000)
      : m_capacity(std::max(capacityThreads, 1.0)), m_windowNs(std::max<uint64_t>(windowNs, 1)) {}

  void addBusy(uint64_t ns) { m_busyNs.fetch_add(ns, std::memory_order_relaxed); }

  // Busy share in [0, 1] (more than the capacity busy, e.g. threads preempted mid-work, reads
  // 1): each window's share, averaged with the previous value (half-life one window). 0 until
  // the first window has passed since the first call.
  double load(uint64_t nowNs) {
    const uint64_t busy = m_busyNs.load(std::memory_order_relaxed);
    const double value = m_value.load(std::memory_order_relaxed);
    if (m_lastNs == 0) {
      m_lastNs = nowNs;
      m_lastBusy = busy;
      return value;
    }
    if (nowNs - m_lastNs < m_windowNs) return value;
    const double share = static_cast<double>(busy - m_lastBusy) /
                         (static_cast<double>(nowNs - m_lastNs) * m_capacity);
    const double clamped = std::clamp(share, 0.0, 1.0);
    const double next = m_samples++ == 0 ? clamped : 0.5 * (value + clamped);
    m_value.store(next, std::memory_order_relaxed);
    m_lastNs = nowNs;
    m_lastBusy = busy;
    return next;
  }

  // The value load() last returned (any thread: for statistics).
  double last() const { return m_value.load(std::memory_order_relaxed); }
  // All the work reported so far, in seconds (any thread).
  double busySeconds() const { return static_cast<double>(m_busyNs.load(std::memory_order_relaxed)) * 1e-9; }
  double capacity() const { return m_capacity; }

private:
  double m_capacity;
  uint64_t m_windowNs;
  std::atomic<uint64_t> m_busyNs{0};
  uint64_t m_lastNs = 0, m_lastBusy = 0;
  std::atomic<double> m_value{0};
  long m_samples = 0;
};

}  // namespace rag::sched
