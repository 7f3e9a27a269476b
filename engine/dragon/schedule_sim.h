// A timing simulator of speculative aggregation (the paper's Fig. 8 experiment): the time to
// generate N tokens when each side's drafts are accepted or rejected as a given acceptance
// sequence says, for each aggregator policy, with measured decode times and a round trip.
//
//   SimParams p{.decodeMs = {dDevice, dCloud}, .rttMs = 200, .maxAhead = 3};
//   double ms = simulateSchedule(p, acceptDevice, acceptCloud, AggregatorPolicy::Greedy, seed);
//
// The model follows the speculative loop (speculative_run.cpp): each side decodes its drafts one
// after another, at most maxAhead past the last target token it knows of; a draft reaches the
// other side half a round trip later; the aggregator aggregates position t once it holds both
// drafts of t; a verdict reaches the other side half a round trip later; a rejected side starts
// again from the verdict once its decoder is free (the stale draft in progress is wasted); a
// handed-over aggregator starts when the verdict that hands it over arrives. The greedy policy
// sees what the real one sees: the decode times, the round trip and a moving average of the
// acceptances so far. Aggregation itself takes no time.
#pragma once

#include <cstdint>
#include <span>

#include "dragon/protocol.h"

namespace rag::dragon {

struct SimParams {
  double decodeMs[2] = {1, 1};  // per draft, by Side
  double rttMs = 0;
  uint32_t maxAhead = 3;
};

// Milliseconds from the first draft to the last target token. The acceptance sequences (1:
// accepted) give the token count (the shorter of the two).
double simulateSchedule(const SimParams& p, std::span<const uint8_t> acceptDevice, std::span<const uint8_t> acceptCloud,
                        AggregatorPolicy policy, uint64_t seed);

}  // namespace rag::dragon
