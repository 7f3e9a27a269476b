// ModelRunner on a StepBackend (model/step_backend.h), the seam the GPU backend
// (kernels/llama_step.h) plugs into, driven here by a CPU double: HostBackend keeps the weights
// and the compute tier's K/V in memory of its own and computes each step with the decode kernels,
// single-threaded. The runner must give the tokens and logits of its own CPU path and of the
// dense reference, and everything that touches K/V outside the forward pass (copy-on-write of
// shared prefixes, cached segments placed and re-encoded, keys(), the host tier's moves) must go
// through the backend, whose pool the runner's own memory never mirrors. A backend that fails
// ends the sequences with its error.
#include "model/llama.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way
#include "model/runner.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "model/decode_kernels.h"
#include "model/logit_ops.h"
#include "model/step_backend.h"
#include "status_checks.h"
#include "torch_runner_fixtures.h"

using namespace rag;
using namespace rag::model;

namespace {

struct Calls {
  int forwards = 0, copies = 0, reads = 0, writes = 0;
  bool fail = false;  // every call fails from then on, as a lost device would
  // Greedy-only rows are answered with their tokens (and only the other rows' logits), as the
  // GPU backend does when every row of a step is greedy; greedyRows counts them.
  bool answerGreedy = false;
  int greedyRows = 0;
};

class HostBackend final : public StepBackend {
public:
  static StepBackendFactory factory(Calls* calls) {
    return [calls](const LlamaConfig& c, const StepWeights& w, int32_t bs,
                   int32_t blocks) -> Result<std::unique_ptr<StepBackend>> {
      return std::unique_ptr<StepBackend>(new HostBackend(c, w, bs, blocks, calls));
    };
  }

  std::string description() const override { return "host double"; }

  Result<StepOutput> forward(std::span<const StepItem> items, int64_t decodeItems,
                             std::span<const StepLogitRow> logitRows) override {
    ++m_calls->forwards;
    if (m_calls->fail) return Status::internal("device lost");
    const int64_t hid = m_c.hiddenSize, nh = m_c.numAttentionHeads, nkv = m_c.numKeyValueHeads, d = m_c.headDim;
    const int64_t qkvW = (nh + 2 * nkv) * d, inter = m_c.intermediateSize, vocab = m_c.vocabSize;
    const auto eps = static_cast<float>(m_c.rmsNormEps);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    std::vector<int64_t> rowStart;
    int64_t n = 0;
    for (const StepItem& it : items) {
      rowStart.push_back(n);
      n += static_cast<int64_t>(it.tokens.size());
    }
    std::vector<float> x(n * hid), h(n * hid), qkv(n * qkvW), att(n * nh * d), gateUp(n * 2 * inter), act(n * inter);
    std::vector<float> cs(n * 2 * d);  // per row: cos | sin
    for (size_t k = 0; k < items.size(); ++k)
      for (size_t j = 0; j < items[k].tokens.size(); ++j) {
        const int64_t r = rowStart[k] + static_cast<int64_t>(j);
        std::copy_n(m_embed.data() + items[k].tokens[j] * hid, hid, x.data() + r * hid);
        for (int64_t f = 0; f < d / 2; ++f) {
          const double a = static_cast<double>(items[k].positions[j]) * std::pow(m_c.ropeTheta, -2.0 * static_cast<double>(f) / static_cast<double>(d));
          cs[r * 2 * d + f] = cs[r * 2 * d + f + d / 2] = static_cast<float>(std::cos(a));
          cs[r * 2 * d + d + f] = cs[r * 2 * d + d + f + d / 2] = static_cast<float>(std::sin(a));
        }
      }
    std::vector<float> scores, scratch;
    for (size_t l = 0; l < m_layers.size(); ++l) {
      const Layer& L = m_layers[l];
      cpu::rmsNorm(x.data(), L.inputNorm.data(), n, hid, eps, h.data());
      cpu::linear(h.data(), n, hid, L.qkvT.data(), qkvW, ptr(L.qkvBias), 0, qkvW, qkv.data(), qkvW, false);
      for (size_t k = 0; k < items.size(); ++k)
        for (size_t j = 0; j < items[k].tokens.size(); ++j) {
          const int64_t r = rowStart[k] + static_cast<int64_t>(j);
          float* row = qkv.data() + r * qkvW;
          cpu::rope(row, nh + nkv, d, cs.data() + r * 2 * d, cs.data() + r * 2 * d + d);
          const int64_t slot = slotOf(items[k], items[k].start + static_cast<int64_t>(j));
          std::copy_n(row + nh * d, nkv * d, m_k[l].data() + slot * nkv * d);
          std::copy_n(row + (nh + nkv) * d, nkv * d, m_v[l].data() + slot * nkv * d);
        }
      for (size_t k = 0; k < items.size(); ++k) {
        const StepItem& it = items[k];
        const cpu::PagedKv kv{m_k[l].data(), m_v[l].data(), it.blocks.data(), m_bs, nkv, d};
        const int64_t rows = static_cast<int64_t>(it.tokens.size());
        if (static_cast<int64_t>(k) < decodeItems) {
          scores.resize(static_cast<size_t>(nh * (it.start + 1)));
          cpu::attendDecode(qkv.data() + rowStart[k] * qkvW, 0, nh, nh, kv, it.start + 1, scale, scores.data(),
                            att.data() + rowStart[k] * nh * d);
        } else {
          scratch.resize(static_cast<size_t>(cpu::attendPrefillScratch(rows, it.start + rows, d)));
          cpu::attendPrefill(qkv.data() + rowStart[k] * qkvW, qkvW, rows, it.start, nh, kv,
                             it.allowed.empty() ? nullptr : it.allowed.data(), scale, scratch.data(),
                             att.data() + rowStart[k] * nh * d, nh * d);
        }
      }
      cpu::linear(att.data(), n, nh * d, L.oT.data(), hid, ptr(L.oBias), 0, hid, x.data(), hid, true);
      cpu::rmsNorm(x.data(), L.postNorm.data(), n, hid, eps, h.data());
      cpu::linear(h.data(), n, hid, L.gateUpT.data(), 2 * inter, ptr(L.gateUpBias), 0, 2 * inter, gateUp.data(), 2 * inter, false);
      cpu::siluMul(gateUp.data(), n, inter, act.data());
      cpu::linear(act.data(), n, inter, L.downT.data(), hid, ptr(L.downBias), 0, hid, x.data(), hid, true);
    }
    StepOutput out;
    std::vector<float> row(static_cast<size_t>(vocab));
    if (m_calls->answerGreedy) out.tokens.assign(logitRows.size(), -1);
    for (size_t j = 0; j < logitRows.size(); ++j) {
      cpu::rmsNorm(x.data() + (rowStart[logitRows[j].item] + logitRows[j].row) * hid, m_norm.data(), 1, hid, eps, h.data());
      cpu::linear(h.data(), 1, hid, m_lmHeadT.data(), vocab, nullptr, 0, vocab, row.data(), vocab, false);
      if (m_calls->answerGreedy && logitRows[j].greedyOnly) {
        out.tokens[j] = static_cast<int32_t>(argmaxLogit(row.data(), row.size()));
        ++m_calls->greedyRows;
      } else {
        out.logits.insert(out.logits.end(), row.begin(), row.end());
      }
    }
    return out;
  }

  Status copyBlock(int32_t from, int32_t to) override {
    ++m_calls->copies;
    if (m_calls->fail) return Status::internal("device lost");
    const int64_t n = m_bs * m_row;
    for (auto* pool : {&m_k, &m_v})
      for (std::vector<float>& layer : *pool) std::copy_n(layer.begin() + from * n, n, layer.begin() + to * n);
    return Status::ok();
  }
  Status readRows(int32_t layer, std::span<const int64_t> slots, void* keys, void* values) const override {
    ++m_calls->reads;
    if (m_calls->fail) return Status::internal("device lost");
    for (size_t i = 0; i < slots.size(); ++i) {
      std::copy_n(m_k[static_cast<size_t>(layer)].data() + slots[i] * m_row, m_row, static_cast<float*>(keys) + i * m_row);
      std::copy_n(m_v[static_cast<size_t>(layer)].data() + slots[i] * m_row, m_row, static_cast<float*>(values) + i * m_row);
    }
    return Status::ok();
  }
  Status writeRows(int32_t layer, std::span<const int64_t> slots, const void* keys, const void* values) override {
    ++m_calls->writes;
    if (m_calls->fail) return Status::internal("device lost");
    for (size_t i = 0; i < slots.size(); ++i) {
      std::copy_n(static_cast<const float*>(keys) + i * m_row, m_row, m_k[static_cast<size_t>(layer)].data() + slots[i] * m_row);
      std::copy_n(static_cast<const float*>(values) + i * m_row, m_row, m_v[static_cast<size_t>(layer)].data() + slots[i] * m_row);
    }
    return Status::ok();
  }

private:
  struct Layer {
    std::vector<float> inputNorm, qkvT, qkvBias, oT, oBias, postNorm, gateUpT, gateUpBias, downT, downBias;
  };
  // The weights are valid during the factory call only: copied, as a device uploads them.
  HostBackend(const LlamaConfig& c, const StepWeights& w, int32_t bs, int32_t blocks, Calls* calls)
      : m_c(c), m_bs(bs), m_row(c.numKeyValueHeads * c.headDim), m_calls(calls) {
    const int64_t hid = c.hiddenSize, inter = c.intermediateSize, qkvW = (c.numAttentionHeads + 2 * c.numKeyValueHeads) * c.headDim;
    auto copy = [](const float* p, int64_t count) { return p ? std::vector<float>(p, p + count) : std::vector<float>(); };
    m_embed = copy(w.embed, c.vocabSize * hid);
    m_norm = copy(w.norm, hid);
    m_lmHeadT = copy(w.lmHeadT, hid * c.vocabSize);
    for (const StepLayerWeights& l : w.layers)
      m_layers.push_back({copy(l.inputNorm, hid), copy(l.qkvT, hid * qkvW), copy(l.qkvBias, qkvW),
                          copy(l.oT, c.numAttentionHeads * c.headDim * hid), copy(l.oBias, hid), copy(l.postNorm, hid),
                          copy(l.gateUpT, hid * 2 * inter), copy(l.gateUpBias, 2 * inter), copy(l.downT, inter * hid),
                          copy(l.downBias, hid)});
    m_k.assign(w.layers.size(), std::vector<float>(static_cast<size_t>(int64_t{blocks} * bs * m_row), 0.0f));
    m_v = m_k;
  }
  static const float* ptr(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }
  int64_t slotOf(const StepItem& it, int64_t p) const {
    return static_cast<int64_t>(it.blocks[static_cast<size_t>(p / m_bs)]) * m_bs + p % m_bs;
  }

  LlamaConfig m_c;
  int64_t m_bs, m_row;
  Calls* m_calls;
  std::vector<float> m_embed, m_norm, m_lmHeadT;
  std::vector<Layer> m_layers;
  std::vector<std::vector<float>> m_k, m_v;
};

RunnerParams onBackend(RunnerParams p, Calls* calls) {
  p.backend = HostBackend::factory(calls);
  return p;
}

}  // namespace

class TestTorchRunnerBackend : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void stepsOnTheBackendMatchTheCpuRunner() {
    auto m = tinyModel();
    for (bool deterministic : {false, true}) {
      Calls calls;
      const RunnerParams p{.blockSize = 8, .maxBatchTokens = 40, .deterministic = deterministic};
      auto cpu = makeRunner(m, p);
      auto dev = makeRunner(m, onBackend(p, &calls));
      QCOMPARE(cpu->device(), std::string("cpu"));
      QCOMPARE(dev->device(), std::string("host double"));
      QVERIFY(dev->kvPool().keys(0) == nullptr);  // the runner keeps no copy of the device's K/V
      for (int i = 0; i < 7; ++i) {
        const std::vector<int32_t> prompt = randomTokens(2 + 9 * i, 96, 30 + static_cast<uint64_t>(i));
        QVERIFY(cpu->add(greedy(prompt, 12)).isOk());
        QVERIFY(dev->add(greedy(prompt, 12)).isOk());
      }
      auto a = drain(*cpu, 96), b = drain(*dev, 96);
      QCOMPARE(b.size(), size_t{7});
      for (const auto& [id, run] : a) {
        QCOMPARE(b[id].tokens, run.tokens);
        const double err = maxDiff(b[id].logits(), run.logits());
        QVERIFY2(err < 1e-4, qPrintable(QString("sequence %1: max error %2").arg(id).arg(err)));
      }
      QVERIFY(calls.forwards > 0);
      QVERIFY_OK(dev->deviceStatus());
      QCOMPARE(dev->kvStats().used, 0);
    }
  }

  // A backend may answer greedy rows with their tokens (StepOutput::tokens): the runner takes
  // them as its Sampler's choice, and samples the other rows (temperature, or all logits kept)
  // from the logits that came beside them, giving the CPU runner's tokens.
  void greedyRowsAnsweredWithTokensGiveTheSameTokens() {
    auto m = tinyModel();
    Calls calls{.answerGreedy = true};
    const RunnerParams p{.blockSize = 8, .maxBatchTokens = 40};
    auto cpu = makeRunner(m, p);
    auto dev = makeRunner(m, onBackend(p, &calls));
    std::vector<SeqId> greedyOnly;  // greedy, logits not kept: asked for their tokens alone
    for (int i = 0; i < 6; ++i) {
      SequenceRequest q = greedy(randomTokens(3 + 5 * i, 96, 50 + static_cast<uint64_t>(i)), 10, /*allLogits=*/i == 3);
      if (i % 3 == 1) q.sampling = {.temperature = 0.8f, .topK = 20, .seed = 7 + static_cast<uint64_t>(i), .maxTokens = 10};
      auto id = cpu->add(q);
      QVERIFY(id.isOk() && dev->add(q).isOk());
      if (i % 3 != 1 && i != 3) greedyOnly.push_back(*id);
    }
    auto a = drain(*cpu, 96), b = drain(*dev, 96);
    QCOMPARE(b.size(), size_t{6});
    for (const auto& [id, run] : a) QCOMPARE(b[id].tokens, run.tokens);
    // Every token of a greedy-only sequence came back as a token (a row is also asked at the end,
    // when maxTokens stops it), beside sampled and all-logits rows in the same steps.
    size_t greedyTokens = 0;
    for (SeqId id : greedyOnly) greedyTokens += b[id].tokens.size();
    QVERIFY(greedyTokens > 0);
    QVERIFY2(calls.greedyRows >= static_cast<int>(greedyTokens), qPrintable(QString("%1 rows for %2 tokens").arg(calls.greedyRows).arg(greedyTokens)));
    QVERIFY_OK(dev->deviceStatus());
  }

  // SequenceRequest::logprobs: each sampled token's log-probability is the log softmax of the
  // row it was sampled from; a backend that answers greedy rows with tokens sends such a
  // sequence's logits instead, so the figures are the CPU runner's.
  void logprobsAreTheSampledRowsLogSoftmax() {
    auto m = tinyModel();
    Calls calls{.answerGreedy = true};
    const RunnerParams p{.blockSize = 8, .maxBatchTokens = 40};
    auto cpu = makeRunner(m, p);
    auto dev = makeRunner(m, onBackend(p, &calls));
    SequenceRequest q = greedy(randomTokens(11, 96, 5), 6, /*allLogits=*/true);
    q.logprobs = true;
    const SeqId a = *cpu->add(q);
    q.allLogits = false;
    const SeqId b = *dev->add(q);
    Run ra = drain(*cpu, 96)[a], rb = drain(*dev, 96)[b];
    QCOMPARE(ra.tokens.size(), size_t{6});
    QCOMPARE(ra.logprobs.size(), ra.tokens.size());
    QCOMPARE(ra.rows.size(), size_t{11 + 5});  // the prompt's rows, then a row per later token
    for (size_t i = 0; i < ra.tokens.size(); ++i) {
      const torch::Tensor row = torch::from_blob(ra.rows[10 + i].data(), {96}, torch::kFloat32);
      const float expect = torch::log_softmax(row, 0)[ra.tokens[i]].item<float>();
      QVERIFY2(std::fabs(ra.logprobs[i] - expect) < 1e-4f, qPrintable(QString("%1: %2 vs %3").arg(i).arg(ra.logprobs[i]).arg(expect)));
      QVERIFY(ra.logprobs[i] <= 0);
    }
    QCOMPARE(rb.tokens, ra.tokens);
    QCOMPARE(rb.logprobs.size(), ra.logprobs.size());
    for (size_t i = 0; i < ra.logprobs.size(); ++i) QVERIFY(std::fabs(rb.logprobs[i] - ra.logprobs[i]) < 1e-4f);
    // Without the flag, no figure.
    q.logprobs = false;
    const SeqId c = *cpu->add(q);
    const Run rc = drain(*cpu, 96)[c];
    QCOMPARE(rc.tokens.size(), size_t{6});
    for (float lp : rc.logprobs) QCOMPARE(lp, 0.0f);
    QVERIFY_OK(dev->deviceStatus());
  }

  void importedPassagesAreReencodedOnTheBackend() {
    // Block-Attention's path: passages computed alone at 0, placed and re-encoded into a new
    // sequence (read from the backend, rotated, written back), then the block-masked question.
    auto m = tinyModel();
    Calls calls;
    auto r = makeRunner(m, onBackend({.blockSize = 4}, &calls));
    const LogitsAndReference out = importedPassages(*r, *m);
    QVERIFY(calls.writes > 0);  // the second passage moved to position 9 on the backend
    const double err = maxDiff(out.logits, out.reference);
    QVERIFY2(err < 1e-4, qPrintable(QString("error %1").arg(err)));
    QCOMPARE(r->kvStats().used, 0);
  }

  void copyOnWriteReencodeAndKeysGoThroughTheBackend() {
    auto m = tinyModel();
    Calls calls;
    auto r = makeRunner(m, onBackend({.blockSize = 4}, &calls));
    const std::vector<int32_t> prefix = randomTokens(10, 96, 11), suffix = randomTokens(7, 96, 12);
    SequenceRequest a = greedy(prefix, 0, false);
    a.keepKv = true;
    SeqId ida = *r->add(a);
    drain(*r, 96);
    const std::vector<float> keysBefore = *r->keys(ida, 1, 10);
    QVERIFY(calls.reads > 0);
    SequenceRequest b = greedy(suffix, 2);
    b.cached = {{*r->retainKv(ida, 10), -1}};  // 10 tokens: the third block is half full
    SeqId idb = *r->add(b);
    Run run = drain(*r, 96)[idb];
    QVERIFY(calls.copies > 0);  // b's suffix went into a copy of the shared third block
    std::vector<int32_t> all = prefix;
    all.insert(all.end(), suffix.begin(), suffix.end());
    all.push_back(run.tokens[0]);
    QVERIFY(maxDiff(run.logits(), dense(*m, all).narrow(0, 10, 8)) < 1e-4);
    QCOMPARE(*r->keys(ida, 1, 10), keysBefore);
    // Re-encoding in place equals keys computed at the new positions.
    SequenceRequest at57 = greedy(prefix, 0, false);
    at57.keepKv = true;
    at57.firstPosition = 57;
    SeqId idc = *r->add(at57);
    drain(*r, 96);
    QVERIFY_OK(r->reencode(ida, 0, 10, 57, ReencodeMode::ViaZero));
    torch::Tensor ka = torch::tensor(*r->keys(ida, 0, 10)), kc = torch::tensor(*r->keys(idc, 0, 10));
    QVERIFY(((ka - kc).pow(2).sum() / kc.pow(2).sum()).item<double>() < 1e-6);
  }

  void prefixCacheAndHostTierOnTheBackend() {
    // A pool of 10 blocks with the prefix cache and a host tier: a served prompt's cached prefix
    // is pushed out to the host (read from the backend) by three others, and brought back
    // (written to it) when the prompt comes again; its answer does not change.
    auto m = tinyModel();
    Calls calls;
    RunnerParams p{.blockSize = 4, .numBlocks = 10, .deterministic = true, .prefixCache = true};
    p.hostKvBytes = 16 * makeRunner(m, p)->kvStats().bytesPerBlock;
    auto dev = makeRunner(m, onBackend(p, &calls));
    auto reference = makeRunner(m, {.blockSize = 4, .numBlocks = 64, .deterministic = true});
    auto serve = [](ModelRunner& r, const std::vector<int32_t>& prompt) {
      const SeqId id = *r.add(greedy(prompt, 5, false));
      return drain(r, 96)[id].tokens;
    };
    const std::vector<int32_t> prompt = randomTokens(18, 96, 80);
    const std::vector<int32_t> expected = serve(*reference, prompt);
    QCOMPARE(serve(*dev, prompt), expected);
    for (uint64_t i = 0; i < 3; ++i) serve(*dev, randomTokens(22, 96, 90 + i));  // push it out
    QVERIFY(dev->kvStats().blocksToHost > 0);
    const int writes = calls.writes;
    QCOMPARE(serve(*dev, prompt), expected);
    QVERIFY(dev->prefixCache()->stats().hostHitTokens > 0);
    QVERIFY(dev->kvStats().blocksToCompute > 0);
    QVERIFY(calls.writes > writes);
    QVERIFY_OK(dev->deviceStatus());
  }

  void aFailingBackendEndsItsSequencesWithItsError() {
    auto m = tinyModel();
    Calls calls;
    auto r = makeRunner(m, onBackend({.blockSize = 4}, &calls));
    SeqId a = *r->add(greedy(randomTokens(9, 96, 70), 8));
    r->step();  // the prompt, and the first token
    calls.fail = true;
    SeqId b = *r->add(greedy(randomTokens(5, 96, 71), 8));
    auto runs = drain(*r, 96);
    QCOMPARE(runs[a].reason, FinishReason::Error);
    QCOMPARE(runs[b].reason, FinishReason::Error);
    QVERIFY(mentions(r->deviceStatus(), {"device lost", "host double"}));
    QVERIFY(!r->hasWork());
  }

  void aBackendRunsF32ModelsOnly() {
    auto m = LlamaModel::initRandom(tinyConfig(), 5);
    QVERIFY(m.isOk());
    auto bf16 = std::make_shared<const LlamaModel>(m->to(torch::kBFloat16));
    Calls calls;
    auto r = ModelRunner::create(bf16, onBackend({.numBlocks = 16}, &calls));
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"F32"}));
  }
};

QTEST_GUILESS_MAIN(TestTorchRunnerBackend)
#include "test_torch_runner_backend.moc"
