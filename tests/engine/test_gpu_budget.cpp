// Eq. (2) of HedraRAG: the KV size that maximises min(T_G, T_R), the rest to the cluster cache.
#include <QtTest>

#include <cmath>
#include <limits>

#include "retrieval/gpu_budget.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;

namespace {
constexpr int64_t MiB = 1 << 20;
constexpr int64_t GiB = int64_t{1} << 30;
}  // namespace

class TestGpuBudget : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void crossingCurvesMeetInTheMiddle() {
    // T_G grows with the KV cache, T_R with the cluster cache: the optimum is where they cross.
    // free = 60 GiB; T_G = kv/GiB, T_R = 2 * cache/GiB  ->  kv = 2 * (60 - kv)  ->  kv = 40 GiB.
    auto split = splitGpuBudget({.gpuBytes = 80 * GiB, .modelBytes = 20 * GiB, .kvStepBytes = 64 * MiB},
                                [](int64_t kv) { return double(kv) / GiB; },
                                [](int64_t cache) { return 2.0 * double(cache) / GiB; });
    QVERIFY2(split.isOk(), split.status().toString().c_str());
    QVERIFY(std::llabs(split->kvBytes - 40 * GiB) <= 64 * MiB);
    QCOMPARE(split->kvBytes + split->clusterCacheBytes, 60 * GiB);
    QVERIFY(std::abs(split->throughput() - 40.0) < 0.1);
  }

  void saturatedCurvesSplitByTheTieRule() {
    // Generation stops improving at 10 GiB of KV (its request rate is met); retrieval reaches
    // that throughput with 5 GiB of cluster cache. Every KV size in [10, 59] GiB gives the
    // same min = 10; ties go to the KV cache, so the cluster cache gets exactly the 5 GiB it
    // needs to keep up.
    auto split = splitGpuBudget({.gpuBytes = 80 * GiB, .modelBytes = 16 * GiB, .minKvBytes = 2 * GiB,
                                 .kvStepBytes = 256 * MiB},
                                [](int64_t kv) { return std::min(double(kv) / GiB, 10.0); },
                                [](int64_t cache) { return 5.0 + double(cache) / GiB; });
    QVERIFY2(split.isOk(), split.status().toString().c_str());
    QCOMPARE(split->kvBytes, 59 * GiB);
    QCOMPARE(split->clusterCacheBytes, 5 * GiB);
    QCOMPARE(split->throughput(), 10.0);
  }

  void flatCurvesPreferTheLargerKvCache() {
    auto split = splitGpuBudget({.gpuBytes = 8 * GiB, .modelBytes = 2 * GiB, .kvStepBytes = GiB},
                                [](int64_t) { return 3.0; }, [](int64_t) { return 3.0; });
    QVERIFY2(split.isOk(), split.status().toString().c_str());
    QCOMPARE(split->kvBytes, 6 * GiB);
    QCOMPARE(split->clusterCacheBytes, int64_t{0});
  }

  void findsTheGlobalBestOfABumpyCurve() {
    // T_R has a local peak at cache 1 GiB and the global one at 5 GiB; a hill climb from
    // either end would stop early.
    auto tr = SampledCurve::create({{0, 1}, {1.0 * GiB, 4}, {2.0 * GiB, 2}, {5.0 * GiB, 9}, {6.0 * GiB, 3}});
    QVERIFY2(tr.isOk(), tr.status().toString().c_str());
    auto split = splitGpuBudget({.gpuBytes = 10 * GiB, .modelBytes = 4 * GiB, .kvStepBytes = 128 * MiB},
                                [](int64_t) { return 100.0; },
                                [&](int64_t cache) { return (*tr)(double(cache)); });
    QVERIFY2(split.isOk(), split.status().toString().c_str());
    QCOMPARE(split->clusterCacheBytes, 5 * GiB);
    QCOMPARE(split->kvBytes, GiB);
    QCOMPARE(split->throughput(), 9.0);
  }

  void exactlyTheMinimumKvFits() {
    auto split = splitGpuBudget({.gpuBytes = 10 * GiB, .modelBytes = 7 * GiB, .minKvBytes = 3 * GiB},
                                [](int64_t) { return 1.0; }, [](int64_t) { return 50.0; });
    QVERIFY2(split.isOk(), split.status().toString().c_str());
    QCOMPARE(split->kvBytes, 3 * GiB);
    QCOMPARE(split->clusterCacheBytes, int64_t{0});
  }

  void refusesWhatCannotWork() {
    auto one = [](int64_t) { return 1.0; };
    auto s = splitGpuBudget({.gpuBytes = 8 * GiB, .modelBytes = 16 * GiB}, one, one);
    QVERIFY(!s.isOk());
    QVERIFY(mentions(s.status(), {"do not fit", "smaller model"}));
    s = splitGpuBudget({.gpuBytes = 8 * GiB, .modelBytes = 6 * GiB, .minKvBytes = 3 * GiB}, one, one);
    QVERIFY(!s.isOk());
    s = splitGpuBudget({.gpuBytes = 8 * GiB, .modelBytes = 1 * GiB, .kvStepBytes = 0}, one, one);
    QVERIFY(!s.isOk());
    s = splitGpuBudget({.gpuBytes = 8 * GiB, .modelBytes = 1 * GiB}, one, {});
    QVERIFY(!s.isOk());
    s = splitGpuBudget({.gpuBytes = 8 * GiB, .modelBytes = 1 * GiB, .kvStepBytes = GiB}, one,
                       [](int64_t) { return std::numeric_limits<double>::quiet_NaN(); });
    QVERIFY(!s.isOk());
    QVERIFY(mentions(s.status(), {"finite"}));
  }

  void sampledCurvesInterpolateAndClamp() {
    auto c = SampledCurve::create({{10, 2}, {0, 0}, {20, 2}});
    QVERIFY(c.isOk());
    QCOMPARE((*c)(-5), 0.0);
    QCOMPARE((*c)(5), 1.0);
    QCOMPARE((*c)(15), 2.0);
    QCOMPARE((*c)(1e9), 2.0);
    QVERIFY(!SampledCurve::create({}).isOk());
    QVERIFY(!SampledCurve::create({{1, 1}, {1, 2}}).isOk());
    QVERIFY(!SampledCurve::create({{1, -1}}).isOk());
  }

  void cachedFractionTakesTheHottestClustersThatFit() {
    const std::vector<double> heat{10, 0, 50, 30, 10};  // total 100
    const std::vector<int64_t> bytes{100, 100, 300, 200, 100};
    QCOMPARE(cachedVisitFraction(0, heat, bytes), 0.0);
    QCOMPARE(cachedVisitFraction(300, heat, bytes), 0.5);     // cluster 2
    QCOMPARE(cachedVisitFraction(500, heat, bytes), 0.8);     // 2 and 3
    QCOMPARE(cachedVisitFraction(600, heat, bytes), 0.9);     // + 0 (4 does not fit then)
    QCOMPARE(cachedVisitFraction(10000, heat, bytes), 1.0);
    QCOMPARE(cachedVisitFraction(100, std::vector<double>(5, 0.0), bytes), 0.0);
  }
};

QTEST_GUILESS_MAIN(TestGpuBudget)
#include "test_gpu_budget.moc"
