// kernels/kv_write.cuh against the CPU pool writes of the runner's forward: the k and v heads of
// fused q|k|v rows copied to their slots of a shuffled block table, a chunk that starts and ends
// inside blocks; every other pool row keeps its old value. Exact: the kernel only copies.
// Skips (exit 77) without a CUDA device.
#include <QtTest>

#include <cstring>

#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "kv_write.cuh"

using namespace rag;
using namespace rag::cuda::testing;

class TestKvWriteGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuWrites() {
    const int64_t nh = 4, nkv = 2, d = 16, bs = 16, numBlocks = 9, start = 13, n = 37;
    const int64_t qkvW = (nh + 2 * nkv) * d, width = nkv * d;
    const std::vector<float> qkv = randomVector(size_t(n * qkvW), 51);
    std::vector<float> kPool = randomVector(size_t(numBlocks * bs * width), 52);
    std::vector<float> vPool = randomVector(kPool.size(), 53);
    const std::vector<int32_t> blocks = shuffledBlocks(numBlocks, 54);
    std::vector<int32_t> slots;
    for (int64_t p = start; p < start + n; ++p) slots.push_back(int32_t(blocks[size_t(p / bs)] * bs + p % bs));
    cuda::DeviceBuffer dqkv = toDevice(qkv), dk = toDevice(kPool), dv = toDevice(vPool), dslots = toDevice(slots);
    for (int64_t r = 0; r < n; ++r) {
      const float* row = qkv.data() + r * qkvW;
      std::memcpy(kPool.data() + slots[size_t(r)] * width, row + nh * d, size_t(width) * sizeof(float));
      std::memcpy(vPool.data() + slots[size_t(r)] * width, row + (nh + nkv) * d, size_t(width) * sizeof(float));
    }
    const Status s = cuda::kvWrite(dqkv.as<float>() + nh * d, dqkv.as<float>() + (nh + nkv) * d, qkvW, n, width,
                                   dslots.as<int32_t>(), dk.as<float>(), dv.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dk, kPool.size()), kPool, 0, 0, "K pool");
    expectClose(toHost<float>(dv, vPool.size()), vPool, 0, 0, "V pool");
  }
};

RAGWB_GPU_TEST_MAIN(TestKvWriteGpu)
#include "test_kv_write.moc"
