// The shared scan kernel against the double-precision reference (core/vector_math.h): every
// product within innerProductErrorBound, for any number of queries (the four-query blocks and
// their remainders) and dimensions with and without a partial 16-lane tail.
#include <QtTest>

#include <cmath>
#include <random>
#include <vector>

#include "core/vector_math.h"
#include "retrieval/shared_scan.h"

using namespace rag::retrieval;

class TestSharedScan : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesTheReferenceWithinTheBound() {
    std::mt19937 rng(5);
    std::normal_distribution<float> g;
    for (int64_t dim : {1, 7, 16, 40, 256}) {
      for (int32_t nq : {1, 2, 3, 4, 5, 8, 9}) {
        const int64_t n = 37;
        std::vector<float> rows(static_cast<size_t>(n * dim)), qs(static_cast<size_t>(nq * dim));
        for (float& x : rows) x = g(rng);
        for (float& x : qs) x = 3.0f * g(rng);  // not unit vectors: the bound scales with |q||v|
        std::vector<std::vector<float>> out(static_cast<size_t>(nq), std::vector<float>(n, NAN));
        std::vector<const float*> qp;
        std::vector<float*> op;
        for (int32_t q = 0; q < nq; ++q) qp.push_back(qs.data() + q * dim), op.push_back(out[static_cast<size_t>(q)].data());
        innerProductsShared(qp.data(), op.data(), nq, rows.data(), n, dim);
        for (int32_t q = 0; q < nq; ++q) {
          std::vector<float> want(static_cast<size_t>(n));
          rag::innerProducts(qp[static_cast<size_t>(q)], rows.data(), static_cast<size_t>(n), static_cast<size_t>(dim), want.data());
          double qn = 0;
          for (int64_t t = 0; t < dim; ++t) qn += double(qp[static_cast<size_t>(q)][t]) * qp[static_cast<size_t>(q)][t];
          for (int64_t j = 0; j < n; ++j) {
            double vn = 0;
            for (int64_t t = 0; t < dim; ++t) vn += double(rows[static_cast<size_t>(j * dim + t)]) * rows[static_cast<size_t>(j * dim + t)];
            const double bound = innerProductErrorBound(dim, std::sqrt(qn * vn));
            const double err = std::fabs(double(out[static_cast<size_t>(q)][static_cast<size_t>(j)]) - want[static_cast<size_t>(j)]);
            // The reference is rounded to float once: allow that half ulp as well.
            QVERIFY2(err <= bound / 2 + std::fabs(want[static_cast<size_t>(j)]) * 0x1p-24,
                     qPrintable(QString("dim %1 nq %2 row %3: error %4 > bound %5").arg(dim).arg(nq).arg(j).arg(err).arg(bound / 2)));
          }
        }
      }
    }
  }

  void boundGrowsWithDimensionAndNorms() {
    QVERIFY(innerProductErrorBound(256, 1.0) > innerProductErrorBound(16, 1.0));
    QVERIFY(innerProductErrorBound(256, 4.0) > innerProductErrorBound(256, 1.0));
    QCOMPARE(innerProductErrorBound(256, 0.0), 0.0);
    QVERIFY(innerProductErrorBound(256, 1.0) < 1e-3);  // tight enough to screen with
  }
};

QTEST_GUILESS_MAIN(TestSharedScan)
#include "test_shared_scan.moc"
