// Request arrivals for anything that drives the engine: Poisson arrival times drawn with the
// engine's own RNG (core/random.h, so a seed gives the same times with every standard library)
// and a pacer that says, without blocking, which arrival is due. The one workload driver
// (workload/driver.h: `bench serve`, `ragraph demo`) replays traces on it; the workbench's run
// panel, which collects answers on the same thread while it submits, steps it itself.
//
//   rag::ArrivalPacer pacer(rag::poissonArrivals(/*count=*/64, /*rate=*/8, /*seed=*/1));
//   while (!pacer.finished()) {
//     if (pacer.due()) { submit(pacer.next()); pacer.advance(); }
//     else { collectAnswers(); sleepAtMost(pacer.nsUntilDue()); }
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rag {

// Arrival times (seconds) of `count` Poisson arrivals at `rate` per second, the first at 0.
// rate <= 0 means "all at once": every arrival at 0.
std::vector<double> poissonArrivals(size_t count, double rate, uint64_t seed);

// Replays arrival times against the steady clock, which starts at construction.
class ArrivalPacer {
public:
  explicit ArrivalPacer(std::vector<double> arrivalsS);

  size_t size() const { return m_at.size(); }
  size_t next() const { return m_next; }              // index of the next arrival to submit
  bool finished() const { return m_next >= m_at.size(); }
  bool due() const;                                    // the next arrival's time has come
  uint64_t nsUntilDue() const;                         // 0 when due or finished
  void advance() { if (m_next < m_at.size()) ++m_next; }  // the next arrival was submitted
  void stop() { m_next = m_at.size(); }                // no further arrivals

private:
  std::vector<double> m_at;
  size_t m_next = 0;
  uint64_t m_startNs = 0;
};

}  // namespace rag
