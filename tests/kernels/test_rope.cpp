// kernels/rope.cuh against cpu::rope on fused q|k|v rows: the first nh + nkv heads of each row
// rotated by its own position's tables, the v heads left as they were. Head widths 16, 128 and
// 6 (three frequencies); positions random. ropeKvWrite against cpu::rope then the runner's pool
// copies: the rows, and the K/V pools at shuffled slots (every other pool row untouched).
// Tolerance: 1e-6 absolute + 1e-6 relative (a product and a sum per element, FMA on the
// device). Skips (exit 77) without a CUDA device.
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
  }
  void matchesCpuReference() {
    QFETCH(int, rows);
    QFETCH(int, nh);
    QFETCH(int, nkv);
    QFETCH(int, d);
    const int64_t stride = int64_t(nh + 2 * nkv) * d;
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
    cuda::DeviceBuffer dx = toDevice(x), dcos = toDevice(cos), dsin = toDevice(sin);
    for (int r = 0; r < rows; ++r)
      model::cpu::rope(x.data() + r * stride, nh + nkv, d, cos.data() + r * d, sin.data() + r * d);
    const Status s = cuda::rope(dx.as<float>(), rows, stride, nh + nkv, d, dcos.as<float>(), dsin.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dx, x.size()), x, 1e-6, 1e-6, "rope");  // v heads: exact either way
  }

  void ropeKvWriteMatchesRopeThenPoolCopies() {
    const int64_t rows = 11, nh = 4, nkv = 2, d = 16, bs = 4, numBlocks = 8;
    const int64_t stride = (nh + 2 * nkv) * d, width = nkv * d;
    std::vector<float> x = randomVector(size_t(rows * stride), 31);
    std::vector<float> cos(size_t(rows * d)), sin(size_t(rows * d));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t f = 0; f < d / 2; ++f) {
        const double a = double(100 + 7 * r) * std::exp(2.0 * double(f) / double(d) * -std::log(10000.0));
        cos[size_t(r * d + f)] = cos[size_t(r * d + f + d / 2)] = float(std::cos(a));
        sin[size_t(r * d + f)] = sin[size_t(r * d + f + d / 2)] = float(std::sin(a));
      }
    std::vector<float> kPool = randomVector(size_t(numBlocks * bs * width), 32), vPool = randomVector(kPool.size(), 33);
    const std::vector<int32_t> blocks = shuffledBlocks(numBlocks, 34);
    std::vector<int32_t> slots;
    for (int64_t p = 3; p < 3 + rows; ++p) slots.push_back(int32_t(blocks[size_t(p / bs)] * bs + p % bs));
    cuda::DeviceBuffer dx = toDevice(x), dcos = toDevice(cos), dsin = toDevice(sin), dslots = toDevice(slots);
    cuda::DeviceBuffer dk = toDevice(kPool), dv = toDevice(vPool);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = x.data() + r * stride;
      model::cpu::rope(row, nh + nkv, d, cos.data() + r * d, sin.data() + r * d);
      std::memcpy(kPool.data() + slots[size_t(r)] * width, row + nh * d, size_t(width) * sizeof(float));
      std::memcpy(vPool.data() + slots[size_t(r)] * width, row + (nh + nkv) * d, size_t(width) * sizeof(float));
    }
    const Status s = cuda::ropeKvWrite(dx.as<float>(), rows, stride, nh, nkv, d, dcos.as<float>(), dsin.as<float>(),
                                       dslots.as<int32_t>(), dk.as<float>(), dv.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dx, x.size()), x, 1e-6, 1e-6, "rows");
    expectClose(toHost<float>(dk, kPool.size()), kPool, 1e-6, 1e-6, "K pool");
    expectClose(toHost<float>(dv, vPool.size()), vPool, 0, 0, "V pool");  // copied as is
  }

  void rejectsAnOddHeadWidth() {
    const Status s = cuda::rope(nullptr, 1, 5, 1, 5, nullptr, nullptr, nullptr);
    QVERIFY(!s.isOk());
    QVERIFY(s.message().find("odd") != std::string::npos);
  }
};

RAGWB_GPU_TEST_MAIN(TestRopeGpu)
#include "test_rope.moc"
