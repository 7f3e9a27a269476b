// Streaming read bandwidth of this machine's main memory, for the LLM benchmark's "physical
// floor": a decode step must read every weight and the live KV cache once, so
//   floor seconds per token = (weight bytes + KV bytes read per token) / read bandwidth.
//
//   RAG_ASSIGN_OR_RETURN(double bytesPerSecond, measureReadBandwidth());
//   double floorSeconds = double(weightBytes + kvBytes) / bytesPerSecond;
//
// Each of `threads` threads sums its own contiguous slice of one buffer (pages written
// beforehand by the thread that reads them, so they are resident and local); the threads start
// together and the slowest sets the time; the best of `repeats` passes is reported. Use a
// buffer well beyond the last-level cache (the default 256 MiB) to measure DRAM rather than
// cache. Each thread reads its slice as four streams with the widest vector loads the CPU has
// (mem_bandwidth.cpp), so that the figure bounds what any program reads: with one stream of
// narrower loads it read 28 GB/s on one core here, below what llama.cpp's decode reached (33).
#pragma once

#include <cstddef>

#include "rag/status.h"

namespace rag {

inline constexpr size_t kDefaultBandwidthBufferBytes = size_t{256} << 20;

// Bytes per second. `threads` 0 means std::thread::hardware_concurrency(). InvalidArgument for
// threads < 0, repeats < 1, or a buffer smaller than 4 KiB per thread; Unavailable when the
// buffer cannot be allocated or the threads cannot be started (naming the size and count).
Result<double> measureReadBandwidth(size_t bytes = kDefaultBandwidthBufferBytes,
                                    int threads = 0, int repeats = 3);

}  // namespace rag
