#include "telemetry/chrome_trace.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/fs.h"
#include "core/json_writer.h"
#include "telemetry/trace_ring.h"

namespace rag {

bool tracePush(TraceRing* ring, const TraceEvent& ev) { return ring ? ring->push(ev) : false; }

void writeChromeTrace(std::ostream& out, std::span<const TraceEvent> events,
                      const std::vector<TraceLane>& lanes) {
  // Timestamps are microseconds relative to the first event, with ns precision kept.
  uint64_t origin = UINT64_MAX;
  std::set<uint16_t> used;
  for (const TraceEvent& e : events) {
    origin = std::min(origin, e.beginNs);
    used.insert(e.lane);
  }
  if (events.empty()) origin = 0;

  JsonWriter w(out);
  w.beginObject();
  w.key("displayTimeUnit").value("ms");
  w.key("traceEvents").beginArray();
  for (uint16_t lane : used) {
    w.beginObject();
    w.key("name").value("thread_name");
    w.key("ph").value("M");
    w.key("pid").value(1);
    w.key("tid").value(static_cast<int64_t>(lane));
    w.key("args").beginObject();
    w.key("name").value(lane < lanes.size() ? lanes[lane].name : "lane-" + std::to_string(lane));
    w.endObject();
    w.endObject();
  }
  for (const TraceEvent& e : events) {
    const bool instant = (e.flags & kTraceInstant) != 0;
    w.beginObject();
    w.key("name").value(traceStageName(e.stage));
    w.key("cat").value((e.flags & kTraceSpeculative) ? "speculative" : "stage");
    w.key("ph").value(instant ? "i" : "X");
    w.key("ts").value(static_cast<double>(e.beginNs - origin) / 1000.0);
    if (instant) w.key("s").value("t");
    else w.key("dur").value(static_cast<double>(e.endNs - e.beginNs) / 1000.0);
    w.key("pid").value(1);
    w.key("tid").value(static_cast<int64_t>(e.lane));
    w.key("args").beginObject();
    w.key("request").value(static_cast<int64_t>(e.requestId));
    w.key("arg0").value(static_cast<int64_t>(e.arg0));
    w.key("arg1").value(static_cast<int64_t>(e.arg1));
    if (e.flags & kTraceRollback) w.key("rollback").value(true);
    if (e.flags & kTraceGpu) w.key("gpu").value(true);
    w.endObject();
    w.endObject();
  }
  w.endArray();
  w.endObject();
  out << '\n';
}

Status saveChromeTrace(const std::filesystem::path& path, std::span<const TraceEvent> events,
                       const std::vector<TraceLane>& lanes) {
  std::ostringstream os;
  writeChromeTrace(os, events, lanes);
  return writeFileAtomic(path, os.str());
}

}  // namespace rag
