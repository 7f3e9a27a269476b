// kernels/embed_gather.cuh against the CPU gather of the runner's forward (a copy of table row
// tokens[r] per row), on random ids with repeats over an odd-sized table; ids outside the
// vocabulary give zero rows. Exact: the kernel only copies. Skips (exit 77) without a device.
#include <QtTest>

#include <cstring>

#include "embed_gather.cuh"
#include "gpu_test_main.h"
#include "kernel_test_util.h"

using namespace rag;
using namespace rag::cuda::testing;

class TestEmbedGatherGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesCpuGather() {
    const int64_t vocab = 97, hidden = 65, n = 41;
    const std::vector<float> table = randomVector(size_t(vocab * hidden), 41);
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    std::mt19937 gen(42);
    std::uniform_int_distribution<int32_t> id(0, int32_t(vocab) - 1);
    for (int32_t& t : tokens) t = id(gen);
    tokens[3] = tokens[7];  // a repeated id
    tokens[5] = int32_t(vocab) - 1;
    tokens[9] = int32_t(vocab);  // outside: zeros
    tokens[11] = -2;
    std::vector<float> cpu(size_t(n * hidden), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      if (tokens[size_t(r)] >= 0 && tokens[size_t(r)] < vocab)
        std::memcpy(cpu.data() + r * hidden, table.data() + tokens[size_t(r)] * hidden, size_t(hidden) * sizeof(float));
    cuda::DeviceBuffer dt = toDevice(table), dtok = toDevice(tokens), dout = toDevice(std::vector<float>(cpu.size(), 7.0f));
    const Status s = cuda::embedGather(dt.as<float>(), vocab, hidden, dtok.as<int32_t>(), n, dout.as<float>(), nullptr);
    QVERIFY2(s.isOk(), s.toString().c_str());
    expectClose(toHost<float>(dout, cpu.size()), cpu, 0, 0, "gathered rows");
  }
};

RAGWB_GPU_TEST_MAIN(TestEmbedGatherGpu)
#include "test_embed_gather.moc"
