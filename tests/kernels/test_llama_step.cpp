// kernels/llama_step.h against the runner's CPU step: a tiny random Llama (two layers of
// grouped-query attention, torch_runner_fixtures.h) generates greedily for two prompts on a
// ModelRunner (the CPU kernel forward of runner_forward.cpp, every row's logits kept) for three
// prompts, one under a Block-Attention mask; the GPU step is driven over the same tokens
// (teacher-forced with the runner's output) in a schedule that mixes prefill chunks (one of
// them masked) and decode rows in one step, with block size 8 and shuffled block tables so that
// contexts end inside blocks. Every row's logits must agree to 2e-4 absolute +
// 2e-4 relative, and the argmax of each generating row must be the runner's token wherever the
// runner's top two logits are more than 1e-3 apart. Skips (exit 77) without a CUDA device.
#include "model/llama.h"  // torch before Qt

#include <algorithm>
#include <functional>
#include <map>

#include "../engine/torch_runner_fixtures.h"
#include "gpu_test_main.h"
#include "kernel_test_util.h"
#include "llama_step.h"

using namespace rag;

namespace {

// The runner's FusedLayer layout built from the model's [out, in] tensors (as ModelRunner::create
// does), kept alive beside the raw pointers handed to CudaLlamaStep.
struct FusedHostWeights {
  std::vector<torch::Tensor> keep;
  cuda::LlamaHostWeights w;

  explicit FusedHostWeights(const model::LlamaModel& m) {
    torch::NoGradGuard noGrad;
    const model::LlamaWeights& lw = m.weights();
    auto hold = [&](torch::Tensor t) -> const float* {
      if (!t.defined()) return nullptr;
      keep.push_back(t.contiguous());
      return keep.back().data_ptr<float>();
    };
    auto stacked = [](std::initializer_list<torch::Tensor> parts) {
      for (const torch::Tensor& t : parts)
        if (!t.defined()) return torch::Tensor();
      return torch::cat(std::vector<torch::Tensor>(parts), 0);
    };
    w.embed = hold(lw.embed);
    w.norm = hold(lw.norm);
    w.lmHeadT = hold(lw.lmHead.t());
    for (const model::LlamaLayerWeights& l : lw.layers)
      w.layers.push_back({hold(l.inputNorm), hold(stacked({l.q, l.k, l.v}).t()), hold(stacked({l.qBias, l.kBias, l.vBias})),
                          hold(l.o.t()), hold(l.oBias), hold(l.postNorm), hold(stacked({l.gate, l.up}).t()),
                          hold(stacked({l.gateBias, l.upBias})), hold(l.down.t()), hold(l.downBias)});
  }
};

// One sequence on the GPU side: its tokens (prompt then the runner's output), rows computed so
// far, block table, and the logits of every computed row.
struct GpuSeq {
  std::vector<int32_t> tokens;
  std::vector<int64_t> positions;
  int64_t rows = 0;  // rows to compute: all but the last token
  int64_t computed = 0;
  std::vector<int32_t> blocks;
  std::vector<uint8_t> promptMask;  // [prompt, prompt]; empty: causal. The prompt runs as one chunk.
  std::vector<std::vector<float>> logits;

  cuda::StepItem item(int64_t n) const {
    return {.tokens = std::span<const int32_t>(tokens).subspan(size_t(computed), size_t(n)),
            .positions = std::span<const int64_t>(positions).subspan(size_t(computed), size_t(n)),
            .start = computed,
            .blocks = blocks,
            .allowed = computed == 0 ? std::span<const uint8_t>(promptMask) : std::span<const uint8_t>()};
  }
};

}  // namespace

class TestLlamaStepGpu : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void matchesTheRunnersCpuStep() {
    const int64_t vocab = 96, bs = 8, numBlocks = 16, generate = 6;
    auto m = tinyModel(3, vocab);
    const std::vector<std::vector<int32_t>> prompts{randomTokens(11, vocab, 5), randomTokens(21, vocab, 6),
                                                    randomTokens(17, vocab, 8)};
    const model::AttentionMask blockMask = model::AttentionMask::blocks({0, 6, 11});  // the third prompt's

    // The CPU side: the runner's kernel forward, greedy, every row's logits.
    model::RunnerParams rp;
    rp.blockSize = bs;
    auto runner = makeRunner(m, rp);
    std::vector<model::SeqId> ids;
    for (size_t s = 0; s < prompts.size(); ++s) {
      model::SequenceRequest req = greedy(prompts[s], int32_t(generate));
      if (s == 2) req.mask = blockMask;
      auto id = runner->add(std::move(req));
      QVERIFY2(id.isOk(), id.status().toString().c_str());
      ids.push_back(*id);
    }
    std::map<model::SeqId, Run> cpu = drain(*runner, vocab);

    // The GPU side over the same tokens.
    const std::vector<int32_t> order = cuda::testing::shuffledBlocks(numBlocks, 7);
    std::vector<GpuSeq> seqs(prompts.size());
    size_t nextBlock = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const Run& run = cpu[ids[s]];
      QCOMPARE(int64_t(run.tokens.size()), generate);
      GpuSeq& g = seqs[s];
      g.tokens = prompts[s];
      g.tokens.insert(g.tokens.end(), run.tokens.begin(), run.tokens.end());
      for (size_t i = 0; i < g.tokens.size(); ++i) g.positions.push_back(int64_t(i));
      g.rows = int64_t(g.tokens.size()) - 1;
      QCOMPARE(int64_t(run.rows.size()), g.rows);
      for (int64_t b = 0; b < (g.rows + bs - 1) / bs; ++b) g.blocks.push_back(order[nextBlock++]);
    }
    seqs[2].promptMask = blockMask.dense(int64_t(prompts[2].size()));
    FusedHostWeights fused(*m);
    const cuda::CudaLlamaStepParams params{.blockSize = bs, .numBlocks = numBlocks};
    auto step = cuda::CudaLlamaStep::create(m->config(), fused.w, params);
    QVERIFY2(step.isOk(), step.status().toString().c_str());
    // Step 1: the prompts prefill (the second only its first 13 rows, the third under its
    // mask); step 2: the first and third sequences' first decode rows beside the second's
    // remaining prompt chunk; then decode rows.
    auto runStep = [&](const std::vector<std::pair<size_t, int64_t>>& work, int64_t decodeItems) {
      std::vector<cuda::StepItem> items;
      std::vector<cuda::StepLogitRow> want;
      for (size_t k = 0; k < work.size(); ++k) {
        items.push_back(seqs[work[k].first].item(work[k].second));
        for (int64_t r = 0; r < work[k].second; ++r) want.push_back({k, r});
      }
      auto logits = (*step)->forward(items, decodeItems, want);
      QVERIFY2(logits.isOk(), logits.status().toString().c_str());
      QCOMPARE(logits->size(), want.size() * size_t(vocab));
      for (size_t j = 0; j < want.size(); ++j) {
        GpuSeq& g = seqs[work[want[j].item].first];
        g.logits.emplace_back(logits->begin() + int64_t(j) * vocab, logits->begin() + int64_t(j + 1) * vocab);
      }
      for (const auto& [s, n] : work) seqs[s].computed += n;
    };
    runStep({{0, int64_t(prompts[0].size())}, {1, 13}, {2, int64_t(prompts[2].size())}}, 0);
    if (QTest::currentTestFailed()) return;
    runStep({{0, 1}, {2, 1}, {1, int64_t(prompts[1].size()) - 13}}, 2);
    if (QTest::currentTestFailed()) return;
    auto pending = [&] {
      return std::any_of(seqs.begin(), seqs.end(), [](const GpuSeq& g) { return g.computed < g.rows; });
    };
    while (pending()) {
      std::vector<std::pair<size_t, int64_t>> work;
      for (size_t s = 0; s < seqs.size(); ++s)
        if (seqs[s].computed < seqs[s].rows) work.push_back({s, 1});
      runStep(work, int64_t(work.size()));
      if (QTest::currentTestFailed()) return;
    }

    for (size_t s = 0; s < seqs.size(); ++s) {
      const Run& run = cpu[ids[s]];
      const GpuSeq& g = seqs[s];
      QCOMPARE(int64_t(g.logits.size()), g.rows);
      for (int64_t r = 0; r < g.rows; ++r) {
        const std::vector<float>& want = run.rows[size_t(r)];
        const QByteArray what = QString("sequence %1 row %2 logits").arg(s).arg(r).toUtf8();
        cuda::testing::expectClose(g.logits[size_t(r)], want, 2e-4, 2e-4, what.constData());
        if (QTest::currentTestFailed()) return;
        if (r + 1 < int64_t(prompts[s].size())) continue;  // a prompt row: no token chosen
        std::vector<float> sorted = want;
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
        if (sorted[0] - sorted[1] <= 1e-3f) continue;  // a near tie: either token is right
        const auto gpuArgmax = std::max_element(g.logits[size_t(r)].begin(), g.logits[size_t(r)].end());
        QCOMPARE(int32_t(gpuArgmax - g.logits[size_t(r)].begin()), g.tokens[size_t(r + 1)]);
      }
    }
  }

  void rejectsABlockOutsideThePool() {
    auto m = tinyModel(3, 96);
    FusedHostWeights fused(*m);
    const cuda::CudaLlamaStepParams params{.blockSize = 8, .numBlocks = 2};
    auto step = cuda::CudaLlamaStep::create(m->config(), fused.w, params);
    QVERIFY2(step.isOk(), step.status().toString().c_str());
    const std::vector<int32_t> tokens{1, 2, 3}, blocks{2};
    const std::vector<int64_t> positions{0, 1, 2};
    const std::vector<cuda::StepItem> items{
        {.tokens = tokens, .positions = positions, .start = 0, .blocks = blocks, .allowed = {}}};
    auto r = (*step)->forward(items, 0, {});
    QVERIFY(!r.isOk());
    QVERIFY(r.status().message().find("outside the pool") != std::string::npos);
  }
};

RAGWB_GPU_TEST_MAIN(TestLlamaStepGpu)
#include "test_llama_step.moc"
