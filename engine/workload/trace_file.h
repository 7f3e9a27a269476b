// The workload trace file: JSON lines, one request per line, written by `ragraph trace make`
// and replayed by the serving benchmarks.
//
// Line 1 is always a header object with a single key "trace", recording how the trace was made
// so that it can be made again:
//
//   {"trace":{"version":1,"generator":"ragraph trace make","rate":4,"requests":1000,
//             "popularity":"temporal:0.5","window":16,"mix":"oneshot:1,multistep:1","seed":1,
//             "split":"test","qa_items":2400,"topic_entities":1800}}
//
// ("window" only for temporal popularity.) Every further line is one request, in arrival
// order:
//
//   {"id":0,"arrival_s":0.2183,"workflow":"multistep","qa_id":123,"topic_entity":456,
//    "question":"...","answers":["..."],"type":"two_hop"}
//
// arrival_s is written with 10 significant digits (microseconds for traces up to 10^4 s).
//
// The reader is lenient where a hand-written or filtered trace is reasonable and strict where
// a replay would go wrong: the header is optional (but only on the first line, and a version
// newer than kWorkloadTraceVersion is refused); blank lines and unknown fields are ignored;
// qa_id, topic_entity, answers and type may be absent (a custom question); id (a unique
// integer >= 0), arrival_s (a number >= 0, never decreasing), workflow (a known name) and
// question (a string) are required. Every error names the file, the line and the field.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"
#include "workload/workload_trace.h"

namespace rag::workload {

inline constexpr int kWorkloadTraceVersion = 1;

struct TraceHeader {
  TraceParams params;
  int64_t qaItems = 0;        // QA items in the split the trace drew from
  int64_t topicEntities = 0;  // their distinct topic entities
};
TraceHeader makeTraceHeader(const TraceParams& params, std::span<const QaItem> items);

// The whole file's text: header line, then one line per request, each ending in '\n'.
std::string formatWorkloadTrace(const TraceHeader& header, std::span<const TraceRequest> trace);
// Writes formatWorkloadTrace() atomically: `path` holds the old file or the whole new one.
Status writeWorkloadTrace(const std::filesystem::path& path, const TraceHeader& header,
                          std::span<const TraceRequest> trace);

// Parses a trace's text; `name` (a file name) prefixes every error.
Result<std::vector<TraceRequest>> parseWorkloadTrace(std::string_view text, std::string_view name);
Result<std::vector<TraceRequest>> readWorkloadTrace(const std::filesystem::path& path);

}  // namespace rag::workload
