// Vectorised passes over one row of logits, the inner loops of the sampler. They run at memory
// speed on a 150k-token vocabulary: GCC does not vectorise a NaN-aware max or an exp by itself,
// so these are written with GCC/Clang vector extensions (8 floats at a time, any target).
//
//   std::span<const float> row = ...;                        // F32 [vocab]
//   ptrdiff_t best = argmaxLogit(row.data(), row.size());    // greedy choice, -1 if none
//   float mx = maxLogit(row.data(), row.size());
//   std::vector<float> w(row.size());
//   double total = scaledExp(row.data(), row.size(), mx, 1 / temperature, w.data());
//   // w[i] / total is softmax(row / temperature)[i]
//
// NaN logits are never the max or argmax and get weight 0, as do -inf logits (a masked token).
#pragma once

#include <cstddef>
#include <vector>

namespace rag::model {

// The index of the largest element of x (size n), the lowest index on ties, skipping NaN and
// -inf; -1 when there is none (n == 0, or every element is NaN or -inf).
ptrdiff_t argmaxLogit(const float* x, size_t n);

// The largest element of x (size n) that is not NaN; -inf when there is none.
float maxLogit(const float* x, size_t n);

// out[i] = exp((x[i] - max) * scale) for i < n, and returns the sum of out (in double).
// Requires max finite and >= every x[i], and scale finite and >= 0. out[i] is 0 where x[i] is
// NaN or -inf, and where the exponent is below -87 (where exp leaves float's normal range:
// such a token is 1e-38 times less likely than the best and cannot be drawn anyway). Each
// value is within 2e-7 relative of the exact exp; an exponent of 0 gives exactly 1.
double scaledExp(const float* x, size_t n, float max, float scale, float* out);

// The sum (in double) of the elements of w (size n) that are >= threshold; NaN counts as 0.
double sumAtLeast(const float* w, size_t n, float threshold);

// log softmax(x)[token]: the natural log of token's probability under the logits x (size n),
// through scaledExp into `scratch` (resized to n). -inf when x[token] is NaN or -inf, or when
// token is outside [0, n) or no logit is finite.
float tokenLogprob(const float* x, size_t n, ptrdiff_t token, std::vector<float>& scratch);

}  // namespace rag::model
