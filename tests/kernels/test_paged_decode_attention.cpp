// kernels/paged_decode_attention.cuh against cpu::attendDecode: a batch of sequences whose
// contexts (1, a partial block, whole blocks, hundreds and thousands of positions) live in one
// pool under shuffled block tables, with grouped-query heads (8 on 2, 4 on 4, 12 on 4) and head
// widths 64, 24 (not a multiple of a warp), 128 and 256 (the widest the kernel holds).
// Tolerance: 2e-5 absolute + 1e-4 relative (online softmax merged across warps, expf against
// the CPU's exp polynomial). Skips (exit 77) without a CUDA device.
#include <QtTest>

#include <cmath>

#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "model/decode_kernels.h"
#include "paged_decode_attention.cuh"

using namespace rag;
using namespace rag::cuda::testing;

class TestPagedDecodeAttentionGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuReference_data() {
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kvHeads");
    QTest::addColumn<int>("d");
    QTest::addColumn<int>("bs");
    QTest::newRow("GQA 8 on 2, d 64") << 8 << 2 << 64 << 16;
    QTest::newRow("MHA, d 24, block 7") << 4 << 4 << 24 << 7;
    QTest::newRow("GQA 12 on 4, d 128") << 12 << 4 << 128 << 16;
    QTest::newRow("d 256, block 32") << 2 << 1 << 256 << 32;
  }
  void matchesCpuReference() {
    QFETCH(int, heads);
    QFETCH(int, kvHeads);
    QFETCH(int, d);
    QFETCH(int, bs);
    const std::vector<int64_t> contexts{1, 5, int64_t(bs), 2 * int64_t(bs) + 1, 300, 2053};
    const int64_t batch = int64_t(contexts.size());
    int64_t tableStride = 0, numBlocks = 0;
    for (int64_t c : contexts) {
      tableStride = std::max(tableStride, (c + bs - 1) / bs);
      numBlocks += (c + bs - 1) / bs;
    }
    numBlocks += 3;  // blocks no sequence uses
    const int64_t width = int64_t(kvHeads) * d, qStride = int64_t(heads) * d + 5, outStride = int64_t(heads) * d + 3;
    const std::vector<float> kPool = randomVector(size_t(numBlocks * bs * width), 61);
    const std::vector<float> vPool = randomVector(kPool.size(), 62);
    const std::vector<float> q = randomVector(size_t(batch * qStride), 63);
    // Sequence b takes the next blocks of a shuffled order; its table row is padded with -1.
    const std::vector<int32_t> order = shuffledBlocks(numBlocks, 64);
    std::vector<int32_t> tables(size_t(batch * tableStride), -1), lens;
    size_t next = 0;
    for (int64_t b = 0; b < batch; ++b) {
      lens.push_back(int32_t(contexts[size_t(b)]));
      for (int64_t j = 0; j < (contexts[size_t(b)] + bs - 1) / bs; ++j) tables[size_t(b * tableStride + j)] = order[next++];
    }
    const float scale = float(1.0 / std::sqrt(double(d)));
    std::vector<float> cpu(size_t(batch * outStride), 0.0f);
    std::vector<float> scores(size_t(heads) * 2053);
    for (int64_t b = 0; b < batch; ++b) {
      const model::cpu::PagedKv kv{kPool.data(), vPool.data(), tables.data() + b * tableStride, bs, kvHeads, d};
      model::cpu::attendDecode(q.data() + b * qStride, 0, heads, heads, kv, contexts[size_t(b)], scale, scores.data(),
                               cpu.data() + b * outStride);
    }
    cuda::DeviceBuffer dk = toDevice(kPool), dv = toDevice(vPool), dq = toDevice(q), dt = toDevice(tables),
                       dl = toDevice(lens), dout = toDevice(std::vector<float>(cpu.size(), 0.0f));
    const cuda::DevicePagedKv kv{dk.as<float>(), dv.as<float>(), bs, kvHeads, d};
    const Status s = cuda::pagedDecodeAttention(dq.as<float>(), qStride, batch, heads, kv, dt.as<int32_t>(), tableStride,
                                                dl.as<int32_t>(), scale, dout.as<float>(), outStride, nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dout, cpu.size()), cpu, 2e-5, 1e-4, "decode attention");
  }

  void rejectsShapesItCannotRun() {
    const cuda::DevicePagedKv wide{nullptr, nullptr, 16, 2, cuda::kMaxAttentionHeadDim + 2};
    Status s = cuda::pagedDecodeAttention(nullptr, 0, 1, 4, wide, nullptr, 0, nullptr, 1.0f, nullptr, 0, nullptr);
    QVERIFY(!s.isOk());
    QVERIFY(s.message().find("CPU") != std::string::npos);
    const cuda::DevicePagedKv uneven{nullptr, nullptr, 16, 3, 64};
    s = cuda::pagedDecodeAttention(nullptr, 0, 1, 4, uneven, nullptr, 0, nullptr, 1.0f, nullptr, 0, nullptr);
    QVERIFY(!s.isOk());
  }
};

RAGWB_GPU_TEST_MAIN(TestPagedDecodeAttentionGpu)
#include "test_paged_decode_attention.moc"
