// kernels/prefill_attention.cuh against cpu::attendPrefill: chunks that start at 0, inside a
// block and after many blocks of a shuffled table, causal and under a random mask (the
// diagonal allowed, as a sequence's masks do, and one row allowed nothing, which both sides
// answer with zeros), with grouped-query heads and head widths 16, 40 and 128. Tolerance:
// 2e-5 absolute + 1e-4 relative (online softmax against the CPU's blocked softmax and sgemm-
// style sums). Skips (exit 77) without a CUDA device.
#include <QtTest>

#include <cmath>

#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "model/decode_kernels.h"
#include "prefill_attention.cuh"

using namespace rag;
using namespace rag::cuda::testing;

class TestPrefillAttentionGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("start");
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kvHeads");
    QTest::addColumn<int>("d");
    QTest::addColumn<bool>("masked");
    QTest::newRow("prompt from 0, GQA") << 23 << 0 << 4 << 2 << 16 << false;
    QTest::newRow("chunk inside a block, masked") << 19 << 5 << 4 << 2 << 16 << true;
    QTest::newRow("late chunk, d 40") << 33 << 70 << 6 << 3 << 40 << false;
    QTest::newRow("late chunk masked, d 128") << 17 << 45 << 8 << 2 << 128 << true;
  }
  void matchesCpuReference() {
    QFETCH(int, n);
    QFETCH(int, start);
    QFETCH(int, heads);
    QFETCH(int, kvHeads);
    QFETCH(int, d);
    QFETCH(bool, masked);
    const int64_t bs = 16, ctx = int64_t(start) + n, numBlocks = (ctx + bs - 1) / bs + 2;
    const int64_t width = int64_t(kvHeads) * d, qStride = int64_t(heads + 2 * kvHeads) * d, outStride = int64_t(heads) * d;
    const std::vector<float> kPool = randomVector(size_t(numBlocks * bs * width), 71);
    const std::vector<float> vPool = randomVector(kPool.size(), 72);
    const std::vector<float> q = randomVector(size_t(n * qStride), 73);
    const std::vector<int32_t> blocks = shuffledBlocks(numBlocks, 74);
    std::vector<uint8_t> allowed;
    if (masked) {
      std::mt19937 gen(75);
      std::bernoulli_distribution coin(0.6);
      allowed.resize(size_t(n * ctx));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t p = 0; p < ctx; ++p) allowed[size_t(r * ctx + p)] = p == start + r || coin(gen);
      std::fill(allowed.begin() + 2 * ctx, allowed.begin() + 3 * ctx, uint8_t{0});  // row 2 sees nothing
    }
    const uint8_t* mask = masked ? allowed.data() : nullptr;
    const float scale = float(1.0 / std::sqrt(double(d)));
    std::vector<float> cpu(size_t(n * outStride), 0.0f);
    std::vector<float> scratch(size_t(model::cpu::attendPrefillScratch(n, ctx, d)));
    const model::cpu::PagedKv kv{kPool.data(), vPool.data(), blocks.data(), bs, kvHeads, d};
    model::cpu::attendPrefill(q.data(), qStride, n, start, heads, kv, mask, scale, scratch.data(), cpu.data(),
                              outStride);
    if (masked)
      for (int64_t i = 0; i < outStride; ++i) QCOMPARE(cpu[size_t(2 * outStride + i)], 0.0f);

    cuda::DeviceBuffer dk = toDevice(kPool), dv = toDevice(vPool), dq = toDevice(q), db = toDevice(blocks),
                       dout = toDevice(std::vector<float>(cpu.size(), 1.0f)), dmask;
    if (masked) dmask = toDevice(allowed);
    const cuda::DevicePagedKv dkv{dk.as<float>(), dv.as<float>(), bs, kvHeads, d};
    const Status s = cuda::prefillAttention(dq.as<float>(), qStride, n, start, heads, dkv, db.as<int32_t>(),
                                            masked ? dmask.as<uint8_t>() : nullptr, scale, dout.as<float>(), outStride,
                                            nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dout, cpu.size()), cpu, 2e-5, 1e-4, "prefill attention");
  }
};

RAGWB_GPU_TEST_MAIN(TestPrefillAttentionGpu)
#include "test_prefill_attention.moc"
