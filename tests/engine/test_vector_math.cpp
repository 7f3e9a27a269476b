#include <QtTest>

#include <cmath>

#include "core/vector_math.h"

class TestVectorMath : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void normalizesRows() {
    std::vector<float> x = {3, 4, 0, 0, 0, 0, 1, 1, 1};
    rag::l2NormalizeRows(x.data(), 3, 3);
    QCOMPARE(x[0], 0.6f);
    QCOMPARE(x[1], 0.8f);
    QCOMPARE(x[3], 0.f);  // zero row unchanged, no NaN
    QVERIFY(std::fabs(x[6] - 1 / std::sqrt(3.f)) < 1e-7);
  }
  void innerProductsMatchDefinition() {
    std::vector<float> q = {1, 2, 3};
    std::vector<float> x = {1, 0, 0, 0, 1, 0, 1, 1, 1, -1, -2, -3};
    std::vector<float> out(4);
    rag::innerProducts(q.data(), x.data(), 4, 3, out.data());
    QCOMPARE(out, (std::vector<float>{1, 2, 6, -14}));
  }
};

QTEST_GUILESS_MAIN(TestVectorMath)
#include "test_vector_math.moc"
