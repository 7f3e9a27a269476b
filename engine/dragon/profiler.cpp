#include "dragon/profiler.h"

#include <algorithm>
#include <cmath>

namespace rag::dragon {

DecodeFit fitDecodeTime(std::span<const std::pair<double, double>> samples) {
  DecodeFit f;
  if (samples.empty()) return f;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(samples.size());
  for (auto [x, y] : samples) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  if (samples.size() < 2 || std::abs(den) < 1e-12) {
    f.interceptMs = sy / n;
    return f;
  }
  f.slopeMs = std::max(0.0, (n * sxy - sx * sy) / den);
  f.interceptMs = (sy - f.slopeMs * sx) / n;
  if (f.interceptMs < 0) {  // a clamped slope or noise: keep the line through the mean
    f.interceptMs = 0;
    f.slopeMs = sxx > 0 ? std::max(0.0, sxy / sxx) : 0;
  }
  return f;
}

void Profiler::setOfflineFit(Side s, const DecodeFit& fit) {
  m_fit[idx(s)] = fit;
  m_hasFit[idx(s)] = true;
}

void Profiler::observeDecode(Side s, double ms, double contextLen) {
  DecodeFit& f = m_fit[idx(s)];
  if (!m_hasFit[idx(s)]) {  // no offline fit: start from a flat line at the first sample
    f.interceptMs = ms;
    f.slopeMs = 0;
    m_hasFit[idx(s)] = true;
    return;
  }
  if (contextLen <= 0) return;
  f.slopeMs = std::max(0.0, (1 - kSlopeRate) * f.slopeMs + kSlopeRate * (ms - f.interceptMs) / contextLen);
}

void Profiler::observeRtt(double instantMs, double historicalMs) {
  m_rttInstant = instantMs;
  m_rttHistorical = historicalMs;
}

void Profiler::observeAcceptance(Side s, double alpha) {
  double& a = m_accept[idx(s)];
  a = (1 - kAcceptRate) * a + kAcceptRate * std::clamp(alpha, 0.0, 1.0);
}

}  // namespace rag::dragon
