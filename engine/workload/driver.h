// The one workload driver: plays requests against a serving engine at their arrival times. The
// requests come from a trace file (`ragraph trace make`, workload/trace_file.h) or from Poisson
// arrivals drawn here with core/random.h, so a seed gives the same arrival times with every
// standard library. `ragraph bench serve` (--trace-in or its Poisson grid), `ragraph demo` and
// the workbench's run panel all drive through it.
//
//   std::vector<TraceRequest> trace = poissonTrace(questions, /*count=*/96, /*rate=*/16, /*seed=*/1);
//   std::vector<Submission> subs = replayTrace(trace, [&](const TraceRequest& r) {
//     return engine.submit(r.question, graphFor(r.workflow));
//   });
//   for (Submission& s : subs) if (s.handle) ... s.handle->wait() ...
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "rag/arrivals.h"
#include "rag/request.h"
#include "workload/workload_trace.h"

namespace rag::workload {

// `count` requests of `workflow` arriving as poissonArrivals(count, rate, seed) does, the
// questions taken from `questions` in turn (repeating when count exceeds them). Ids 0, 1, ...
std::vector<TraceRequest> poissonTrace(std::span<const TraceRequest> questions, size_t count, double rate,
                                       uint64_t seed, Workflow workflow);

struct Submission {
  size_t index = 0;               // into the trace
  uint64_t submittedNs = 0;       // rag::nowNs() when it was submitted
  Result<RequestHandle> handle = Status::cancelled("not submitted");
};

struct ReplayOptions {
  const std::atomic<bool>* stop = nullptr;              // set: no further submissions
  std::function<void(const Submission&)> onSubmitted;   // after each submission (e.g. progress)
};

using SubmitFn = std::function<Result<RequestHandle>(const TraceRequest&)>;

// Submits trace[i] at its arrival_s after the call, in order, from the calling thread (sleeping
// in between; a late submission goes at once); returns every submission in trace order, up to
// where a stop was asked for. A submit that fails (Busy, say) is recorded, not retried.
std::vector<Submission> replayTrace(std::span<const TraceRequest> trace, const SubmitFn& submit,
                                    const ReplayOptions& options = {});

}  // namespace rag::workload
