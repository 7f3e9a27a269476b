#include "memory/recompute_cost.h"

#include <algorithm>
#include <cmath>

namespace rag::memory {

void RecomputeCost::add(double rows, double pairs, double seconds) {
  if (!(rows > 0) || !(seconds >= 0) || !std::isfinite(seconds)) return;
  m_rr = kForget * m_rr + rows * rows;
  m_rp = kForget * m_rp + rows * pairs;
  m_pp = kForget * m_pp + pairs * pairs;
  m_rt = kForget * m_rt + rows * seconds;
  m_pt = kForget * m_pt + pairs * seconds;
  ++m_samples;
  const double det = m_rr * m_pp - m_rp * m_rp;
  // Both coefficients when the samples tell rows and pairs apart, else time per row alone.
  if (det > 1e-9 * m_rr * m_pp) {
    const double a = (m_rt * m_pp - m_pt * m_rp) / det;
    const double b = (m_pt * m_rr - m_rt * m_rp) / det;
    if (a >= 0 && b >= 0) {
      m_a = a;
      m_b = b;
      return;
    }
  }
  m_a = std::max(0.0, m_rt / m_rr);
  m_b = 0;
}

double RecomputeCost::seconds(int64_t prefix, int64_t tokens) const {
  const double n = static_cast<double>(std::max<int64_t>(0, tokens));
  const double p = static_cast<double>(std::max<int64_t>(0, prefix));
  return m_a * n + m_b * (n * p + n * (n + 1) / 2);
}

}  // namespace rag::memory
