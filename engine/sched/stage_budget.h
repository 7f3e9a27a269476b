// The retrieval sub-stage budget mb of HedraRAG Eq. (1), and the order a sub-stage takes its
// searches in.
//
// Cutting a retrieval stage of t_R seconds (§4.2: "the average time of retrieval stages", the
// batched search of the live requests) into sub-stages of mb seconds lets a request that arrives
// meanwhile wait mb/2 instead of t_R/2 for the search in progress, and costs β (scheduling and
// handling partial results) per sub-stage, t_R/mb of them. The expected gain
//   Δ(mb) = (t_R − mb)/2 − β·t_R/mb
// is largest at mb* = sqrt(2·β·t_R). (The paper prints "+ β·t_R/mb", whose argmax would be
// mb → 0; the overhead term must be a cost, so it is subtracted here.) One search's time and β
// are measured at run time as exponential moving averages; t_R is retrievalStageSeconds below.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "rag/engine.h"

namespace rag::sched {

// Δ(mb) of Eq. (1) for a retrieval of tRetrieval seconds and β seconds of overhead per sub-stage.
inline double subStageGain(double mb, double tRetrieval, double beta) {
  return (tRetrieval - mb) / 2.0 - beta * tRetrieval / mb;
}

// t_R is the retrieval stage's time: what one batched call over every live search would take,
// the searches' remaining shares of one whole search's time. (Read as one search's time, as it
// was, mb* stayed near 2 ms whatever the backlog: under load a sub-stage then advanced the oldest
// search alone, no scan was shared, and β came with every 1.3 ms of scanning, so IRG under hedra
// at 100 rps either held its SLO with 2.8 searches a sub-stage or sank, its first retrievals
// queueing for 4 s at 1.3 a sub-stage, from run to run. With the stage's time mb* grows as the
// square root of the backlog: more searches share each cluster read when more wait.)
inline double retrievalStageSeconds(double searchSeconds, std::span<const double> sharesLeft) {
  double left = 0;
  for (double s : sharesLeft) left += std::clamp(s, 0.0, 1.0);
  return std::max(searchSeconds, 0.0) * left;
}

// argmax Δ over mb in [minSeconds, tRetrieval]: sqrt(2·β·t_R) clamped to that range; tRetrieval
// when the retrieval is shorter than minSeconds.
inline double optimalSubStageSeconds(double tRetrieval, double beta, double minSeconds = 1e-4) {
  if (!(tRetrieval > minSeconds)) return std::max(tRetrieval, minSeconds);
  const double mb = std::sqrt(2.0 * std::max(beta, 0.0) * tRetrieval);
  return std::clamp(mb, minSeconds, tRetrieval);
}

// A live search as a sub-stage ranks it: its request (ids rise with arrival: Scheduler::submit)
// and whether it is speculative.
struct SearchRank {
  uint32_t requestId = 0;
  bool speculative = false;
};

// The order a sub-stage plans `live` (given in admission order) in, as indexes into it: real
// searches before speculative ones, and within each, under OldestFirst the oldest request first
// (one request's searches in admission order), otherwise admission order. Under one SLO the oldest
// request has the earliest deadline: an IRG request's third retrieval goes before the first
// retrieval of a request that arrived after it.
inline std::vector<size_t> subStageOrder(std::span<const SearchRank> live, SubStagePlanning planning) {
  std::vector<size_t> order(live.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const bool byRequest = planning == SubStagePlanning::OldestFirst;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (live[a].speculative != live[b].speculative) return !live[a].speculative;
    return byRequest && live[a].requestId < live[b].requestId;
  });
  return order;
}

// An exponential moving average that starts at its first sample.
class Ema {
public:
  explicit Ema(double weight = 0.1) : m_weight(weight) {}
  void add(double x) { m_value = m_n++ == 0 ? x : m_value + m_weight * (x - m_value); }
  double value() const { return m_value; }
  long samples() const { return m_n; }

private:
  double m_weight;
  double m_value = 0;
  long m_n = 0;
};

}  // namespace rag::sched
