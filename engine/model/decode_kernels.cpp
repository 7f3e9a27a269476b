#include "model/decode_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/target_clones.h"

namespace rag::model::cpu {

namespace {

constexpr int64_t kLanes = 16;  // one AVX-512 register of floats; two AVX2 ones

// The helpers are inlined into each clone and vectorised for its instruction set: the fixed
// 16-wide inner loops become one (or two) vector FMAs per step.
[[gnu::always_inline]] inline float horizontal(const float* acc) {
  float s = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

[[gnu::always_inline]] inline float dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  float s = horizontal(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// exp(x), branch-free so a loop of it vectorises: Cephes' range reduction to [-ln2/2, ln2/2]
// and its degree-6 polynomial, within 2 ulp of std::exp on [-87, 88]; x is clamped to that
// range (exp(-87) ~ 1.6e-38 stands in for denormals and 0, exp(88) ~ 1.7e38 for overflow).
[[gnu::always_inline]] inline float expApprox(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // n = round(x / ln2) by the 1.5 * 2^23 trick (the sum's low mantissa bits are n): plain
  // arithmetic, where std::floor and a float-to-int conversion kept GCC from vectorising the
  // loops that call this (it needs -fno-trapping-math for the one, and if-converts the other
  // only sometimes).
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = (std::bit_cast<int32_t>(shifted) - 0x4B400000 + 127) << 23;
  return p * std::bit_cast<float>(e);
}

}  // namespace

RAG_CLONES
void rmsNorm(const float* x, const float* g, int64_t rows, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, dim) / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * inv * g[i];
  }
}

namespace {

constexpr int64_t kTile = 64;  // outputs per tile: four AVX-512 accumulators per row

// y[r, o0 + j] for j < width (width == W when W is not 0: a fixed trip count, so the
// accumulators are whole vector registers) over R rows: for every input i, one weight row
// segment wt[i, o0 .. o0 + width) is loaded once and multiplied into every row's accumulators
// (a broadcast FMA, no horizontal sums).
template <int64_t R, int64_t W>
[[gnu::always_inline]] inline void tile(const float* x, int64_t in, const float* wt, int64_t ldw, const float* bias,
                                        int64_t o0, int64_t width, float* y, int64_t ldy, bool accumulate) {
  const int64_t wd = W ? W : width;
  float acc[R][kTile] = {};
  for (int64_t i = 0; i < in; ++i) {
    const float* wr = wt + i * ldw + o0;
    for (int64_t r = 0; r < R; ++r) {
      const float xv = x[r * in + i];
      for (int64_t j = 0; j < wd; ++j) acc[r][j] += xv * wr[j];
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    float* dst = y + r * ldy + o0;
    for (int64_t j = 0; j < wd; ++j)
      dst[j] = (accumulate ? dst[j] : 0.0f) + (bias ? bias[o0 + j] : 0.0f) + acc[r][j];
  }
}

// All rows against outputs [o, o + width): four rows at a time, then the 1-3 left over. The
// tile's weight strip (in x 64 floats) is read from memory once and stays in L2 for the rows.
template <int64_t W>
[[gnu::always_inline]] inline void allRows(const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw,
                                           const float* bias, int64_t o, int64_t width, float* y, int64_t ldy,
                                           bool accumulate) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) tile<4, W>(x + r * in, in, wt, ldw, bias, o, width, y + r * ldy, ldy, accumulate);
  switch (rows - r) {
    case 3: tile<3, W>(x + r * in, in, wt, ldw, bias, o, width, y + r * ldy, ldy, accumulate); break;
    case 2: tile<2, W>(x + r * in, in, wt, ldw, bias, o, width, y + r * ldy, ldy, accumulate); break;
    case 1: tile<1, W>(x + r * in, in, wt, ldw, bias, o, width, y + r * ldy, ldy, accumulate); break;
    default: break;
  }
}

// R rows (1-3: decode at a small batch) against outputs [o0, o1), the weights read in memory
// order: for each input i, the run wt[i, c0 .. c1) is multiplied into accumulators that stay in
// L1 (R x kStreamChunk floats), four inputs per pass over them. Each weight row is a contiguous
// run, so the hardware prefetcher streams the matrix at the memory's bandwidth; the 64-wide tiles
// above walk down columns instead, one 256-byte piece per 4+ KiB row, which the prefetcher
// (working within a page) cannot run ahead of. On the 28M model's matrices at batch 1, one core,
// the two builds one after the other: 21.1-21.8 GB/s with tiles, 24.2-28.9 streaming.
constexpr int64_t kStreamChunk = 1024;

template <int64_t R>
[[gnu::always_inline]] inline void streamRows(const float* x, int64_t in, const float* wt, int64_t ldw, const float* bias,
                                              int64_t o0, int64_t o1, float* y, int64_t ldy, bool accumulate) {
  float acc[R][kStreamChunk];
  for (int64_t c0 = o0; c0 < o1; c0 += kStreamChunk) {
    const int64_t n = std::min(o1 - c0, kStreamChunk);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < n; ++j) acc[r][j] = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= in; i += 4) {
      const float* w0 = wt + i * ldw + c0;
      const float* w1 = w0 + ldw;
      const float* w2 = w1 + ldw;
      const float* w3 = w2 + ldw;
      for (int64_t r = 0; r < R; ++r) {
        const float* xr = x + r * in + i;
        const float x0 = xr[0], x1 = xr[1], x2 = xr[2], x3 = xr[3];
        float* a = acc[r];
        for (int64_t j = 0; j < n; ++j) a[j] += x0 * w0[j] + x1 * w1[j] + x2 * w2[j] + x3 * w3[j];
      }
    }
    for (; i < in; ++i) {
      const float* w0 = wt + i * ldw + c0;
      for (int64_t r = 0; r < R; ++r) {
        const float x0 = x[r * in + i];
        float* a = acc[r];
        for (int64_t j = 0; j < n; ++j) a[j] += x0 * w0[j];
      }
    }
    for (int64_t r = 0; r < R; ++r) {
      float* dst = y + r * ldy + c0;
      for (int64_t j = 0; j < n; ++j)
        dst[j] = (accumulate ? dst[j] : 0.0f) + (bias ? bias[c0 + j] : 0.0f) + acc[r][j];
    }
  }
}

}  // namespace

RAG_CLONES
void linear(const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw, const float* bias, int64_t o0,
            int64_t o1, float* y, int64_t ldy, bool accumulate) {
  switch (rows) {
    case 1: return streamRows<1>(x, in, wt, ldw, bias, o0, o1, y, ldy, accumulate);
    case 2: return streamRows<2>(x, in, wt, ldw, bias, o0, o1, y, ldy, accumulate);
    case 3: return streamRows<3>(x, in, wt, ldw, bias, o0, o1, y, ldy, accumulate);
    default: break;
  }
  int64_t o = o0;
  for (; o + kTile <= o1; o += kTile) allRows<kTile>(x, rows, in, wt, ldw, bias, o, kTile, y, ldy, accumulate);
  // A half tile with a fixed width too (a 32-wide head's attention output is one): the
  // runtime-width loop cannot keep its accumulators in registers.
  if (o + kTile / 2 <= o1) {
    allRows<kTile / 2>(x, rows, in, wt, ldw, bias, o, kTile / 2, y, ldy, accumulate);
    o += kTile / 2;
  }
  if (o < o1) allRows<0>(x, rows, in, wt, ldw, bias, o, o1 - o, y, ldy, accumulate);
}

RAG_CLONES
void layerNorm(const float* x, const float* g, const float* b, int64_t rows, int64_t dim, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(dim);
    float var = 0.0f;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] - mean) * inv * g[i] + b[i];
  }
}

RAG_CLONES
void gelu(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float z = x[i] * 0.70710678118654752f;  // erf(x / sqrt(2))
    const float a = std::fabs(z);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float e = 1.0f - poly * expApprox(-a * a);
    out[i] = 0.5f * x[i] * (1.0f + std::copysign(e, z));
  }
}

void rope(float* x, int64_t heads, int64_t d, const float* cos, const float* sin) {
  const int64_t half = d / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * d;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i + half] + a * sin[i + half];
    }
  }
}

RAG_CLONES
void siluMul(const float* gateUp, int64_t rows, int64_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gateUp + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + expApprox(-g[i])) * u[i];
  }
}

namespace {

// attendDecode for head width D (0: the runtime width d). Positions are the outer loop: each
// pooled K/V row (all KV heads of one position, contiguous) is read once, in order, for every
// query head, which keeps many independent loads in flight; per-head passes over the pool
// were bound by load latency.
template <int64_t D>
[[gnu::always_inline]] inline void attend(const float* q, int64_t h0, int64_t h1, int64_t heads, const PagedKv& kv,
                                          int64_t ctx, float scale, float* scores, float* out) {
  const int64_t d = D ? D : kv.headDim, bs = kv.blockSize, stride = kv.kvHeads * kv.headDim;
  const int64_t group = heads / kv.kvHeads, nh = h1 - h0;
  auto rowOf = [&](const float* pool, int64_t p) {
    return pool + (static_cast<int64_t>(kv.blocks[p / bs]) * bs + p % bs) * stride;
  };
  for (int64_t p = 0; p < ctx; ++p) {
    const float* kr = rowOf(kv.k, p);
    for (int64_t h = h0; h < h1; ++h) scores[(h - h0) * ctx + p] = dot(q + h * d, kr + (h / group) * d, d) * scale;
  }
  for (int64_t h = 0; h < nh; ++h) {
    float* s = scores + h * ctx;
    float mx = -INFINITY;
    for (int64_t p = 0; p < ctx; ++p) mx = std::max(mx, s[p]);
    float sum = 0.0f;
    for (int64_t p = 0; p < ctx; ++p) {
      s[p] = expApprox(s[p] - mx);
      sum += s[p];
    }
    const float inv = 1.0f / sum;
    for (int64_t p = 0; p < ctx; ++p) s[p] *= inv;
  }
  std::fill(out + h0 * d, out + h1 * d, 0.0f);
  for (int64_t p = 0; p < ctx; ++p) {
    const float* vr = rowOf(kv.v, p);
    for (int64_t h = h0; h < h1; ++h) {
      const float w = scores[(h - h0) * ctx + p];
      const float* v = vr + (h / group) * d;
      float* o = out + h * d;
      for (int64_t i = 0; i < d; ++i) o[i] += w * v[i];
    }
  }
}

}  // namespace

RAG_CLONES
void attendDecode(const float* q, int64_t h0, int64_t h1, int64_t heads, const PagedKv& kv, int64_t ctx,
                  float scale, float* scores, float* out) {
  switch (kv.headDim) {  // the common widths get fixed-length, fully vectorised loops
    case 32: return attend<32>(q, h0, h1, heads, kv, ctx, scale, scores, out);
    case 64: return attend<64>(q, h0, h1, heads, kv, ctx, scale, scores, out);
    case 128: return attend<128>(q, h0, h1, heads, kv, ctx, scale, scores, out);
    default: return attend<0>(q, h0, h1, heads, kv, ctx, scale, scores, out);
  }
}

namespace {

constexpr int64_t kPrefillBlock = 16;  // query rows per QK / PV block

// Softmax in place over a block's score rows (stride `lim`): row r of the chunk sees positions
// [0, start + r] (Causal; else all ctx) where its mask allows; the rest of the row up to lim
// becomes 0 for PV.
template <bool Causal>
[[gnu::always_inline]] inline void maskedSoftmax(float* s, int64_t r0, int64_t r1, int64_t start, int64_t lim,
                                                 int64_t ctx, const uint8_t* allowed) {
  for (int64_t r = r0; r < r1; ++r) {
    float* row = s + (r - r0) * lim;
    const int64_t seen = Causal ? start + r + 1 : ctx;
    if (allowed) {
      const uint8_t* a = allowed + r * ctx;
      for (int64_t p = 0; p < seen; ++p) row[p] = a[p] ? row[p] : -INFINITY;
    }
    float mx = -INFINITY;
    for (int64_t p = 0; p < seen; ++p) mx = std::max(mx, row[p]);
    if (mx == -INFINITY) {  // a row whose mask allows nothing attends to nothing
      std::fill(row, row + lim, 0.0f);
      continue;
    }
    float sum = 0.0f;
    for (int64_t p = 0; p < seen; ++p) {
      row[p] = row[p] == -INFINITY ? 0.0f : expApprox(row[p] - mx);
      sum += row[p];
    }
    const float inv = 1.0f / sum;
    for (int64_t p = 0; p < seen; ++p) row[p] *= inv;
    std::fill(row + seen, row + lim, 0.0f);
  }
}

}  // namespace

int64_t attendPrefillScratch(int64_t n, int64_t ctx, int64_t headDim) {
  return 2 * ctx * headDim + n * headDim + kPrefillBlock * ctx;
}

namespace {

// attendPrefill (Causal: row r sees positions [0, start + r]) and attendBidirectional (every
// row sees [0, start + n), start = 0).
template <bool Causal>
[[gnu::always_inline]] inline void attendRows(const float* q, int64_t qStride, int64_t n, int64_t start, int64_t heads,
                                              const PagedKv& kv, const uint8_t* allowed, float scale, float* scratch,
                                              float* out, int64_t outStride) {
  const int64_t d = kv.headDim, ctx = start + n, bs = kv.blockSize, stride = kv.kvHeads * d;
  const int64_t group = heads / kv.kvHeads;
  float* kt = scratch;           // [d, ctx]: this KV head's keys, transposed (input-major for linear)
  float* vg = kt + d * ctx;      // [ctx, d]: its values
  float* qh = vg + ctx * d;      // [n, d]: one query head, scaled
  float* s = qh + n * d;         // [kPrefillBlock, lim]: a block's scores, then probabilities
  for (int64_t g = 0; g < kv.kvHeads; ++g) {
    for (int64_t p = 0; p < ctx; ++p) {
      const int64_t row = (static_cast<int64_t>(kv.blocks[p / bs]) * bs + p % bs) * stride + g * d;
      for (int64_t i = 0; i < d; ++i) kt[i * ctx + p] = kv.k[row + i];
      std::memcpy(vg + p * d, kv.v + row, static_cast<size_t>(d) * sizeof(float));
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < d; ++i) qh[r * d + i] = q[r * qStride + h * d + i] * scale;
      for (int64_t r0 = 0; r0 < n; r0 += kPrefillBlock) {
        const int64_t r1 = std::min(n, r0 + kPrefillBlock), lim = Causal ? start + r1 : ctx;
        linear(qh + r0 * d, r1 - r0, d, kt, ctx, nullptr, 0, lim, s, lim, false);
        maskedSoftmax<Causal>(s, r0, r1, start, lim, ctx, allowed);
        linear(s, r1 - r0, lim, vg, d, nullptr, 0, d, out + r0 * outStride + h * d, outStride, false);
      }
    }
  }
}

}  // namespace

RAG_CLONES
void attendPrefill(const float* q, int64_t qStride, int64_t n, int64_t start, int64_t heads, const PagedKv& kv,
                   const uint8_t* allowed, float scale, float* scratch, float* out, int64_t outStride) {
  attendRows<true>(q, qStride, n, start, heads, kv, allowed, scale, scratch, out, outStride);
}

RAG_CLONES
void attendBidirectional(const float* q, int64_t qStride, int64_t n, int64_t heads, const PagedKv& kv, float scale,
                         float* scratch, float* out, int64_t outStride) {
  attendRows<false>(q, qStride, n, 0, heads, kv, nullptr, scale, scratch, out, outStride);
}

}  // namespace rag::model::cpu
