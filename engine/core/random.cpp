#include "core/random.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace rag {

uint64_t splitMix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t deriveSeed(uint64_t seed, uint64_t stream) { return splitMix64(seed + stream * 0x9E3779B97F4A7C15ULL); }

double Rng::uniform01() {
  return static_cast<double>(m_engine() >> 11) * 0x1.0p-53;
}

uint64_t Rng::below(uint64_t n) {
  assert(n > 0);
  // Lemire, "Fast Random Integer Generation in an Interval" (2019): the high word of x * n is
  // uniform in [0, n) once the few low words below 2^64 mod n are rejected.
  unsigned __int128 m = static_cast<unsigned __int128>(m_engine()) * n;
  auto low = static_cast<uint64_t>(m);
  if (low < n) {
    uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(m_engine()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::exponential(double rate) {
  // 1 - U lies in (0, 1], so the logarithm is finite.
  return -std::log1p(-uniform01()) / rate;
}

DiscreteSampler::DiscreteSampler(std::span<const double> weights) {
  m_cumulative.reserve(weights.size());
  double sum = 0;
  for (double w : weights) {
    sum += w;
    m_cumulative.push_back(sum);
  }
}

size_t DiscreteSampler::sample(Rng& rng) const {
  assert(!m_cumulative.empty() && m_cumulative.back() > 0);
  double target = rng.uniform01() * m_cumulative.back();
  // The first index whose running sum exceeds the target: zero-weight entries (equal running
  // sums) are never chosen.
  auto it = std::upper_bound(m_cumulative.begin(), m_cumulative.end(), target);
  // u * total can round up to total; then take the first entry that reaches the total.
  if (it == m_cumulative.end())
    it = std::lower_bound(m_cumulative.begin(), m_cumulative.end(), m_cumulative.back());
  return static_cast<size_t>(it - m_cumulative.begin());
}

}  // namespace rag
