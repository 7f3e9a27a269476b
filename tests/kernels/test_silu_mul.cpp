// kernels/silu_mul.cuh against cpu::siluMul on stacked gate|up rows (one row, an odd width, a
// chunk of a 2752-wide MLP), gates scaled so that silu's tails are reached. Tolerance: 1e-6
// absolute + 1e-5 relative (expf on the device against the CPU's 2-ulp exp polynomial).
// Skips (exit 77) without a CUDA device.
#include <QtTest>

#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "model/decode_kernels.h"
#include "silu_mul.cuh"

using namespace rag;
using namespace rag::cuda::testing;

class TestSiluMulGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("inter");
    QTest::newRow("one row") << 1 << 96;
    QTest::newRow("odd width") << 7 << 1001;
    QTest::newRow("chunk") << 64 << 2752;
  }
  void matchesCpuReference() {
    QFETCH(int, rows);
    QFETCH(int, inter);
    const std::vector<float> gateUp = randomVector(size_t(rows) * 2 * inter, 31, 6.0f);
    std::vector<float> cpu(size_t(rows) * inter);
    model::cpu::siluMul(gateUp.data(), rows, inter, cpu.data());
    cuda::DeviceBuffer dgu = toDevice(gateUp), dout = toDevice(std::vector<float>(cpu.size()));
    const Status s = cuda::siluMul(dgu.as<float>(), rows, inter, dout.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dout, cpu.size()), cpu, 1e-6, 1e-5, "siluMul");
  }
};

RAGWB_GPU_TEST_MAIN(TestSiluMulGpu)
#include "test_silu_mul.moc"
