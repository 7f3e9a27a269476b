// kernels/cublas_linear.cuh against cpu::linear on the transposed [in, out] weights: one to a
// few hundred rows (2 to kSmallLinearRows on the small-row kernel, at each of its block widths
// of 4 to 32 columns on a device of ~132 SMs, others on cuBLAS), odd widths, a bias, accumulation into y, and an output
// sub-range [o0, o1) that leaves the rest of y alone. Tolerance: 1e-4 absolute + 1e-4 relative (F32 sums of up to
// 1031 products in another order; TF32 is off). Skips (exit 77) without a CUDA device.
#include <QtTest>

#include "cublas_linear.cuh"
#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "model/decode_kernels.h"

using namespace rag;
using namespace rag::cuda::testing;

class TestCublasLinearGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("in");
    QTest::addColumn<int>("out");
    QTest::addColumn<int>("o0");
    QTest::addColumn<int>("o1");
    QTest::addColumn<bool>("bias");
    QTest::addColumn<bool>("accumulate");
    QTest::newRow("decode row") << 1 << 64 << 96 << 0 << 96 << false << false;
    QTest::newRow("three rows, bias") << 3 << 97 << 130 << 0 << 130 << true << false;
    QTest::newRow("accumulate") << 5 << 1031 << 64 << 0 << 64 << false << true;
    QTest::newRow("bias and accumulate") << 71 << 128 << 257 << 0 << 257 << true << true;
    QTest::newRow("sub-range") << 9 << 33 << 200 << 64 << 150 << true << true;
    QTest::newRow("eight rows, long inner dimension") << 8 << 1376 << 512 << 0 << 512 << true << true;
    QTest::newRow("seven rows, sub-range") << 7 << 300 << 700 << 3 << 650 << true << false;
    QTest::newRow("two rows, 4099 wide") << 2 << 512 << 4099 << 0 << 4099 << false << false;
    QTest::newRow("three rows, 5000 wide") << 3 << 100 << 5000 << 0 << 5000 << true << false;
    QTest::newRow("two rows, 9000 wide") << 2 << 64 << 9000 << 0 << 9000 << false << true;
  }
  void matchesCpuReference() {
    QFETCH(int, rows);
    QFETCH(int, in);
    QFETCH(int, out);
    QFETCH(int, o0);
    QFETCH(int, o1);
    QFETCH(bool, bias);
    QFETCH(bool, accumulate);
    const std::vector<float> x = randomVector(size_t(rows) * in, 81);
    const std::vector<float> wt = randomVector(size_t(in) * out, 82, 0.1f);
    const std::vector<float> b = randomVector(size_t(out), 83);
    std::vector<float> y = randomVector(size_t(rows) * out, 84);
    cuda::DeviceBuffer dx = toDevice(x), dw = toDevice(wt), db = toDevice(b), dy = toDevice(y);
    model::cpu::linear(x.data(), rows, in, wt.data(), out, bias ? b.data() : nullptr, o0, o1, y.data(), out, accumulate);
    auto blas = cuda::CublasContext::create();
    QVERIFY2(blas.isOk(), blas.status().toString().c_str());
    const Status s = cuda::linear(*blas, dx.as<float>(), rows, in, dw.as<float>(), out, bias ? db.as<float>() : nullptr,
                                  o0, o1, dy.as<float>(), out, accumulate, nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dy, y.size()), y, 1e-4, 1e-4, "linear");
  }
};

RAGWB_GPU_TEST_MAIN(TestCublasLinearGpu)
#include "test_cublas_linear.moc"
