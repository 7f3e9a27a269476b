#include <QtTest>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "model/logit_ops.h"

using namespace rag::model;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

class TestLogitOps : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void maxAndArgmaxSkipNaNAndMaskedTokens() {
    // Every length up to a few vector widths and blocks, the maximum at every position.
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-10, 10);
    for (size_t n : {1u, 3u, 4u, 5u, 31u, 32u, 33u, 255u, 256u, 257u, 1000u}) {
      std::vector<float> x(n);
      for (float& v : x) v = d(rng);
      for (size_t at = 0; at < n; at += std::max<size_t>(1, n / 7)) {
        std::vector<float> y = x;
        y[at] = 20;
        if (at + 1 < n) y[at + 1] = kNaN;
        if (at > 0) y[at - 1] = kNaN;
        QCOMPARE(maxLogit(y.data(), n), 20.0f);
        QCOMPARE(argmaxLogit(y.data(), n), static_cast<ptrdiff_t>(at));
      }
    }
    // Ties go to the lowest index, also across blocks.
    std::vector<float> ties(1000, 1.0f);
    ties[700] = ties[300] = ties[301] = 2;
    QCOMPARE(argmaxLogit(ties.data(), ties.size()), ptrdiff_t{300});
    // NaN is never the max, wherever it stands; -inf only counts as "none".
    std::vector<float> nan = {kNaN, 1, kNaN, 2, kNaN};
    QCOMPARE(maxLogit(nan.data(), nan.size()), 2.0f);
    QCOMPARE(argmaxLogit(nan.data(), nan.size()), ptrdiff_t{3});
    std::vector<float> none(40, kNaN);
    none[17] = -kInf;
    QCOMPARE(argmaxLogit(none.data(), none.size()), ptrdiff_t{-1});
    QCOMPARE(maxLogit(none.data(), none.size()), -kInf);
    QCOMPARE(argmaxLogit(nullptr, 0), ptrdiff_t{-1});
    std::vector<float> inf = {1, kInf, kInf};
    QCOMPARE(argmaxLogit(inf.data(), inf.size()), ptrdiff_t{1});
  }

  void scaledExpMatchesExp() {
    // Exponents from 0 down past -87 (where the result flushes to 0), every tail length.
    std::vector<float> x;
    for (double v = 0; v >= -90; v -= 0.0137) x.push_back(static_cast<float>(v));
    std::vector<float> out(x.size());
    double total = scaledExp(x.data(), x.size(), 0.0f, 1.0f, out.data());
    double exact = 0;
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double e = std::exp(static_cast<double>(x[i]));
      if (x[i] < -87.0f) {
        QCOMPARE(out[i], 0.0f);
        continue;
      }
      exact += e;
      worst = std::max(worst, std::fabs(out[i] - e) / e);
    }
    QVERIFY2(worst < 2e-7, qPrintable(QString::number(worst)));
    QVERIFY(std::fabs(total - exact) / exact < 1e-9);
    QCOMPARE(out[0], 1.0f);  // exp(0) exactly

    // Shift and scale: exp((x - max) * scale), NaN and -inf weigh 0, odd lengths.
    for (size_t n : {1u, 2u, 3u, 5u, 7u}) {
      std::vector<float> y = {3, kNaN, 1, -kInf, 2.5f, 0, -1};
      y.resize(n);
      std::vector<float> w(n);
      double sum = scaledExp(y.data(), n, 3.0f, 2.0f, w.data());
      double expect = 0;
      for (size_t i = 0; i < n; ++i) {
        double e = std::isnan(y[i]) || y[i] == -kInf ? 0 : std::exp((y[i] - 3.0) * 2.0);
        expect += e;
        QVERIFY2(std::fabs(w[i] - e) <= 2e-7 * e, qPrintable(QString::number(i)));
      }
      QVERIFY(std::fabs(sum - expect) < 1e-6);
    }
  }

  void sumAtLeastCountsOnlyLargeWeights() {
    std::vector<float> w = {0.5f, 0.1f, 1.0f, 0.25f, kNaN, 0.3f, 0.05f};
    QVERIFY(std::fabs(sumAtLeast(w.data(), w.size(), 0.25f) - (0.5 + 1.0 + 0.25 + 0.3)) < 1e-7);
    QCOMPARE(sumAtLeast(w.data(), w.size(), 2.0f), 0.0);
    QVERIFY(std::fabs(sumAtLeast(w.data(), w.size(), 0.0f) - 2.2) < 1e-7);
    QVERIFY(std::fabs(sumAtLeast(w.data(), 3, 0.0f) - 1.6) < 1e-7);
  }

  // log softmax at one token, against the sum done in double; out-of-range tokens, -inf and NaN
  // logits give -inf.
  void tokenLogprobIsLogSoftmax() {
    std::mt19937 rng(11);
    std::normal_distribution<float> d(0.f, 4.f);
    std::vector<float> x(1003), scratch;
    for (float& v : x) v = d(rng);
    x[7] = -kInf;
    x[9] = kNaN;
    double z = 0;
    for (float v : x)
      if (std::isfinite(v)) z += std::exp(static_cast<double>(v));
    for (ptrdiff_t t : {0, 1, 500, 1002}) {
      const double expect = static_cast<double>(x[static_cast<size_t>(t)]) - std::log(z);
      QVERIFY2(std::fabs(tokenLogprob(x.data(), x.size(), t, scratch) - expect) < 1e-4, qPrintable(QString::number(t)));
    }
    QCOMPARE(tokenLogprob(x.data(), x.size(), 7, scratch), -kInf);
    QCOMPARE(tokenLogprob(x.data(), x.size(), 9, scratch), -kInf);
    QCOMPARE(tokenLogprob(x.data(), x.size(), -1, scratch), -kInf);
    QCOMPARE(tokenLogprob(x.data(), x.size(), 1003, scratch), -kInf);
    std::vector<float> one = {2.5f};
    QCOMPARE(tokenLogprob(one.data(), 1, 0, scratch), 0.0f);  // a certain token
  }
};

QTEST_GUILESS_MAIN(TestLogitOps)
#include "test_logit_ops.moc"
