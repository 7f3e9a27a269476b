#include "core/fork_join.h"

#include <algorithm>

#include "core/thread_pool.h"

namespace rag {

namespace {
// Spins of a worker waiting for the next run before it sleeps (~50 us): a decode step forks
// every few microseconds, a serving loop that goes idle lets the workers sleep.
constexpr int kSpinsBeforeSleep = 20000;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ForkJoin::ForkJoin(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i)
    m_workers.emplace_back([this, i] {
      setCurrentThreadName("forkjoin-" + std::to_string(i));
      workerLoop(i);
    });
}

ForkJoin::~ForkJoin() {
  m_stop.store(true);
  m_generation.fetch_add(1);
  m_generation.notify_all();
  for (std::thread& t : m_workers) t.join();
}

void ForkJoin::runPart(int part) {
  const int64_t begin = m_n * part / m_parts, end = m_n * (part + 1) / m_parts;
  if (begin >= end) return;
  try {
    (*m_fn)(begin, end);
  } catch (...) {
    std::lock_guard lock(m_errorMutex);
    if (!m_error) m_error = std::current_exception();
  }
}

void ForkJoin::workerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = m_generation.load(std::memory_order_acquire);
    for (int spin = 0; g == seen && spin < kSpinsBeforeSleep; ++spin) {
      cpuRelax();
      g = m_generation.load(std::memory_order_acquire);
    }
    if (g == seen) {
      m_generation.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = g;
    if (m_stop.load()) return;
    if (index < m_parts) runPart(index);
    m_pending.fetch_sub(1, std::memory_order_acq_rel);  // every worker acknowledges every run
  }
}

void ForkJoin::run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t byGrain = (n + std::max<int64_t>(1, grain) - 1) / std::max<int64_t>(1, grain);
  const int parts = static_cast<int>(std::min<int64_t>(size(), byGrain));
  std::unique_lock lock(m_busy, std::try_to_lock);
  if (parts <= 1 || !lock.owns_lock()) {
    fn(0, n);
    return;
  }
  m_fn = &fn;
  m_n = n;
  m_parts = parts;
  m_error = nullptr;
  // Every worker wakes and reads m_parts; those without a part just acknowledge.
  m_pending.store(static_cast<int>(m_workers.size()), std::memory_order_relaxed);
  m_generation.fetch_add(1, std::memory_order_release);
  m_generation.notify_all();
  runPart(0);
  for (int spin = 0; m_pending.load(std::memory_order_acquire) > 0; ++spin) {
    if (spin < kSpinsBeforeSleep) cpuRelax();
    else std::this_thread::yield();
  }
  m_fn = nullptr;
  if (m_error) std::rethrow_exception(m_error);
}

}  // namespace rag
