// Workload trace files (engine/workload/trace_file.h): any text either reads as requests with
// unique ids >= 0 and non-decreasing arrival times >= 0, or gives an error naming the file.
#include <unordered_set>

#include "fuzz_check.h"
#include "workload/trace_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rag::workload;
  rag::Result<std::vector<TraceRequest>> trace = parseWorkloadTrace(rag::fuzz::asText(data, size), "fuzz.jsonl");
  if (!trace) {
    RAG_FUZZ_CHECK(trace.status().message().find("fuzz.jsonl") != std::string::npos);
    return 0;
  }
  std::unordered_set<int64_t> ids;
  double last = 0;
  for (const TraceRequest& r : *trace) {
    RAG_FUZZ_CHECK(r.id >= 0 && ids.insert(r.id).second);
    RAG_FUZZ_CHECK(r.arrivalS >= last);
    last = r.arrivalS;
  }
  return 0;
}
