// The greedy aggregator scheduler (DRAGON §5.1, Eq. 6–8): after each aggregation, which side
// should aggregate next.
//
//   SideScheduler sched(AggregatorPolicy::Greedy, seed);
//   Side next = sched.choose(current, prof, contextLen);
//
// With `loc` the side aggregating now and `rem` the other, d the decode delays, a the
// acceptance estimates and rtt the round trip (a rejected remote draft costs a verdict one way
// and a new draft back), Eq. 7 gives the expected latency per token if `loc` keeps aggregating,
//   z_loc = a_rem·max(d_loc, d_rem) + (1 − a_rem)·max(d_loc, d_rem + rtt),
// and Eq. 8 its difference Δz = z_loc − z_rem as a piecewise function of d_loc − d_rem. The
// aggregator moves to `rem` (with the target token, in the verdict) when Δz > 0.
// Baseline policies: always the device, always the cloud, a fair coin.
#pragma once

#include <cstdint>

#include "core/random.h"
#include "dragon/profiler.h"
#include "dragon/protocol.h"

namespace rag::dragon {

// Eq. 7, the expected latency per token when `loc` aggregates.
double expectedLatency(double dLoc, double dRem, double aRem, double rtt);
// Eq. 8 (equal to expectedLatency(loc) − expectedLatency(rem)).
double latencyDifference(double dLoc, double dRem, double aLoc, double aRem, double rtt);

class SideScheduler {
public:
  SideScheduler(AggregatorPolicy policy, uint64_t seed) : m_policy(policy), m_rng(seed) {}
  Side choose(Side current, const Profiler& prof, double contextLen);
  AggregatorPolicy policy() const { return m_policy; }

private:
  AggregatorPolicy m_policy;
  Rng m_rng;
};

}  // namespace rag::dragon
