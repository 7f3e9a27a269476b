#include "dragon/side_scheduler.h"

#include <algorithm>

namespace rag::dragon {

double expectedLatency(double dLoc, double dRem, double aRem, double rtt) {
  return aRem * std::max(dLoc, dRem) + (1 - aRem) * std::max(dLoc, dRem + rtt);
}

double latencyDifference(double dLoc, double dRem, double aLoc, double aRem, double rtt) {
  if (dLoc <= dRem - rtt) return (1 - aRem) * rtt;
  if (dLoc <= dRem) return (1 - aLoc) * (dRem - dLoc) + (aLoc - aRem) * rtt;
  if (dLoc <= dRem + rtt) return (1 - aRem) * (dRem - dLoc) + (aLoc - aRem) * rtt;
  return (aLoc - 1) * rtt;
}

Side SideScheduler::choose(Side current, const Profiler& prof, double contextLen) {
  switch (m_policy) {
    case AggregatorPolicy::Device: return Side::Device;
    case AggregatorPolicy::Cloud: return Side::Cloud;
    case AggregatorPolicy::Random: return m_rng.uniform01() < 0.5 ? Side::Device : Side::Cloud;
    case AggregatorPolicy::Greedy: break;
  }
  const Side rem = other(current);
  const double dz = latencyDifference(prof.decodeMs(current, contextLen), prof.decodeMs(rem, contextLen),
                                      prof.acceptance(current), prof.acceptance(rem), prof.rttMs());
  return dz > 0 ? rem : current;
}

}  // namespace rag::dragon
