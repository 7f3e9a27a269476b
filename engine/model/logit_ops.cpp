#include "model/logit_ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace rag::model {

namespace {

// Four lanes: one SSE2 (every x86-64) or NEON register. Wider types than the target has are
// lowered to scalar code by GCC, so 4 it is; the loops keep several vectors in flight.
using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
using D2 = double __attribute__((vector_size(16)));
constexpr size_t kLanes = 4;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

[[gnu::always_inline]] inline F4 splat(float v) { return F4{} + v; }

[[gnu::always_inline]] inline F4 load(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// `a > b ? a : b` lane by lane: a NaN in `a` keeps `b`, so NaN never wins.
[[gnu::always_inline]] inline F4 maxKeepingNonNaN(F4 a, F4 b) { return a > b ? a : b; }

[[gnu::always_inline]] inline float laneMax(F4 v, float r) {
  for (size_t i = 0; i < kLanes; ++i) r = v[i] > r ? v[i] : r;
  return r;
}

// Four float lanes summed into two double vectors.
struct DoubleSum {
  D2 low{}, high{};
  void add(F4 v) {
    low += __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1), D2);
    high += __builtin_convertvector(__builtin_shufflevector(v, v, 2, 3), D2);
  }
  double total() const { return low[0] + low[1] + high[0] + high[1]; }
};

// exp(d) for d <= 0, 0 below -87 and for NaN. Cephes' expf: d = n ln2 + r with n an integer and
// |r| <= ln2 / 2, exp(r) by a degree-7 polynomial, 2^n built in the exponent bits.
[[gnu::always_inline]] inline F4 expNonPositive(F4 d) {
  const F4 lowest = splat(-87.5f);
  F4 dc = d >= lowest ? d : lowest;  // NaN becomes -87.5 here and 0 below
  F4 t = dc * 1.44269504088896341f;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding and subtracting rounds to an integer
  F4 nf = (t + magic) - magic;
  F4 r = dc - nf * 0.693359375f;     // ln2 split in two for an exact product with the high part
  r = r - nf * -2.12194440e-4f;
  F4 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  F4 y = p * r * r + r + 1.0f;
  I4 n = __builtin_convertvector(nf, I4);  // in [-126, 0]
  F4 scale = std::bit_cast<F4>((n + 127) << 23);
  F4 v = y * scale;
  return d >= splat(-87.0f) ? v : F4{};
}

// One step of scaledExp over 4 values.
[[gnu::always_inline]] inline F4 scaledExp4(F4 x, float max, float scale) { return expNonPositive((x - max) * scale); }

}  // namespace

float maxLogit(const float* x, size_t n) {
  // Four accumulators, so the loop is bound by loads rather than by one dependency chain.
  F4 m0 = splat(kNegInf), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
    m0 = maxKeepingNonNaN(load(x + i), m0);
    m1 = maxKeepingNonNaN(load(x + i + kLanes), m1);
    m2 = maxKeepingNonNaN(load(x + i + 2 * kLanes), m2);
    m3 = maxKeepingNonNaN(load(x + i + 3 * kLanes), m3);
  }
  for (; i + kLanes <= n; i += kLanes) m0 = maxKeepingNonNaN(load(x + i), m0);
  m0 = maxKeepingNonNaN(m1, m0);
  m2 = maxKeepingNonNaN(m3, m2);
  float r = laneMax(maxKeepingNonNaN(m2, m0), kNegInf);
  for (; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

ptrdiff_t argmaxLogit(const float* x, size_t n) {
  // The block that first reaches the maximum, then the first index in it that holds it.
  constexpr size_t kBlock = 256;
  float best = kNegInf;
  size_t bestBlock = n;
  for (size_t b = 0; b < n; b += kBlock) {
    float m = maxLogit(x + b, std::min(kBlock, n - b));
    if (m > best) {
      best = m;
      bestBlock = b;
    }
  }
  if (bestBlock == n) return -1;
  for (size_t i = bestBlock;; ++i)
    if (x[i] == best) return static_cast<ptrdiff_t>(i);
}

double scaledExp(const float* x, size_t n, float max, float scale, float* out) {
  DoubleSum sum;  // in double: the sum of 150k weights should not lose digits
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F4 v = scaledExp4(load(x + i), max, scale);
    std::memcpy(out + i, &v, sizeof v);
    sum.add(v);
  }
  double total = sum.total();
  if (i < n) {  // the tail, padded with -inf (weight 0)
    float pad[kLanes];
    std::fill(pad, pad + kLanes, kNegInf);
    std::memcpy(pad, x + i, (n - i) * sizeof(float));
    F4 v = scaledExp4(load(pad), max, scale);
    for (size_t l = 0; i + l < n; ++l) {
      out[i + l] = v[l];
      total += v[l];
    }
  }
  return total;
}

float tokenLogprob(const float* x, size_t n, ptrdiff_t token, std::vector<float>& scratch) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  if (token < 0 || static_cast<size_t>(token) >= n) return kNone;
  const float max = maxLogit(x, n);
  const float v = x[token];
  if (!(max > kNone) || max == std::numeric_limits<float>::infinity() || !(v > kNone)) return kNone;
  scratch.resize(n);
  const double sum = scaledExp(x, n, max, 1.0f, scratch.data());  // >= 1: the max's own term
  return static_cast<float>(static_cast<double>(v - max) - std::log(sum));
}

double sumAtLeast(const float* w, size_t n, float threshold) {
  DoubleSum sum;
  const F4 t = splat(threshold);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F4 v = load(w + i);
    sum.add(v >= t ? v : F4{});
  }
  double total = sum.total();
  for (; i < n; ++i)
    if (w[i] >= threshold) total += w[i];
  return total;
}

}  // namespace rag::model
