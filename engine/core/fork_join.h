// A fork-join team for the short data-parallel loops of one model step (a matmul's output
// tiles, attention rows): far cheaper per fork than a task queue, because the workers spin
// briefly on a generation counter before they sleep on it, and the caller takes a share itself.
//
//   ForkJoin team(2);                       // the caller + one worker thread
//   team.run(outputs, 64, [&](int64_t b, int64_t e) { kernel(b, e); });
//
// run() splits [0, n) into contiguous parts of at least `grain` indices (a few per thread, for
// balance) that the caller and the workers claim from a shared counter, and returns when all
// are done. A worker the OS has not scheduled yet claims nothing, so the caller never waits for
// a thread that did not start (on a busy 2-core machine a descheduled worker cost a whole time
// slice per fork). One run at a time: a call made while another thread's run is in flight
// executes serially on its caller instead of waiting (two runners on two threads never block
// each other). A part that throws is reported by rethrowing on the caller.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rag {

class ForkJoin {
public:
  explicit ForkJoin(int threads);
  ~ForkJoin();
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;

  int size() const { return static_cast<int>(m_workers.size()) + 1; }
  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

private:
  void workerLoop();
  // Claims and runs parts of run `generation` until none is left.
  void claimParts(uint64_t generation);

  std::vector<std::thread> m_workers;
  std::mutex m_busy;                    // held by the caller of the run in flight
  std::atomic<uint64_t> m_generation{0};  // bumped to start a run; workers wait on it
  // The run's generation (high 32 bits), its number of parts (16 bits) and its next unclaimed
  // part (low 16), in one word: a claim made with a stale generation fails instead of taking a
  // part of a later run, and a claim checks the part against its own run's count.
  std::atomic<uint64_t> m_claim{0};
  std::atomic<int> m_done{0};           // parts of the current run finished
  std::atomic<bool> m_stop{false};
  // The current run, written before m_generation is bumped.
  const std::function<void(int64_t, int64_t)>* m_fn = nullptr;
  int64_t m_n = 0;
  std::exception_ptr m_error;
  std::mutex m_errorMutex;
};

// Splits [0, n) over `team` when the range holds at least `minWork` units of work in total
// (`work` per index); smaller ranges run on the calling thread, where a fork costs more than it
// saves. The kernels' loops (the runner's products and attention, the text encoder's) fork so.
inline void parallelRange(ForkJoin& team, int64_t n, int64_t work, int64_t minWork,
                          const std::function<void(int64_t, int64_t)>& fn) {
  team.run(n, std::max<int64_t>(1, minWork / std::max<int64_t>(1, work)), fn);
}

}  // namespace rag
