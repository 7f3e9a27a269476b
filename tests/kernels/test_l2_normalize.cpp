#include <QtTest>

#include <cmath>
#include <random>
#include <vector>

#include "core/vector_math.h"
#include "gpu_test_main.h"
#include "l2_normalize.cuh"

class TestL2Normalize : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("d");
    QTest::newRow("tiny") << 3 << 7;
    QTest::newRow("embedding") << 1000 << 384;
    QTest::newRow("wide") << 17 << 4099;
  }
  void matchesCpuReference() {
    QFETCH(int, n);
    QFETCH(int, d);
    std::mt19937 rng(123);
    std::normal_distribution<float> g(0.f, 3.f);
    std::vector<float> x(size_t(n) * d);
    for (float& v : x) v = g(rng);
    std::fill(x.begin(), x.begin() + d, 0.f);  // a zero row stays zero on both sides
    std::vector<float> ref = x, gpu = x;
    rag::l2NormalizeRows(ref.data(), n, d);
    rag::Status s = rag::cuda::l2NormalizeRowsHost(gpu.data(), n, d);
    QVERIFY2(s.isOk(), s.message().c_str());
    double maxErr = 0;
    for (size_t i = 0; i < x.size(); ++i) maxErr = std::max(maxErr, double(std::fabs(ref[i] - gpu[i])));
    QVERIFY2(maxErr < 1e-6, qPrintable(QString("max abs error %1").arg(maxErr)));
    for (int j = 0; j < d; ++j) QCOMPARE(gpu[j], 0.f);
  }
};

RAGWB_GPU_TEST_MAIN(TestL2Normalize)
#include "test_l2_normalize.moc"
