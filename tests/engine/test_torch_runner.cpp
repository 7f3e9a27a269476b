// ModelRunner against the dense reference forward: paged attention, chunked prefill, batching,
// deterministic mode, masks, rollback, RoPE re-encoding, KV sharing and import, preemption,
// cancellation and bad input. Every comparison here can fail: the references are computed by
// LlamaModel::forwardDense, which shares no attention code with the runner.
#include "model/llama.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way
#include "model/runner.h"
#include "model/tokenizer.h"

#include <QtTest>

#include <cctype>

#include <filesystem>
#include <map>

#include "status_checks.h"
#include "torch_runner_fixtures.h"

using namespace rag;
using namespace rag::model;
namespace fs = std::filesystem;

class TestTorchRunner : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(2); }

  void pagedPrefillAndDecodeMatchDense() {
    auto m = tinyModel();
    for (int32_t chunk : {512, 7}) {  // whole prompt in one step, then chunked prefill
      auto r = makeRunner(m, {.blockSize = 4, .maxBatchTokens = chunk});
      const std::vector<int32_t> prompt = randomTokens(37, 96, 1);
      SeqId id = *r->add(greedy(prompt, 5));
      Run run = drain(*r, 96)[id];
      QCOMPARE(run.tokens.size(), size_t{5});
      QCOMPARE(run.reason, FinishReason::MaxTokens);
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), run.tokens.begin(), run.tokens.end() - 1);  // the last is never computed
      torch::Tensor ref = dense(*m, all);
      QCOMPARE(run.logits().sizes().vec(), ref.sizes().vec());
      const double err = maxDiff(run.logits(), ref);
      QVERIFY2(err < 1e-4, qPrintable(QString("chunk %1: max error %2").arg(chunk).arg(err)));
      // Greedy tokens are the argmax of the reference rows.
      for (size_t i = 0; i < run.tokens.size(); ++i)
        QCOMPARE(run.tokens[i], static_cast<int32_t>(ref[static_cast<int64_t>(prompt.size() - 1 + i)].argmax().item<int64_t>()));
      QCOMPARE(r->kvStats().used, 0);  // finished without keepKv: every block returned
    }
  }

  void checkpointFromAnotherWriterRunsThroughTheRunner() {
    auto loaded = LlamaModel::load(fs::path(RAGWB_FIXTURES_DIR) / "llama");
    QVERIFY(loaded.isOk());
    auto m = std::make_shared<const LlamaModel>(std::move(*loaded));
    auto r = makeRunner(m, {.blockSize = 4});
    const std::vector<int32_t> prompt = {1, 17, 42, 5, 9, 33, 60, 3, 12};
    SeqId id = *r->add(greedy(prompt, 1));
    Run run = drain(*r, 64)[id];
    QVERIFY(maxDiff(run.logits(), m->forward(i64(prompt))) < 1e-4);
  }

  void batchedStepEqualsOneByOne() {
    auto m = tinyModel();
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 6; ++i) prompts.push_back(randomTokens(3 + 11 * i, 96, 10 + static_cast<uint64_t>(i)));
    for (bool deterministic : {false, true}) {
      auto batched = makeRunner(m, {.blockSize = 8, .maxBatchTokens = 40, .deterministic = deterministic});
      std::vector<SeqId> ids;
      for (const auto& p : prompts) ids.push_back(*batched->add(greedy(p, 6)));
      auto together = drain(*batched, 96);
      for (size_t i = 0; i < prompts.size(); ++i) {
        auto alone = makeRunner(m, {.blockSize = 16, .maxBatchTokens = 512, .deterministic = deterministic});
        SeqId id = *alone->add(greedy(prompts[i], 6));
        Run a = drain(*alone, 96)[id];
        const Run& b = together[ids[i]];
        QCOMPARE(b.tokens, a.tokens);
        if (deterministic) {
          QVERIFY2(torch::equal(a.logits(), b.logits()), "deterministic mode must be bit-identical");
        } else {
          QVERIFY(maxDiff(a.logits(), b.logits()) < 1e-4);
        }
      }
    }
  }

  // The fused F32 kernels (decode-only steps, and decode rows of mixed steps) against the
  // libtorch op path on the same schedule: head width 16 takes the kernels' generic loops, 32
  // their fixed-width ones; biases, grouped-query heads and a two-thread team are all in play.
  void decodeKernelsMatchTheLibtorchPath() {
    setComputeThreads(2);
    for (int64_t headDim : {16, 32}) {
      LlamaConfig c = tinyConfig();
      c.headDim = headDim;
      c.attentionBias = true;
      c.mlpBias = true;
      auto init = LlamaModel::initRandom(c, 21);
      QVERIFY(init.isOk());
      {
        torch::NoGradGuard g;
        for (torch::Tensor p : init->parameters()) p.add_(torch::randn_like(p) * 0.1);  // non-zero biases too
      }
      auto m = std::make_shared<const LlamaModel>(std::move(*init));
      std::map<bool, std::map<SeqId, Run>> runs;
      for (bool kernels : {true, false}) {
        auto r = makeRunner(m, {.blockSize = 8, .maxBatchTokens = 40, .kernels = kernels});
        for (int i = 0; i < 7; ++i) QVERIFY(r->add(greedy(randomTokens(2 + 9 * i, 96, 30 + static_cast<uint64_t>(i)), 12)).isOk());
        runs[kernels] = drain(*r, 96);
      }
      QCOMPARE(runs[true].size(), size_t{7});
      for (const auto& [id, k] : runs[true]) {
        const Run& t = runs[false][id];
        QCOMPARE(k.tokens, t.tokens);
        const double err = maxDiff(k.logits(), t.logits());
        QVERIFY2(err < 1e-4, qPrintable(QString("head dim %1, sequence %2: max error %3").arg(headDim).arg(id).arg(err)));
      }
    }
    setComputeThreads(1);
  }

  void masksMatchTheDenseMaskedReference() {
    auto m = tinyModel();
    const std::vector<int32_t> prompt = randomTokens(30, 96, 4);
    std::vector<int32_t> parents(24);
    for (int32_t i = 0; i < 24; ++i) parents[static_cast<size_t>(i)] = i == 0 || i == 12 ? -1 : (i % 5 == 0 ? i - 3 : i - 1);
    for (const AttentionMask& mask : {AttentionMask::blocks({0, 9, 17, 25}), AttentionMask::ancestors(parents)}) {
      for (int32_t chunk : {512, 5}) {
        auto r = makeRunner(m, {.blockSize = 4, .maxBatchTokens = chunk});
        SequenceRequest q = greedy(prompt, 1);
        q.mask = mask;
        SeqId id = *r->add(q);
        Run run = drain(*r, 96)[id];
        torch::Tensor ref = dense(*m, prompt, mask);
        QVERIFY2(maxDiff(run.logits(), ref) < 1e-4, qPrintable(QString("chunk %1").arg(chunk)));
        // ... and the mask matters: the causal reference differs.
        QVERIFY(maxDiff(run.logits(), dense(*m, prompt)) > 1e-3);
      }
    }
  }

  void rollbackThenRedecodeEqualsNeverDecoding() {
    auto m = tinyModel();
    const std::vector<int32_t> prompt = randomTokens(21, 96, 5);
    auto r = makeRunner(m, {.blockSize = 4});
    SequenceRequest q = greedy(prompt, 12);
    q.keepKv = true;
    SeqId id = *r->add(q);
    Run first = drain(*r, 96)[id];
    QCOMPARE(first.tokens.size(), size_t{12});
    const int usedBefore = r->kvStats().used;
    // Roll back to the prompt + 3 generated tokens, then decode again.
    QVERIFY(r->truncate(id, static_cast<int64_t>(prompt.size()) + 3).isOk());
    QVERIFY(r->kvStats().used < usedBefore);  // blocks past the rollback point were freed
    Run second = drain(*r, 96)[id];
    QCOMPARE(second.tokens, std::vector<int32_t>(first.tokens.begin() + 3, first.tokens.end()));
    // The first logits row of the re-decode recomputes token prompt+2, row prompt+2 of the first run.
    torch::Tensor a = first.logits().narrow(0, static_cast<int64_t>(prompt.size()) + 2, 9);
    QVERIFY(maxDiff(second.logits(), a) < 1e-5);
    QVERIFY(r->release(id).isOk());
    QCOMPARE(r->kvStats().used, 0);
  }

  void reencodedKeysEqualKeysComputedThere() {
    auto m = tinyModel();
    const std::vector<int32_t> prompt = randomTokens(19, 96, 6);
    for (ReencodeMode mode : {ReencodeMode::Shift, ReencodeMode::ViaZero}) {
      auto r = makeRunner(m, {.blockSize = 4});
      SequenceRequest at0 = greedy(prompt, 0, false);
      at0.keepKv = true;
      SequenceRequest at57 = at0;
      at57.firstPosition = 57;
      SeqId a = *r->add(at0), b = *r->add(at57);
      drain(*r, 96);
      QVERIFY(r->reencode(a, 0, 19, 57, mode).isOk());
      QCOMPARE(r->info(a)->positions.front(), int64_t{57});
      for (int32_t layer : {0, 1}) {
        torch::Tensor ka = torch::tensor(*r->keys(a, layer, 19)), kb = torch::tensor(*r->keys(b, layer, 19));
        const double nmse = ((ka - kb).pow(2).sum() / kb.pow(2).sum()).item<double>();
        QVERIFY2(nmse < 1e-6, qPrintable(QString("layer %1 NMSE %2").arg(layer).arg(nmse)));
      }
    }
  }

  void importedPassageKvMatchesBlockAttention() {
    // Block-Attention: passages encoded alone at position 0, imported and re-encoded to their
    // place, then the question attends to everything: equals the dense block-masked forward.
    auto m = tinyModel();
    auto r = makeRunner(m, {.blockSize = 4});
    const LogitsAndReference out = importedPassages(*r, *m);
    const double err = maxDiff(out.logits, out.reference);
    QVERIFY2(err < 1e-4, qPrintable(QString("error %1").arg(err)));
    QCOMPARE(r->kvStats().used, 0);
  }

  void sharedPrefixIsCopiedOnWrite() {
    auto m = tinyModel();
    auto r = makeRunner(m, {.blockSize = 4});
    const std::vector<int32_t> prefix = randomTokens(10, 96, 11), suffix = randomTokens(7, 96, 12);
    SequenceRequest a = greedy(prefix, 0, false);
    a.keepKv = true;
    SeqId ida = *r->add(a);
    drain(*r, 96);
    const std::vector<float> keysBefore = *r->keys(ida, 1, 10);
    SequenceRequest b = greedy(suffix, 2);
    b.cached = {{*r->retainKv(ida, 10), -1}};  // 10 tokens: the third block is half full
    SeqId idb = *r->add(b);
    QVERIFY(r->kvStats().shared >= 3);
    Run run = drain(*r, 96)[idb];
    std::vector<int32_t> all = prefix;
    all.insert(all.end(), suffix.begin(), suffix.end());
    all.push_back(run.tokens[0]);
    QVERIFY(maxDiff(run.logits(), dense(*m, all).narrow(0, 10, 8)) < 1e-4);
    QCOMPARE(*r->keys(ida, 1, 10), keysBefore);  // b wrote its suffix into a copy of block 3
  }

  void preemptionUnderPressureChangesNothing() {
    auto m = tinyModel();
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 5; ++i) prompts.push_back(randomTokens(14, 96, 20 + static_cast<uint64_t>(i)));
    auto roomy = makeRunner(m, {.blockSize = 4, .numBlocks = 256});
    auto tight = makeRunner(m, {.blockSize = 4, .numBlocks = 14});  // two or three sequences at a time
    std::vector<SeqId> a, b;
    for (const auto& p : prompts) {
      a.push_back(*roomy->add(greedy(p, 16, false)));
      b.push_back(*tight->add(greedy(p, 16, false)));
    }
    int preempted = 0;
    auto ra = drain(*roomy, 96), rb = drain(*tight, 96, &preempted);
    QVERIFY(preempted > 0);
    for (size_t i = 0; i < prompts.size(); ++i) QCOMPARE(rb[b[i]].tokens, ra[a[i]].tokens);
    QCOMPARE(tight->kvStats().used, 0);
  }

  void cancelFreesEverything() {
    auto m = tinyModel();
    auto r = makeRunner(m, {.blockSize = 4});
    SeqId keep = *r->add(greedy(randomTokens(12, 96, 30), 8, false));
    SeqId gone = *r->add(greedy(randomTokens(12, 96, 31), 50, false));
    size_t early = 0;
    for (int i = 0; i < 2; ++i)
      for (const SeqEvent& e : r->step().events) early += e.id == keep ? e.tokens.size() : 0;
    QVERIFY(r->kvStats().used > 0);
    QVERIFY(r->cancel(gone).isOk());
    auto runs = drain(*r, 96);
    QCOMPARE(runs[gone].reason, FinishReason::Cancelled);
    QCOMPARE(early + runs[keep].tokens.size(), size_t{8});
    QCOMPARE(r->kvStats().used, 0);
    QCOMPARE(r->cancel(gone).code(), StatusCode::NotFound);
  }

  void seededSamplingIsReproducibleAndBatchInvariant() {
    auto m = tinyModel();
    auto sampled = [&](bool crowd) {
      auto r = makeRunner(m, {.blockSize = 4, .deterministic = true});
      if (crowd)
        for (int i = 0; i < 3; ++i) (void)r->add(greedy(randomTokens(9, 96, 40 + static_cast<uint64_t>(i)), 10, false));
      SequenceRequest q = greedy(randomTokens(11, 96, 50), 10, false);
      q.sampling.temperature = 1.0f;
      q.sampling.topP = 0.9f;
      q.sampling.seed = 1234;
      SeqId id = *r->add(q);
      return drain(*r, 96)[id].tokens;
    };
    const std::vector<int32_t> alone = sampled(false);
    QCOMPARE(alone.size(), size_t{10});
    QCOMPARE(sampled(true), alone);
  }

  // The model's end-of-sequence token stops a sequence, unless the request ignores it (what
  // `bench llm` needs to decode a fixed number of steps with a trained model).
  void eosStopsUnlessIgnored() {
    auto m = tinyModel();
    const std::vector<int32_t> prompt = randomTokens(12, 96, 41);
    auto probe = makeRunner(m);
    const SeqId first = *probe->add(greedy(prompt, 6, false));
    const Run free = drain(*probe, 96)[first];
    QCOMPARE(free.tokens.size(), size_t{6});
    LlamaConfig c = m->config();
    c.eosTokenIds = {free.tokens[0]};  // the token greedy decoding produces first
    auto withEos = std::make_shared<const LlamaModel>(c, m->weights());
    for (bool ignore : {false, true}) {
      auto r = makeRunner(withEos);
      SequenceRequest q = greedy(prompt, 6, false);
      q.sampling.ignoreEos = ignore;
      const SeqId id = *r->add(std::move(q));
      const Run run = drain(*r, 96)[id];
      QCOMPARE(run.tokens.size(), ignore ? size_t{6} : size_t{1});
      QVERIFY(run.reason == (ignore ? FinishReason::MaxTokens : FinishReason::StopToken));
      if (ignore) QCOMPARE(run.tokens, free.tokens);
    }
  }

  void stopStringsAndText() {
    auto tok = Tokenizer::load(fs::path(RAGWB_FIXTURES_DIR) / "tokenizer" / "gpt2_style");
    QVERIFY2(tok.isOk(), tok.status().message().c_str());
    auto shared = std::make_shared<const Tokenizer>(*tok);
    auto m = tinyModel(5, tok->vocabSize());
    auto prompt = tok->encode("The quick brown fox");
    auto r = makeRunner(m, {}, shared);
    SeqId free = *r->add(greedy(prompt, 12, false));
    Run full = drain(*r, tok->vocabSize())[free];
    QCOMPARE(full.text, *tok->decode(full.tokens, {.skipSpecial = true}));
    QVERIFY(full.text.size() >= 4);
    // Stop on a piece of what it generated: the text ends right before it.
    const std::string stop = full.text.substr(full.text.size() / 2, 2);
    SequenceRequest q = greedy(prompt, 12, false);
    q.sampling.stop = {stop};
    SeqId id = *r->add(q);
    Run cut = drain(*r, tok->vocabSize())[id];
    QCOMPARE(cut.reason, FinishReason::StopString);
    QCOMPARE(cut.text, full.text.substr(0, full.text.find(stop)));
  }

  // Copy-constrained decoding: whatever a random model prefers, greedy or sampled, its text stays
  // a span of the source (case and space runs aside); an empty answer is never given.
  void copyFromKeepsTheTextASpanOfTheSource() {
    auto tok = Tokenizer::load(fs::path(RAGWB_FIXTURES_DIR) / "tokenizer" / "gpt2_style");
    QVERIFY2(tok.isOk(), tok.status().message().c_str());
    auto shared = std::make_shared<const Tokenizer>(*tok);
    auto m = tinyModel(5, tok->vocabSize());
    auto r = makeRunner(m, {}, shared);
    const std::string source = "The quick brown fox: a  small canid.\nkind of: Dog, wolf.\n";
    const std::string normal = "the quick brown fox: a small canid.|kind of: dog, wolf.|";
    auto normalised = [](std::string t) {
      std::string out;
      for (char c : t) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
        out.push_back(c);
      }
      while (!out.empty() && out.back() == ' ') out.pop_back();
      return out;
    };
    int freeOutside = 0;
    for (int round = 0; round < 8; ++round) {
      SequenceRequest q = greedy(tok->encode("Question " + std::to_string(round) + ": what is it?\nAnswer:"), 10, false);
      q.sampling.stop = {"\n"};
      q.sampling.temperature = round < 4 ? 0.0f : 1.5f;
      q.sampling.seed = static_cast<uint64_t>(round);
      SequenceRequest unconstrained = q;
      q.sampling.copyFrom = source;
      const SeqId id = *r->add(q);
      const SeqId freeId = *r->add(unconstrained);
      auto runs = drain(*r, tok->vocabSize());
      const std::string text = normalised(runs[id].text);
      QVERIFY2(!text.empty(), runs[id].text.c_str());
      QVERIFY2(normal.find(text) != std::string::npos, runs[id].text.c_str());
      const std::string freeText = normalised(runs[freeId].text);
      freeOutside += normal.find(freeText) == std::string::npos;
    }
    QVERIFY(freeOutside > 0);  // the constraint is what kept the text inside
    // Without a tokenizer there are no bytes to compare.
    auto bare = makeRunner(m);
    SequenceRequest q = greedy({1, 2, 3}, 2);
    q.sampling.copyFrom = source;
    QVERIFY(mentions(bare->add(q).status(), {"copyFrom", "tokenizer"}));
  }

  void badInputIsRefusedAndOthersCarryOn() {
    auto m = tinyModel();
    auto r = makeRunner(m, {.blockSize = 4});
    SeqId good = *r->add(greedy(randomTokens(10, 96, 60), 4, false));
    QVERIFY(mentions(r->add(greedy({}, 4)).status(), {"empty prompt"}));
    QVERIFY(mentions(r->add(greedy({1, 96}, 4)).status(), {"token id 96", "[0, 96)"}));
    QVERIFY(mentions(r->add(greedy(randomTokens(300, 96, 1), 4)).status(), {"300 tokens", "context window of 256"}));
    SequenceRequest badMask = greedy({1, 2, 3}, 2);
    badMask.mask = AttentionMask::blocks({0, 7});
    QVERIFY(mentions(r->add(badMask).status(), {"beyond the prompt"}));
    SequenceRequest badTemp = greedy({1, 2, 3}, 2);
    badTemp.sampling.temperature = -1;
    QVERIFY(!r->add(badTemp).isOk());
    SequenceRequest stops = greedy({1, 2, 3}, 2);
    stops.sampling.stop = {"x"};
    QVERIFY(mentions(r->add(stops).status(), {"need a tokenizer"}));
    QVERIFY(mentions(r->truncate(good, 99), {"cannot truncate"}));
    QVERIFY(mentions(r->reencode(good, 0, 5, 3), {"not within"}));
    auto runs = drain(*r, 96);
    QCOMPARE(runs.size(), size_t{1});
    QCOMPARE(runs[good].tokens.size(), size_t{4});
    auto tooSmall = ModelRunner::create(m, {.blockSize = 4, .numBlocks = 2});
    QVERIFY(mentions((*tooSmall)->add(greedy(randomTokens(20, 96, 2), 1)).status(), {"more KV blocks than the pool holds"}));
  }
};

QTEST_GUILESS_MAIN(TestTorchRunner)
#include "test_torch_runner.moc"
