// What recomputing cached KV would cost: a least-squares fit of a forward pass's measured time
// to its work, t ≈ a · rows + b · attended pairs, with exponential forgetting so it follows the
// machine's current speed. The runner feeds it every step; a prefix cache asks it what a node
// of n tokens after a prefix of p tokens would take to prefill again (PGDSF's Cost).
//
//   RecomputeCost cost;
//   cost.add(rows, pairs, stepSeconds);                  // after each forward pass
//   double s = cost.seconds(/*prefix=*/200, /*tokens=*/16);
#pragma once

#include <cstdint>

namespace rag::memory {

class RecomputeCost {
public:
  RecomputeCost() = default;
  // A model with known coefficients (e.g. what a serving run measured), refined by add() as usual.
  RecomputeCost(double perRow, double perPair) : m_a(perRow), m_b(perPair) {}
  // `pairs`: the (query, key) pairs the pass attended, sum over its rows of the row's context.
  void add(double rows, double pairs, double seconds);
  // Prefilling `tokens` tokens after `prefix` computed ones: a·n + b·(n·prefix + n(n+1)/2).
  double seconds(int64_t prefix, int64_t tokens) const;
  double perRow() const { return m_a; }
  double perPair() const { return m_b; }
  int64_t samples() const { return m_samples; }

private:
  static constexpr double kForget = 0.995;
  // Sums of the normal equations, decayed by kForget per sample.
  double m_rr = 0, m_rp = 0, m_pp = 0, m_rt = 0, m_pt = 0;
  double m_a = 1e-5, m_b = 0;  // before any sample: 10 µs a row, nothing per pair
  int64_t m_samples = 0;
};

}  // namespace rag::memory
