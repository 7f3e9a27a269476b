#include "workload/driver.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/random.h"

namespace rag {

std::vector<double> poissonArrivals(size_t count, double rate, uint64_t seed) {
  std::vector<double> at;
  at.reserve(count);
  Rng rng(seed);
  double t = 0;
  for (size_t i = 0; i < count; ++i) {
    at.push_back(t);
    if (rate > 0) t += rng.exponential(rate);
  }
  return at;
}

ArrivalPacer::ArrivalPacer(std::vector<double> arrivalsS) : m_at(std::move(arrivalsS)), m_startNs(nowNs()) {}

bool ArrivalPacer::due() const { return !finished() && nsUntilDue() == 0; }

uint64_t ArrivalPacer::nsUntilDue() const {
  if (finished()) return 0;
  const uint64_t dueNs = m_startNs + static_cast<uint64_t>(std::max(0.0, m_at[m_next]) * 1e9);
  const uint64_t now = nowNs();
  return dueNs > now ? dueNs - now : 0;
}

}  // namespace rag

namespace rag::workload {

std::vector<TraceRequest> poissonTrace(std::span<const TraceRequest> questions, size_t count, double rate,
                                       uint64_t seed, Workflow workflow) {
  std::vector<TraceRequest> out;
  if (questions.empty()) return out;
  const std::vector<double> at = poissonArrivals(count, rate, seed);
  for (size_t i = 0; i < count; ++i) {
    TraceRequest r = questions[i % questions.size()];
    r.id = static_cast<int64_t>(i);
    r.arrivalS = at[i];
    r.workflow = workflow;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Submission> replayTrace(std::span<const TraceRequest> trace, const SubmitFn& submit,
                                    const ReplayOptions& options) {
  std::vector<Submission> out;
  out.reserve(trace.size());
  std::vector<double> at;
  at.reserve(trace.size());
  for (const TraceRequest& r : trace) at.push_back(r.arrivalS);
  ArrivalPacer pacer(std::move(at));
  auto stopped = [&] { return options.stop && options.stop->load(); };
  while (!pacer.finished() && !stopped()) {
    // Sleep in slices so that a stop is honoured within 50 ms even between sparse arrivals.
    if (!pacer.due()) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(pacer.nsUntilDue(), 50'000'000)));
      continue;
    }
    const size_t i = pacer.next();
    pacer.advance();
    Submission s;
    s.index = i;
    s.submittedNs = nowNs();
    s.handle = submit(trace[i]);
    if (options.onSubmitted) options.onSubmitted(s);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace rag::workload
