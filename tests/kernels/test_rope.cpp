// kernels/rope.cuh against cpu::rope and the runner's pool copies on fused q|k|v rows: the
// first nh + nkv heads of each row rotated by its own position's tables, the v heads left as
// they were, and each row's k heads (rotated) and v heads in the K/V pools at its slot of a
// shuffled block table (every other pool row untouched). Head widths 16, 128 and 6 (three
// frequencies); positions random. Tolerance: 1e-6 absolute + 1e-6 relative (a product and a
// sum per element, FMA on the device); the V pool exact (copied). Skips (exit 77) without a
// CUDA device.
#include <QtTest>

#include <cmath>
#include <cstring>

#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "model/decode_kernels.h"
#include "rope.cuh"

using namespace rag;
using namespace rag::cuda::testing;

class TestRopeGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("nh");
    QTest::addColumn<int>("nkv");
    QTest::addColumn<int>("d");
    QTest::newRow("tiny GQA") << 3 << 4 << 2 << 16;
    QTest::newRow("wide heads") << 9 << 8 << 8 << 128;
    QTest::newRow("narrow heads") << 17 << 3 << 1 << 6;
    QTest::newRow("a chunk inside blocks") << 11 << 4 << 2 << 16;
  }
  void matchesCpuReference() {
    QFETCH(int, rows);
    QFETCH(int, nh);
    QFETCH(int, nkv);
    QFETCH(int, d);
    const int64_t stride = int64_t(nh + 2 * nkv) * d, width = int64_t(nkv) * d, bs = 4, start = 3;
    const int64_t numBlocks = (start + rows + bs - 1) / bs + 1;
    std::vector<float> x = randomVector(size_t(rows * stride), 21);
    std::vector<float> cos(size_t(rows) * d), sin(size_t(rows) * d);
    std::mt19937 gen(22);
    std::uniform_int_distribution<int> pos(0, 4000);
    for (int r = 0; r < rows; ++r) {
      const double p = pos(gen);
      for (int f = 0; f < d / 2; ++f) {
        const double a = p * std::exp(2.0 * f / d * -std::log(10000.0));
        cos[size_t(r * d + f)] = cos[size_t(r * d + f + d / 2)] = float(std::cos(a));
        sin[size_t(r * d + f)] = sin[size_t(r * d + f + d / 2)] = float(std::sin(a));
      }
    }
    std::vector<float> kPool = randomVector(size_t(numBlocks * bs * width), 32), vPool = randomVector(kPool.size(), 33);
    const std::vector<int32_t> blocks = shuffledBlocks(numBlocks, 34);
    std::vector<int32_t> slots;
    for (int64_t p = start; p < start + rows; ++p) slots.push_back(int32_t(blocks[size_t(p / bs)] * bs + p % bs));
    cuda::DeviceBuffer dx = toDevice(x), dcos = toDevice(cos), dsin = toDevice(sin), dslots = toDevice(slots);
    cuda::DeviceBuffer dk = toDevice(kPool), dv = toDevice(vPool);
    for (int r = 0; r < rows; ++r) {
      float* row = x.data() + r * stride;
      model::cpu::rope(row, nh + nkv, d, cos.data() + r * d, sin.data() + r * d);
      std::memcpy(kPool.data() + slots[size_t(r)] * width, row + nh * d, size_t(width) * sizeof(float));
      std::memcpy(vPool.data() + slots[size_t(r)] * width, row + (nh + nkv) * d, size_t(width) * sizeof(float));
    }
    const Status s = cuda::ropeKvWrite(dx.as<float>(), rows, stride, nh, nkv, d, dcos.as<float>(), dsin.as<float>(),
                                       dslots.as<int32_t>(), dk.as<float>(), dv.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dx, x.size()), x, 1e-6, 1e-6, "rope");  // v heads: exact either way
    expectClose(toHost<float>(dk, kPool.size()), kPool, 1e-6, 1e-6, "K pool");
    expectClose(toHost<float>(dv, vPool.size()), vPool, 0, 0, "V pool");  // copied as is
  }

  void rejectsAnOddHeadWidth() {
    const Status s = cuda::ropeKvWrite(nullptr, 1, 5, 1, 1, 5, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    QVERIFY(!s.isOk());
    QVERIFY(s.message().find("odd") != std::string::npos);
  }
};

RAGWB_GPU_TEST_MAIN(TestRopeGpu)
#include "test_rope.moc"
