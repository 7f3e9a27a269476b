// One monotonic clock for the whole engine: trace events, timings and schedulers all read it,
// so spans from different threads line up on one axis.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace rag {

using Clock = std::chrono::steady_clock;

// Nanoseconds since an arbitrary, fixed epoch (the steady clock's).
inline uint64_t nowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// CPU time used so far (not time waiting for a core or preempted), in nanoseconds: by the
// calling thread, or by every thread of this process.
inline uint64_t cpuClockNs(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(t.tv_nsec);
}
inline uint64_t threadCpuNs() { return cpuClockNs(CLOCK_THREAD_CPUTIME_ID); }
inline uint64_t processCpuNs() { return cpuClockNs(CLOCK_PROCESS_CPUTIME_ID); }

class Stopwatch {
public:
  Stopwatch() : m_start(nowNs()) {}
  void restart() { m_start = nowNs(); }
  uint64_t elapsedNs() const { return nowNs() - m_start; }
  double elapsedSeconds() const { return static_cast<double>(elapsedNs()) * 1e-9; }
  double elapsedMs() const { return static_cast<double>(elapsedNs()) * 1e-6; }

private:
  uint64_t m_start;
};

}  // namespace rag
