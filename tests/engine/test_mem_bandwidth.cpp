#include <QtTest>

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/mem_bandwidth.h"
#include "status_checks.h"

using namespace rag;

class TestMemBandwidth : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void bandwidthIsPositiveFiniteAndStableInSize() {
    // Sizes beyond most last-level caches, small enough to keep the test quick.
    Result<double> small = measureReadBandwidth(size_t{64} << 20, 0, 2);
    QVERIFY2(small.isOk(), small.status().toString().c_str());
    Result<double> large = measureReadBandwidth(size_t{128} << 20, 0, 2);
    QVERIFY2(large.isOk(), large.status().toString().c_str());
    qInfo("read bandwidth: %.2f GB/s (64 MiB), %.2f GB/s (128 MiB)", *small / 1e9,
          *large / 1e9);
    const double threads = std::max(1u, std::thread::hardware_concurrency());
    for (double bw : {*small, *large}) {
      QVERIFY(std::isfinite(bw));
      QVERIFY2(bw > 100e6, qPrintable(QString::number(bw)));  // any machine reads 100 MB/s
      // No core streams a terabyte per second, even from cache: a larger figure means passes
      // were timed that had not run (as when a separate timing thread woke up late).
      QVERIFY2(bw / threads < 1e12, qPrintable(QString::number(bw)));
    }
    double ratio = *large / *small;
    QVERIFY2(ratio > 0.1 && ratio < 10, qPrintable(QString::number(ratio)));
  }

  void singleThreadWorks() {
    Result<double> one = measureReadBandwidth(size_t{16} << 20, 1, 1);
    QVERIFY2(one.isOk(), one.status().toString().c_str());
    QVERIFY(std::isfinite(*one) && *one > 100e6);
  }

  void invalidArgumentsAreNamed() {
    Result<double> r = measureReadBandwidth(size_t{1} << 20, -1);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"threads", ">= 0", "-1"}));
    r = measureReadBandwidth(size_t{1} << 20, 1, 0);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"repeats", ">= 1"}));
    r = measureReadBandwidth(100, 2, 1);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"100 bytes", "2 threads", "8192"}));
  }
};

QTEST_GUILESS_MAIN(TestMemBandwidth)
#include "test_mem_bandwidth.moc"
