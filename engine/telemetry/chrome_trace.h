// Export of trace events as Chrome-trace JSON ("Trace Event Format"), which Perfetto and
// chrome://tracing open. Spans become "X" (complete) events, instants "i", lanes threads.
#pragma once

#include <filesystem>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "rag/status.h"
#include "rag/trace.h"

namespace rag {

// lanes[i] names lane i (Engine::traceLanes()); lanes without a name export as "lane-<i>".
void writeChromeTrace(std::ostream& out, std::span<const TraceEvent> events,
                      const std::vector<TraceLane>& lanes);

// The same, written to a temp file and renamed over `path` (never half-written).
Status saveChromeTrace(const std::filesystem::path& path, std::span<const TraceEvent> events,
                       const std::vector<TraceLane>& lanes);

}  // namespace rag
