// The counters of `ragraph serve` and their Prometheus text exposition (GET /metrics, format
// 0.0.4): HTTP requests by endpoint and status, completion latency as a histogram, requests in
// flight, overload refusals, and the engine's own gauges (KV blocks, queue depths) read from
// Engine::servingStats() at scrape time.
//
// Threading: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "rag/engine.h"

namespace rag::server {

class ServerMetrics {
public:
  // Upper bounds (seconds) of the latency histogram's buckets; +Inf is implied.
  static constexpr std::array<double, 10> kLatencyBuckets = {0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

  void countRequest(const std::string& endpoint, int status);
  // A completion that ran (submitted to the engine and finished), its time from arrival to the
  // last byte of the answer.
  void observeLatency(double seconds);
  void countRefusal(int status);  // 429 or 503 because the server or the engine was full
  void countStreamMismatch() { m_streamMismatch.fetch_add(1); }

  // The exposition text: these counters, then `inFlight`, `queuedConnections` and `stats`.
  std::string render(const ServingStats& stats, int64_t inFlight, int64_t inFlightLimit,
                     int64_t queuedConnections) const;

private:
  mutable std::mutex m_mutex;
  std::map<std::pair<std::string, int>, uint64_t> m_requests;
  std::array<uint64_t, kLatencyBuckets.size()> m_bucketCounts{};  // per bucket, not cumulative
  uint64_t m_latencyCount = 0;
  double m_latencySum = 0;
  std::map<int, uint64_t> m_refusals;
  std::atomic<uint64_t> m_streamMismatch{0};
};

}  // namespace rag::server
