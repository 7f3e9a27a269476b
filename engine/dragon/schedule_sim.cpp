#include "dragon/schedule_sim.h"

#include <algorithm>
#include <vector>

#include "core/random.h"
#include "dragon/side_scheduler.h"

namespace rag::dragon {

double simulateSchedule(const SimParams& p, std::span<const uint8_t> acceptDevice, std::span<const uint8_t> acceptCloud,
                        AggregatorPolicy policy, uint64_t seed) {
  const size_t n = std::min(acceptDevice.size(), acceptCloud.size());
  if (n == 0) return 0;
  const std::span<const uint8_t> accept[2] = {acceptDevice, acceptCloud};
  const double ow = p.rttMs / 2;
  const size_t ahead = std::max<uint32_t>(1, p.maxAhead);
  std::vector<double> finish[2], learn[2];
  for (int s = 0; s < 2; ++s) {
    finish[s].assign(n, 0);
    learn[s].assign(n, 0);
  }
  Profiler prof;
  for (int s = 0; s < 2; ++s) prof.setOfflineFit(static_cast<Side>(s), {0, p.decodeMs[s]});
  prof.observeRtt(p.rttMs, p.rttMs);
  SideScheduler sched(policy, seed);
  Side agg = policy == AggregatorPolicy::Cloud ? Side::Cloud : Side::Device;
  double prevA = 0;
  for (size_t t = 0; t < n; ++t) {
    for (int s = 0; s < 2; ++s) {
      const double d = p.decodeMs[s];
      double start = 0;
      if (t > 0 && !accept[s][t - 1]) {
        // Rejected at t-1: the decoder restarts once it learns so and its stale draft is done.
        const double L = learn[s][t - 1];
        double busy = finish[s][t - 1];
        for (size_t j = t; j <= t - 1 + ahead; ++j) {
          const double cap = j >= ahead ? learn[s][j - ahead] : 0;
          const double st = std::max(busy, cap);
          if (st >= L) break;
          busy = st + d;
        }
        start = std::max(L, busy);
      } else if (t > 0) {
        start = std::max(finish[s][t - 1], t >= ahead ? learn[s][t - ahead] : 0.0);
      }
      finish[s][t] = start + d;
    }
    const auto a = static_cast<size_t>(agg);
    double at = std::max(finish[a][t], finish[1 - a][t] + ow);
    at = std::max(at, prevA);
    learn[a][t] = at;
    learn[1 - a][t] = at + ow;
    for (int s = 0; s < 2; ++s) prof.observeAcceptance(static_cast<Side>(s), accept[s][t] ? 1.0 : 0.0);
    const Side next = sched.choose(agg, prof, 0);
    // A handed-over aggregator starts when the verdict that hands it over arrives.
    prevA = next == agg ? at : at + ow;
    agg = next;
    if (t + 1 == n) return at;
  }
  return prevA;
}

}  // namespace rag::dragon
