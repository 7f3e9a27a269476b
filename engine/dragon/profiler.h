// The DRAGON profiler (§5.2): what the side scheduler needs to evaluate Eq. 6–8.
//
//   Profiler prof;
//   prof.setOfflineFit(Side::Device, fitDecodeTime(samples));   // offline: d(l) = k·l + b
//   prof.observeDecode(Side::Cloud, draft.decodeMs, draft.contextLen);  // online, per draft
//   prof.observeRtt(transport.rtt().instantMs);                  // from the in-band echo
//   prof.observeAcceptance(Side::Cloud, r.acceptance[1]);         // Eq. 5, moving average
//   SideEstimate e = prof.estimate(Side::Cloud, contextLen);
//
// Decode time: a least-squares line over (context length, ms) samples measured offline; online,
// each measured d updates the slope with the intercept frozen, k ← (1−η)k + η(d−b)/l (η = 0.1).
// RTT: the transport's two moving averages (instant, historical); the scheduler uses the
// larger, so one fast sample does not hide a slow link. Acceptance: an exponential moving
// average (weight 0.2 on a new value) starting at 0.5.
// Not thread-safe: the protocol loop that owns it calls it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>

#include "dragon/protocol.h"

namespace rag::dragon {

struct DecodeFit {
  double slopeMs = 0;      // per context token
  double interceptMs = 0;
  double at(double contextLen) const { return interceptMs + slopeMs * contextLen; }
};

// Least squares over (context length, decode ms) pairs; a flat line at the mean for fewer than
// two distinct lengths; the slope is clamped at 0 (decoding never gets faster with context).
DecodeFit fitDecodeTime(std::span<const std::pair<double, double>> samples);

class Profiler {
public:
  void setOfflineFit(Side s, const DecodeFit& fit);
  void observeDecode(Side s, double ms, double contextLen);
  void observeRtt(double instantMs, double historicalMs);
  void observeAcceptance(Side s, double alpha);

  double decodeMs(Side s, double contextLen) const { return m_fit[idx(s)].at(contextLen); }
  double rttMs() const { return std::max(m_rttInstant, m_rttHistorical); }
  double acceptance(Side s) const { return m_accept[idx(s)]; }
  const DecodeFit& fit(Side s) const { return m_fit[idx(s)]; }

  static constexpr double kSlopeRate = 0.1;
  static constexpr double kAcceptRate = 0.2;

private:
  static size_t idx(Side s) { return static_cast<size_t>(s); }
  std::array<DecodeFit, 2> m_fit{};
  std::array<bool, 2> m_hasFit{false, false};
  std::array<double, 2> m_accept{0.5, 0.5};
  double m_rttInstant = 0, m_rttHistorical = 0;
};

}  // namespace rag::dragon
