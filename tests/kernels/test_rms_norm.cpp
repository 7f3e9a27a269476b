// kernels/rms_norm.cuh against cpu::rmsNorm on random rows of several widths (below a warp,
// a model's hidden size, wider than the block and not a multiple of it), out of place and in
// place. Tolerance: 1e-5 absolute + 1e-5 relative (F32 sums of squares in another order).
// Skips (exit 77) without a CUDA device.
#include <QtTest>

#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "model/decode_kernels.h"
#include "rms_norm.cuh"

using namespace rag;
using namespace rag::cuda::testing;

class TestRmsNormGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("dim");
    QTest::addColumn<bool>("inPlace");
    QTest::newRow("one narrow row") << 1 << 7 << false;
    QTest::newRow("decode batch") << 5 << 64 << false;
    QTest::newRow("prefill chunk in place") << 37 << 576 << true;
    QTest::newRow("wide odd rows") << 3 << 4099 << false;
  }
  void matchesCpuReference() {
    QFETCH(int, rows);
    QFETCH(int, dim);
    QFETCH(bool, inPlace);
    const float eps = 1e-6f;
    const std::vector<float> x = randomVector(size_t(rows) * dim, 11, 2.0f);
    std::vector<float> g = randomVector(size_t(dim), 12);
    std::vector<float> cpu(x.size());
    model::cpu::rmsNorm(x.data(), g.data(), rows, dim, eps, cpu.data());
    cuda::DeviceBuffer dx = toDevice(x), dg = toDevice(g), dout = toDevice(std::vector<float>(x.size()));
    float* out = inPlace ? dx.as<float>() : dout.as<float>();
    const Status s = cuda::rmsNorm(dx.as<float>(), dg.as<float>(), rows, dim, eps, out, nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(inPlace ? dx : dout, x.size()), cpu, 1e-5, 1e-5, "rmsNorm");
  }
};

RAGWB_GPU_TEST_MAIN(TestRmsNormGpu)
#include "test_rms_norm.moc"
