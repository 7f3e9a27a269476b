// kernels/argmax_rows.cuh against model::argmaxLogit (the greedy Sampler's choice) on rows the
// sampler meets: random logits of the shipped model's vocabulary and of a 150k one, ties (the
// lowest index must win, also across the kernel's threads and warps), NaN and -inf (never
// chosen), +inf (the first one wins) and rows with no finite logit at all (-1). Exact: an index.
// Skips (exit 77) without a CUDA device.
#include <QtTest>

#include <cmath>
#include <limits>

#include "argmax_rows.cuh"
#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "model/logit_ops.h"

using namespace rag;
using namespace rag::cuda::testing;

class TestArgmaxRowsGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("vocab");
    QTest::newRow("one row") << 1 << 4096;
    QTest::newRow("a decode batch") << 64 << 4096;
    QTest::newRow("odd vocabulary") << 9 << 1001;
    QTest::newRow("large vocabulary") << 3 << 151936;
  }
  void matchesCpuReference() {
    QFETCH(int, rows);
    QFETCH(int, vocab);
    std::vector<float> logits = randomVector(size_t(rows) * vocab, 7, 3.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    auto row = [&](int r) { return logits.data() + size_t(r) * vocab; };
    // Row by row, the cases the sampler must agree on (each only where the batch has the row).
    if (rows > 1) {  // a tie between far-apart indices: the lower wins
      row(1)[vocab - 1] = 50.0f;
      row(1)[vocab / 3] = 50.0f;
    }
    if (rows > 2) {  // NaN everywhere but one -inf and one finite value
      std::fill(row(2), row(2) + vocab, nan);
      row(2)[vocab / 2] = -inf;
      row(2)[vocab - 2] = -5.0f;
    }
    if (rows > 3) {  // nothing can be chosen
      std::fill(row(3), row(3) + vocab, -inf);
      row(3)[1] = nan;
    }
    if (rows > 4) {  // +inf twice: the first
      row(4)[vocab - 3] = inf;
      row(4)[vocab / 5] = inf;
    }
    if (rows > 5) std::fill(row(5), row(5) + vocab, 0.25f);  // all equal: index 0
    if (rows > 6) row(6)[0] = nan;  // NaN at the front does not hide the rest
    std::vector<int32_t> cpu(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) cpu[size_t(r)] = static_cast<int32_t>(model::argmaxLogit(row(r), size_t(vocab)));
    if (rows > 3) QCOMPARE(cpu[3], -1);  // the reference itself says "none" for that row
    cuda::DeviceBuffer dl = toDevice(logits), dout = toDevice(std::vector<int32_t>(size_t(rows), -7));
    const Status s = cuda::argmaxRows(dl.as<float>(), rows, vocab, dout.as<int32_t>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    QCOMPARE(toHost<int32_t>(dout, size_t(rows)), cpu);
  }
};

RAGWB_GPU_TEST_MAIN(TestArgmaxRowsGpu)
#include "test_argmax_rows.moc"
