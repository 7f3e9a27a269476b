#include "server/server_metrics.h"

#include <sstream>

namespace rag::server {

namespace {

// Prometheus label values escape \, " and newline.
std::string labelValue(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void header(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << ' ' << help << '\n' << "# TYPE " << name << ' ' << type << '\n';
}

template <class T>
void gauge(std::ostringstream& out, const char* name, const char* help, T value, const char* type = "gauge") {
  header(out, name, type, help);
  out << name << ' ' << value << '\n';
}

}  // namespace

void ServerMetrics::countRequest(const std::string& endpoint, int status) {
  std::lock_guard lock(m_mutex);
  ++m_requests[{endpoint, status}];
}

void ServerMetrics::observeLatency(double seconds) {
  std::lock_guard lock(m_mutex);
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i)
    if (seconds <= kLatencyBuckets[i]) {
      ++m_bucketCounts[i];
      break;
    }
  ++m_latencyCount;
  m_latencySum += seconds;
}

void ServerMetrics::countRefusal(int status) {
  std::lock_guard lock(m_mutex);
  ++m_refusals[status];
}

std::string ServerMetrics::render(const ServingStats& s, int64_t inFlight, int64_t inFlightLimit,
                                  int64_t queuedConnections) const {
  std::ostringstream out;
  out.precision(9);
  {
    std::lock_guard lock(m_mutex);
    header(out, "ragraph_http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
    for (const auto& [key, n] : m_requests)
      out << "ragraph_http_requests_total{endpoint=\"" << labelValue(key.first) << "\",code=\"" << key.second
          << "\"} " << n << '\n';
    header(out, "ragraph_request_duration_seconds", "histogram",
           "Completion requests that ran, from arrival to the answer's last byte.");
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
      cumulative += m_bucketCounts[i];
      out << "ragraph_request_duration_seconds_bucket{le=\"" << kLatencyBuckets[i] << "\"} " << cumulative << '\n';
    }
    out << "ragraph_request_duration_seconds_bucket{le=\"+Inf\"} " << m_latencyCount << '\n';
    out << "ragraph_request_duration_seconds_sum " << m_latencySum << '\n';
    out << "ragraph_request_duration_seconds_count " << m_latencyCount << '\n';
    header(out, "ragraph_busy_refusals_total", "counter",
           "Completions refused because the server or the engine was full (429) or stopping (503).");
    for (int code : {429, 503}) {
      auto it = m_refusals.find(code);
      out << "ragraph_busy_refusals_total{code=\"" << code << "\"} " << (it == m_refusals.end() ? 0 : it->second)
          << '\n';
    }
  }
  gauge(out, "ragraph_stream_content_mismatches_total",
        "Streams whose live content was not a prefix of the final answer (expected 0).", m_streamMismatch.load(),
        "counter");
  gauge(out, "ragraph_http_inflight_requests", "Completions admitted and not yet answered.", inFlight);
  gauge(out, "ragraph_http_inflight_limit", "Completions admitted at most at once; more get 429.", inFlightLimit);
  gauge(out, "ragraph_http_queued_connections", "Accepted connections waiting for an HTTP worker thread.",
        queuedConnections);
  gauge(out, "ragraph_engine_live_requests", "Requests live in the engine's scheduler.", s.liveRequests);
  gauge(out, "ragraph_engine_running_sequences", "Sequences in the generation batch.", s.runningSequences);
  gauge(out, "ragraph_engine_search_tasks", "Live IVF search tasks (the retrieval queue).", s.searchTasks);
  gauge(out, "ragraph_engine_finished_requests_total", "Requests the engine finished.", s.finishedRequests, "counter");
  gauge(out, "ragraph_kv_blocks_used", "KV cache blocks in use on the compute tier (prefix cache included).",
        s.kvBlocksUsed);
  gauge(out, "ragraph_kv_blocks_total", "KV cache blocks on the compute tier.", s.kvBlocksTotal);
  gauge(out, "ragraph_kv_host_blocks_used", "KV blocks in use on the host tier.", s.kvHostBlocksUsed);
  gauge(out, "ragraph_kv_host_blocks_total", "KV blocks on the host tier.", s.kvHostBlocksTotal);
  gauge(out, "ragraph_prefix_cache_blocks", "Compute blocks the prefix cache holds.", s.prefixCachedBlocks);
  gauge(out, "ragraph_prefix_cache_queried_tokens_total", "Prompt tokens looked up in the prefix cache.",
        s.prefixQueriedTokens, "counter");
  gauge(out, "ragraph_prefix_cache_hit_tokens_total", "Prompt tokens the prefix cache supplied.", s.prefixHitTokens,
        "counter");
  gauge(out, "ragraph_generation_load", "Busy share of the generation worker over the last 100 ms.", s.generationLoad);
  gauge(out, "ragraph_retrieval_load", "Busy share of the retrieval worker over the last 100 ms.", s.retrievalLoad);
  gauge(out, "ragraph_embedding_load",
        "Busy share of the retrieval worker's embedding thread over the last 100 ms (0 when the search thread embeds).",
        s.embeddingLoad);
  gauge(out, "ragraph_retrieval_substages_total", "Retrieval sub-stages run.", s.subStages, "counter");
  return out.str();
}

}  // namespace rag::server
