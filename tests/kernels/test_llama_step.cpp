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
#include "model/logit_ops.h"

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
      auto out = (*step)->forward(items, decodeItems, want);
      QVERIFY2(out.isOk(), out.status().toString().c_str());
      QVERIFY(out->tokens.empty());  // no row asked for its greedy token alone
      const std::vector<float>* logits = &out->logits;
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

  // Decode steps replayed from CUDA graphs against the same steps launched eagerly, on two
  // steps with the same weights: logits and the K/V written must be bit-identical, through a
  // batch that shrinks and grows back, block tables that outgrow their padded width (a new
  // graph), and a long prefill in between that reallocates the step's buffers (stale graphs
  // dropped and captured again).
  void graphReplayMatchesEagerSteps() {
    const int64_t vocab = 96, bs = 4, numBlocks = 64, perSeq = 16;
    auto m = tinyModel(5, vocab);
    FusedHostWeights fused(*m);
    cuda::CudaLlamaStepParams params{.blockSize = bs, .numBlocks = numBlocks, .graphs = false};
    auto eager = cuda::CudaLlamaStep::create(m->config(), fused.w, params);
    params.graphs = true;
    auto graphed = cuda::CudaLlamaStep::create(m->config(), fused.w, params);
    QVERIFY2(eager.isOk() && graphed.isOk(), (eager.isOk() ? graphed.status() : eager.status()).toString().c_str());

    struct Seq {
      std::vector<int32_t> tokens;
      std::vector<int64_t> positions;
      std::vector<int32_t> blocks;
      int64_t computed = 0;
    };
    std::vector<Seq> seqs;
    auto addSeq = [&](int64_t promptLen, uint64_t seed) {
      Seq q;
      q.tokens = randomTokens(promptLen, vocab, seed);
      for (int64_t b = 0; b < perSeq; ++b) q.blocks.push_back(int32_t(int64_t(seqs.size()) * perSeq + b));
      seqs.push_back(std::move(q));
    };
    // One step over `which` (each computes all its uncomputed tokens: a prompt, or one decode
    // row) on both steps; the next token is the eager logits' argmax.
    auto step = [&](const std::vector<size_t>& which, bool decode) {
      std::vector<cuda::StepItem> items;
      std::vector<cuda::StepLogitRow> want;
      for (size_t k = 0; k < which.size(); ++k) {
        Seq& q = seqs[which[k]];
        q.positions.resize(q.tokens.size());
        for (size_t i = 0; i < q.tokens.size(); ++i) q.positions[i] = int64_t(i);
        const auto n = size_t(int64_t(q.tokens.size()) - q.computed);
        items.push_back({.tokens = std::span<const int32_t>(q.tokens).subspan(size_t(q.computed), n),
                         .positions = std::span<const int64_t>(q.positions).subspan(size_t(q.computed), n),
                         .start = q.computed, .blocks = q.blocks, .allowed = {}});
        want.push_back({k, int64_t(n) - 1});
      }
      const int64_t decodeItems = decode ? int64_t(items.size()) : 0;
      auto a = (*eager)->forward(items, decodeItems, want);
      auto b = (*graphed)->forward(items, decodeItems, want);
      QVERIFY2(a.isOk() && b.isOk(), (a.isOk() ? b.status() : a.status()).toString().c_str());
      QVERIFY2(a->logits == b->logits, "a graph-replayed step's logits differ from the eager step's");
      // The same step again with every row greedy: the tokens alone come back, each the argmax
      // of its logits as the runner's greedy Sampler takes it (the step rewrites the same K/V).
      std::vector<cuda::StepLogitRow> greedyWant = want;
      for (cuda::StepLogitRow& w : greedyWant) w.greedyOnly = true;
      auto c = (*graphed)->forward(items, decodeItems, greedyWant);
      QVERIFY2(c.isOk(), c.status().toString().c_str());
      QVERIFY(c->logits.empty());
      QCOMPARE(c->tokens.size(), which.size());
      for (size_t k = 0; k < which.size(); ++k) {
        Seq& q = seqs[which[k]];
        q.computed = int64_t(q.tokens.size());
        const float* row = a->logits.data() + int64_t(k) * vocab;
        const auto greedy = int32_t(model::argmaxLogit(row, size_t(vocab)));
        QCOMPARE(c->tokens[k], greedy);
        q.tokens.push_back(greedy);
      }
    };
    addSeq(5, 11);
    addSeq(9, 12);
    addSeq(3, 13);
    step({0, 1, 2}, false);
    // Graph shapes (rows, padded table width): (3, 8) at t 0; (2, 8) at t 6 while the batch is
    // smaller; (3, 16) at t 26, when the second sequence's context passes 8 blocks of 4; at t 28
    // a 40-token prefill moves the buffers, so (3, 16) is captured again, then (4, 16).
    for (int t = 0; t < 35 && !QTest::currentTestFailed(); ++t) {
      if (t == 28) {
        addSeq(40, 14);
        step({3}, false);
        step({0, 1, 2}, true);
      }
      if (t >= 6 && t < 10) step({0, 2}, true);
      else if (t >= 28) step({0, 1, 2, 3}, true);
      else step({0, 1, 2}, true);
    }
    if (QTest::currentTestFailed()) return;
    // The K/V both wrote, for every position of the first sequence, in every layer.
    for (int32_t layer = 0; layer < int32_t(m->config().numHiddenLayers); ++layer) {
      const Seq& q = seqs[0];
      std::vector<int64_t> slots;
      for (int64_t p = 0; p < q.computed; ++p) slots.push_back(q.blocks[size_t(p / bs)] * bs + p % bs);
      const size_t width = size_t(m->config().numKeyValueHeads * m->config().headDim) * slots.size();
      std::vector<float> ka(width), va(width), kb(width), vb(width);
      QVERIFY((*eager)->readRows(layer, slots, ka.data(), va.data()).isOk());
      QVERIFY((*graphed)->readRows(layer, slots, kb.data(), vb.data()).isOk());
      QVERIFY2(ka == kb && va == vb, "the K/V a graph-replayed step wrote differ from the eager step's");
    }
    const cuda::CudaLlamaStepStats& g = (*graphed)->stats();
    QVERIFY2(g.graphError.empty(), g.graphError.c_str());
    // Each step ran twice on the graphed side, with logits and then greedy: the same 5 shapes.
    QCOMPARE(g.graphCaptures, int64_t(5));
    QCOMPARE(g.graphReplays, int64_t(2 * 36));
    QCOMPARE(g.eagerSteps, int64_t(2 * 2));  // the two prefill steps
    QCOMPARE(g.tokenSteps, int64_t(36 + 2));  // the greedy runs sent tokens only
    QCOMPARE((*eager)->stats().graphReplays, int64_t(0));
    QCOMPARE((*eager)->stats().eagerSteps, int64_t(38));
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
