#include "core/fork_join.h"

#include <algorithm>

#include "core/thread_pool.h"

namespace rag {

namespace {
// Spins of a worker waiting for the next run before it sleeps (~50 us): a decode step forks
// every few microseconds, a serving loop that goes idle lets the workers sleep.
constexpr int kSpinsBeforeSleep = 20000;
// A run's parts and its next unclaimed part share the claim word's low 32 bits, 16 each.
constexpr int64_t kMaxParts = 0xffff;

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
      workerLoop();
    });
}

ForkJoin::~ForkJoin() {
  m_stop.store(true);
  m_generation.fetch_add(1);
  m_generation.notify_all();
  for (std::thread& t : m_workers) t.join();
}

void ForkJoin::claimParts(uint64_t generation) {
  const uint64_t tag = (generation & 0xffffffffu) << 32;
  for (;;) {
    uint64_t c = m_claim.load(std::memory_order_acquire);
    if ((c & ~uint64_t{0xffffffffu}) != tag) return;  // a later run (or none) owns the counter
    // The part count comes from the same word as the tag and the part: read from anywhere else
    // it could be the next run's (written before that run's tag), and a part past this run's
    // last would be claimed from its exhausted counter and run with the next run's function.
    const int part = static_cast<int>(c & 0xffffu), parts = static_cast<int>((c >> 16) & 0xffffu);
    if (part >= parts) return;
    if (!m_claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) continue;
    // The claim succeeded under this run's tag, so m_fn and m_n are this run's: the caller
    // changes them only after every part, this one included, is done.
    const int64_t begin = m_n * part / parts, end = m_n * (part + 1) / parts;
    if (begin < end) {
      try {
        (*m_fn)(begin, end);
      } catch (...) {
        std::lock_guard lock(m_errorMutex);
        if (!m_error) m_error = std::current_exception();
      }
    }
    m_done.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ForkJoin::workerLoop() {
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
    claimParts(g);
  }
}

void ForkJoin::run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t byGrain = (n + std::max<int64_t>(1, grain) - 1) / std::max<int64_t>(1, grain);
  const int parts = static_cast<int>(std::min<int64_t>({4 * size(), byGrain, kMaxParts}));
  std::unique_lock lock(m_busy, std::try_to_lock);
  if (parts <= 1 || size() == 1 || !lock.owns_lock()) {
    fn(0, n);
    return;
  }
  m_fn = &fn;
  m_n = n;
  m_error = nullptr;
  m_done.store(0, std::memory_order_relaxed);
  const uint64_t g = m_generation.load(std::memory_order_relaxed) + 1;
  m_claim.store((g & 0xffffffffu) << 32 | static_cast<uint64_t>(parts) << 16, std::memory_order_release);
  m_generation.store(g, std::memory_order_release);
  m_generation.notify_all();
  claimParts(g);
  for (int spin = 0; m_done.load(std::memory_order_acquire) < parts; ++spin) {
    if (spin < kSpinsBeforeSleep) cpuRelax();
    else std::this_thread::yield();
  }
  m_fn = nullptr;
  if (m_error) std::rethrow_exception(m_error);
}

}  // namespace rag
