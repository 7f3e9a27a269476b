#include "core/mem_bandwidth.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/target_clones.h"

namespace rag {

namespace {

using Word = uint64_t;
constexpr size_t kMinBytesPerThread = 4096;
constexpr size_t kWordsPerLine = 64 / sizeof(Word);

// Tells the compiler that the memory behind `p` may have changed and must be read again:
// without it, GCC may reuse the values this thread wrote before the passes (or the sum of the
// previous pass) instead of loading them, and the "bandwidth" becomes terabytes per second.
inline void clobberMemory(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// One cache line as a vector (GCC/Clang vector extension): one AVX-512 load in the x86-64-v4
// clone, two AVX2 loads in the v3 one.
typedef Word Line __attribute__((vector_size(64)));

// Sums a slice (64-byte aligned, whole lines) as four quarters read side by side, two lines of
// each per step into their own accumulators: four streams keep more misses in flight than one,
// and the widest loads keep the loop bound by memory, not by instructions. On this project's
// machine one sequential scalar-vectorised stream read 28 GB/s, these four 34 GB/s, and llama.cpp's
// decode was seen reading 33 GB/s: the floor must be what the memory gives, not what one loop
// style reaches.
RAG_CLONES [[gnu::noinline]] Word sumSlice(const Word* p, size_t n) {
  const Line* lines = reinterpret_cast<const Line*>(p);
  constexpr size_t kStreams = 4;
  const size_t part = n / kWordsPerLine / kStreams / 2 * 2;
  Line acc[kStreams][2] = {};
  for (size_t i = 0; i < part; i += 2)
    for (size_t s = 0; s < kStreams; ++s) {
      acc[s][0] += lines[s * part + i];
      acc[s][1] += lines[s * part + i + 1];
    }
  Word total = 0;
  for (size_t i = kStreams * part * kWordsPerLine; i < n; ++i) total += p[i];
  for (const auto& stream : acc)
    for (const Line& a : stream)
      for (size_t j = 0; j < kWordsPerLine; ++j) total += a[j];
  return total;
}

struct AlignedFree {
  void operator()(Word* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

Result<double> measureReadBandwidth(size_t bytes, int threads, int repeats) {
  if (threads < 0)
    return Status::invalidArgument("bandwidth threads must be >= 0 (0 = all hardware threads), "
                                   "got " + std::to_string(threads));
  if (repeats < 1)
    return Status::invalidArgument("bandwidth repeats must be >= 1, got " +
                                   std::to_string(repeats));
  const size_t nThreads =
      threads > 0 ? static_cast<size_t>(threads)
                  : std::max<size_t>(1, std::thread::hardware_concurrency());
  if (bytes < kMinBytesPerThread * nThreads)
    return Status::invalidArgument("bandwidth buffer of " + std::to_string(bytes) +
                                   " bytes is too small for " + std::to_string(nThreads) +
                                   " threads; give at least " +
                                   std::to_string(kMinBytesPerThread * nThreads) +
                                   " bytes (and well over the last-level cache to measure DRAM)");

  // Whole cache lines per thread, so that no two threads share one.
  const size_t linesPerThread = bytes / sizeof(Word) / kWordsPerLine / nThreads;
  const size_t wordsPerThread = linesPerThread * kWordsPerLine;
  const size_t totalWords = wordsPerThread * nThreads;

  std::unique_ptr<Word[], AlignedFree> buffer;
  try {
    buffer.reset(static_cast<Word*>(
        ::operator new[](totalWords * sizeof(Word), std::align_val_t{64})));
  } catch (const std::bad_alloc&) {
    return Status::unavailable("cannot allocate the " + mib(totalWords * sizeof(Word)) +
                               " bandwidth buffer; pass a smaller size");
  }

  using Clock = std::chrono::steady_clock;
  // Each thread times its own passes: on a machine with no spare core, a separate timing thread
  // would wake up only after the readers had finished. A pass lasts from the first thread's
  // start to the last thread's end.
  std::vector<Clock::time_point> begins(static_cast<size_t>(repeats) * nThreads);
  std::vector<Clock::time_point> ends(begins.size());
  std::atomic<Word> sink{0};  // the sums go here, so the reads cannot be optimised away
  std::barrier start(static_cast<ptrdiff_t>(nThreads));

  // Threads start reading only once all of them exist: a failed thread start must not leave
  // the others waiting at a barrier that can never fill.
  std::atomic<int> launch{0};  // 0: wait, 1: run, -1: give up
  auto reader = [&](size_t t) {
    launch.wait(0);
    if (launch.load() < 0) return;
    Word* slice = buffer.get() + t * wordsPerThread;
    // First touch by the reading thread: pages become resident (not the shared zero page) and,
    // on NUMA machines, local to it.
    for (size_t i = 0; i < wordsPerThread; ++i) slice[i] = i * 0x9E3779B97F4A7C15ULL + t;
    for (size_t r = 0; r < static_cast<size_t>(repeats); ++r) {
      start.arrive_and_wait();
      clobberMemory(slice);
      begins[r * nThreads + t] = Clock::now();
      Word s = sumSlice(slice, wordsPerThread);
      ends[r * nThreads + t] = Clock::now();
      sink.fetch_add(s, std::memory_order_relaxed);
    }
  };

  // The calling thread reads slice 0.
  std::vector<std::jthread> others;
  others.reserve(nThreads - 1);
  try {
    for (size_t t = 1; t < nThreads; ++t) others.emplace_back(reader, t);
  } catch (const std::system_error& e) {
    launch = -1;
    launch.notify_all();
    others.clear();
    return Status::unavailable("cannot start " + std::to_string(nThreads) +
                               " bandwidth threads (" + e.what() + "); pass fewer threads");
  }
  launch = 1;
  launch.notify_all();
  reader(0);
  others.clear();  // join

  std::vector<Clock::duration> passTimes;
  for (size_t r = 0; r < static_cast<size_t>(repeats); ++r) {
    auto first = begins.begin() + static_cast<ptrdiff_t>(r * nThreads);
    auto last = ends.begin() + static_cast<ptrdiff_t>(r * nThreads);
    passTimes.push_back(*std::max_element(last, last + static_cast<ptrdiff_t>(nThreads)) -
                        *std::min_element(first, first + static_cast<ptrdiff_t>(nThreads)));
  }
  auto best = *std::min_element(passTimes.begin(), passTimes.end());
  double seconds = std::chrono::duration<double>(best).count();
  if (!(seconds > 0))
    return Status::internal("bandwidth pass over " + mib(totalWords * sizeof(Word)) +
                            " took no measurable time");
  (void)sink.load(std::memory_order_relaxed);
  return static_cast<double>(totalWords * sizeof(Word)) / seconds;
}

}  // namespace rag
