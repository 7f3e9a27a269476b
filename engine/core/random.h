// Seeded random draws that give the same numbers with every standard library: workload traces,
// arrivals, training data, samplers and the QA prompt shuffles all draw here. std::mt19937_64's output sequence is fixed by the C++ standard, but the
// distributions (uniform_real_distribution, exponential_distribution, discrete_distribution,
// shuffle) are not: libstdc++ and libc++ turn the same engine output into different values.
// So the engine is standard and every transform from its 64-bit words is written here.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace rag {

// SplitMix64's output function of one state x (it first adds the golden-ratio increment).
uint64_t splitMix64(uint64_t x);

// SplitMix64 of (seed, stream): independent seeds for the separate random streams of one trace
// (arrivals, entities, QA items, workflows), so changing the workflow mix leaves arrival times
// and entities untouched.
uint64_t deriveSeed(uint64_t seed, uint64_t stream);

class Rng {
public:
  explicit Rng(uint64_t seed) : m_engine(seed) {}

  // Uniform in [0, 1): the top 53 bits of one engine word.
  double uniform01();
  // Uniform integer in [0, n), n > 0, without modulo bias (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n);
  // Exponential with the given rate (mean 1/rate) by inverse CDF: -ln(1 - U) / rate.
  double exponential(double rate);
  // Fisher-Yates with below(); the permutation depends only on the seed and the size.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

private:
  std::mt19937_64 m_engine;
};

// Draws index i with probability weights[i] / sum(weights) by binary search over the running
// sum. Weights must be finite and >= 0 with a positive sum (checked by the callers' parsers).
class DiscreteSampler {
public:
  DiscreteSampler() = default;
  explicit DiscreteSampler(std::span<const double> weights);
  size_t sample(Rng& rng) const;
  size_t size() const { return m_cumulative.size(); }

private:
  std::vector<double> m_cumulative;  // inclusive prefix sums
};

}  // namespace rag
