// decode_kernels.h against plain double-precision loops written from the definitions (HF
// Llama's RMSNorm, Linear, rotate-half RoPE, SwiGLU, softmax attention; BERT's LayerNorm and
// erf GELU), on shapes that reach every code path: row blocks of 4 and their 1-3 tails, whole 64-output tiles and a partial
// one, biases and accumulation, head widths with fixed-length loops (32, 64) and without (24),
// grouped-query heads, and a context that ends inside a KV block of a shuffled block table.
#include <QtTest>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/decode_kernels.h"

using namespace rag::model;

namespace {

std::vector<float> randomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// A block table 0 .. n-1 in a random order, so that consecutive positions are far apart.
std::vector<int32_t> shuffledBlocks(int64_t n, uint32_t seed) {
  std::vector<int32_t> blocks(static_cast<size_t>(n));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(seed));
  return blocks;
}

// softmax(q . K * scale) . V in double for one query head (q: d floats) over the positions
// p < ctx that `allowed` (null: all) marks, K/V read through the block table: d outputs.
std::vector<double> referenceAttention(const float* q, const cpu::PagedKv& kv, int64_t kvHead, int64_t ctx,
                                       float scale, const uint8_t* allowed) {
  const int64_t d = kv.headDim;
  auto at = [&](const float* pool, int64_t p, int64_t i) {
    const int64_t row = int64_t(kv.blocks[p / kv.blockSize]) * kv.blockSize + p % kv.blockSize;
    return double(pool[(row * kv.kvHeads + kvHead) * d + i]);
  };
  std::vector<double> s(static_cast<size_t>(ctx), 0.0), out(static_cast<size_t>(d), 0.0);
  double mx = -1e300, sum = 0;
  for (int64_t p = 0; p < ctx; ++p) {
    if (allowed && !allowed[p]) continue;
    double dotv = 0;
    for (int64_t i = 0; i < d; ++i) dotv += double(q[i]) * at(kv.k, p, i);
    s[p] = dotv * scale;
    mx = std::max(mx, s[p]);
  }
  for (int64_t p = 0; p < ctx; ++p)
    if (!allowed || allowed[p]) sum += (s[p] = std::exp(s[p] - mx));
  for (int64_t p = 0; p < ctx; ++p)
    if (!allowed || allowed[p])
      for (int64_t i = 0; i < d; ++i) out[i] += s[p] / sum * at(kv.v, p, i);
  return out;
}

}  // namespace

class TestDecodeKernels : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void rmsNormMatchesTheDefinition() {
    const int64_t rows = 3, dim = 40;
    auto x = randomVector(rows * dim, 1), g = randomVector(dim, 2);
    std::vector<float> out(x.size());
    cpu::rmsNorm(x.data(), g.data(), rows, dim, 1e-6f, out.data());
    std::vector<double> ref(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
      for (int64_t i = 0; i < dim; ++i) ref[r * dim + i] = x[r * dim + i] * inv * g[i];
    }
    QVERIFY(maxAbsDiff(out, ref) < 1e-5);
  }

  void linearMatchesTheDefinitionOnEveryTileAndRowShape() {
    for (int64_t rows : {1, 2, 3, 4, 5, 9}) {  // 1-3: the streaming path; 4 and more: tiles
      // Whole, half and partial 64-wide tiles; 2100: two whole 1024-output streaming chunks and
      // a partial one.
      for (int64_t out : {64, 104, 150, 2100}) {
        for (bool withBias : {false, true}) {
          for (bool accumulate : {false, true}) {
            const int64_t in = 37;
            auto x = randomVector(rows * in, 3), w = randomVector(in * out, 4), b = randomVector(out, 5);
            auto y0 = randomVector(rows * out, 6);
            // Only outputs [o0, o1) are written: the rest of y must stay as it was.
            const int64_t o0 = 3, o1 = out - 2;
            std::vector<float> y = y0;
            cpu::linear(x.data(), rows, in, w.data(), out, withBias ? b.data() : nullptr, o0, o1, y.data(), out,
                        accumulate);
            std::vector<double> ref(y0.begin(), y0.end());
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t o = o0; o < o1; ++o) {
                double s = (accumulate ? y0[r * out + o] : 0.0) + (withBias ? b[o] : 0.0);
                for (int64_t i = 0; i < in; ++i) s += double(x[r * in + i]) * w[i * out + o];
                ref[r * out + o] = s;
              }
            const double err = maxAbsDiff(y, ref);
            QVERIFY2(err < 1e-4, qPrintable(QString("rows %1 out %2 bias %3 acc %4: error %5")
                                                .arg(rows).arg(out).arg(withBias).arg(accumulate).arg(err)));
          }
        }
      }
    }
  }

  void layerNormMatchesTheDefinition() {
    const int64_t rows = 3, dim = 40;
    auto x = randomVector(rows * dim, 30, 2.0f), g = randomVector(dim, 31), b = randomVector(dim, 32);
    for (float& e : x) e += 3.0f;  // a mean far from 0
    std::vector<float> out(rows * dim);
    cpu::layerNorm(x.data(), g.data(), b.data(), rows, dim, 1e-12f, out.data());
    std::vector<double> ref(out.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i] / double(dim);
      for (int64_t i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean) / double(dim);
      for (int64_t i = 0; i < dim; ++i) ref[r * dim + i] = (x[r * dim + i] - mean) / std::sqrt(var + 1e-12) * g[i] + b[i];
    }
    const double err = maxAbsDiff(out, ref);
    QVERIFY2(err < 1e-5, qPrintable(QString("error %1").arg(err)));
    cpu::layerNorm(x.data(), g.data(), b.data(), rows, dim, 1e-12f, x.data());  // in place
    QVERIFY(maxAbsDiff(x, ref) < 1e-5);
  }

  void geluIsTheErfGelu() {
    std::vector<float> x;
    for (int i = -800; i <= 800; ++i) x.push_back(static_cast<float>(i) / 100.0f);  // [-8, 8]
    std::vector<float> out(x.size());
    cpu::gelu(x.data(), std::ssize(x), out.data());
    std::vector<double> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    const double err = maxAbsDiff(out, ref);
    QVERIFY2(err < 2e-6, qPrintable(QString("error %1").arg(err)));
  }

  void ropeRotatesHalvesLikeHf() {
    const int64_t heads = 3, d = 8;
    auto x = randomVector(heads * d, 7);
    std::vector<float> cos(d), sin(d);
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = 5.0 * std::pow(10000.0, -2.0 * i / d);
      cos[i] = cos[i + d / 2] = static_cast<float>(std::cos(a));
      sin[i] = sin[i + d / 2] = static_cast<float>(std::sin(a));
    }
    std::vector<double> ref(x.size());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d; ++i) {
        const double rotated = i < d / 2 ? -x[h * d + i + d / 2] : x[h * d + i - d / 2];  // cat(-x2, x1)
        ref[h * d + i] = x[h * d + i] * cos[i] + rotated * sin[i];
      }
    cpu::rope(x.data(), heads, d, cos.data(), sin.data());
    QVERIFY(maxAbsDiff(x, ref) < 1e-6);
  }

  void siluMulIsSwiGlu() {
    const int64_t rows = 2, inter = 45;
    auto gu = randomVector(rows * 2 * inter, 8, 6.0f);  // wide range: the exp's clamping must not show
    gu[0] = 120.0f;
    gu[1] = -120.0f;
    std::vector<float> out(rows * inter);
    cpu::siluMul(gu.data(), rows, inter, out.data());
    std::vector<double> ref(out.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < inter; ++i) {
        const double g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
        ref[r * inter + i] = g / (1.0 + std::exp(-g)) * u;
      }
    double rel = 0;
    for (size_t i = 0; i < out.size(); ++i) rel = std::max(rel, std::abs(out[i] - ref[i]) / (1.0 + std::abs(ref[i])));
    QVERIFY2(rel < 1e-5, qPrintable(QString("relative error %1").arg(rel)));
  }

  void pagedAttentionMatchesSoftmaxOverTheContext() {
    for (int64_t d : {32, 64, 24}) {
      const int64_t heads = 6, kvHeads = 2, bs = 4, numBlocks = 9, ctx = 29;  // ctx ends inside a block
      auto k = randomVector(numBlocks * bs * kvHeads * d, 10, 1.5f);
      auto v = randomVector(numBlocks * bs * kvHeads * d, 11);
      auto q = randomVector(heads * d, 12, 1.5f);
      const std::vector<int32_t> blocks = shuffledBlocks(numBlocks, 13);
      const cpu::PagedKv kv{k.data(), v.data(), blocks.data(), bs, kvHeads, d};
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      // Heads [1, 5) only: heads 0 and 5 of out must stay untouched.
      std::vector<float> out(heads * d, 42.0f), scores(4 * ctx);
      cpu::attendDecode(q.data(), 1, 5, heads, kv, ctx, scale, scores.data(), out.data());
      std::vector<double> ref(out.size(), 42.0);
      for (int64_t h = 1; h < 5; ++h) {
        const std::vector<double> o = referenceAttention(q.data() + h * d, kv, h / (heads / kvHeads), ctx, scale, nullptr);
        std::copy(o.begin(), o.end(), ref.begin() + h * d);
      }
      const double err = maxAbsDiff(out, ref);
      QVERIFY2(err < 1e-5, qPrintable(QString("head dim %1: error %2").arg(d).arg(err)));
    }
  }

  // A prefill chunk: rows at positions start .. start + n - 1 over their causal context, with
  // and without a mask, chunks inside and across the kernel's 16-row blocks, grouped-query
  // heads, head widths with fixed-length loops (32) and without (24), a shuffled block table,
  // strided query and output rows (the columns between rows must stay untouched).
  void prefillAttentionMatchesMaskedSoftmax() {
    for (int64_t d : {32, 24})
      for (int64_t start : {0, 7})
        for (int64_t n : {1, 5, 16, 37})
          for (bool masked : {false, true}) {
            const int64_t heads = 6, kvHeads = 2, bs = 4, ctx = start + n, numBlocks = (ctx + bs - 1) / bs + 2;
            const int64_t qStride = (heads + 2 * kvHeads) * d, outStride = heads * d + 3;
            auto k = randomVector(numBlocks * bs * kvHeads * d, 20, 1.5f);
            auto v = randomVector(numBlocks * bs * kvHeads * d, 21);
            auto q = randomVector(n * qStride, 22, 1.5f);
            const std::vector<int32_t> blocks = shuffledBlocks(numBlocks, 23);
            std::vector<uint8_t> allowed(n * ctx, 0);
            std::mt19937 coin(24);
            for (int64_t r = 0; r < n; ++r)
              for (int64_t p = 0; p <= start + r; ++p)
                allowed[r * ctx + p] = !masked || p == start + r || coin() % 3 != 0;
            const cpu::PagedKv kv{k.data(), v.data(), blocks.data(), bs, kvHeads, d};
            const float scale = 1.0f / std::sqrt(static_cast<float>(d));
            std::vector<float> out(n * outStride, 42.0f), scratch(cpu::attendPrefillScratch(n, ctx, d));
            cpu::attendPrefill(q.data(), qStride, n, start, heads, kv, masked ? allowed.data() : nullptr, scale,
                               scratch.data(), out.data(), outStride);
            std::vector<double> ref(out.size(), 42.0);
            for (int64_t r = 0; r < n; ++r)
              for (int64_t h = 0; h < heads; ++h) {
                const std::vector<double> o = referenceAttention(q.data() + r * qStride + h * d, kv, h / (heads / kvHeads),
                                                                 start + r + 1, scale, allowed.data() + r * ctx);
                std::copy(o.begin(), o.end(), ref.begin() + r * outStride + h * d);
              }
            const double err = maxAbsDiff(out, ref);
            QVERIFY2(err < 1e-5, qPrintable(QString("d %1, start %2, n %3, masked %4: error %5")
                                                .arg(d).arg(start).arg(n).arg(masked).arg(err)));
          }
  }

  // An encoder's attention: every row over every position, chunks inside and across the
  // 16-row blocks, K/V as one block of the text's length (as TextEmbedder lays them out).
  void bidirectionalAttentionSeesEveryPosition() {
    for (int64_t n : {1, 7, 16, 29}) {
      const int64_t heads = 4, d = 16, qStride = 3 * heads * d, outStride = heads * d;
      auto k = randomVector(n * heads * d, 40, 1.5f);
      auto v = randomVector(n * heads * d, 41);
      auto q = randomVector(n * qStride, 42, 1.5f);
      const std::vector<int32_t> oneBlock = {0};
      const cpu::PagedKv kv{k.data(), v.data(), oneBlock.data(), n, heads, d};
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> out(n * outStride), scratch(cpu::attendPrefillScratch(n, n, d));
      cpu::attendBidirectional(q.data(), qStride, n, heads, kv, scale, scratch.data(), out.data(), outStride);
      std::vector<double> ref(out.size());
      for (int64_t r = 0; r < n; ++r)
        for (int64_t h = 0; h < heads; ++h) {
          const std::vector<double> o = referenceAttention(q.data() + r * qStride + h * d, kv, h, n, scale, nullptr);
          std::copy(o.begin(), o.end(), ref.begin() + r * outStride + h * d);
        }
      const double err = maxAbsDiff(out, ref);
      QVERIFY2(err < 1e-5, qPrintable(QString("n %1: error %2").arg(n).arg(err)));
    }
  }
};

QTEST_GUILESS_MAIN(TestDecodeKernels)
#include "test_decode_kernels.moc"
