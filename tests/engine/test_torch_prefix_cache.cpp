// Automatic prefix caching in the runner (memory/ under model/runner): a hit's K/V equal K/V
// computed from scratch, only the unmatched suffix is prefilled, a full pool evicts cached
// prefixes before it preempts a sequence, host-tier hits come back exact, a rolled-back
// sequence continues on a new prompt as a fresh one would, and the answers never depend on the
// cache (deterministic mode).
#include "model/llama.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way
#include "model/runner.h"

#include <QtTest>

#include "status_checks.h"
#include "torch_runner_fixtures.h"

using namespace rag;
using namespace rag::model;

namespace {

std::vector<int32_t> join(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

RunnerParams cached(int32_t numBlocks = 256, int64_t hostBytes = 0) {
  return {.blockSize = 4, .numBlocks = numBlocks, .prefixCache = true, .hostKvBytes = hostBytes};
}

// Runs one sequence to its end; returns its generated tokens and the cached prompt tokens the
// first-token event reported.
std::pair<std::vector<int32_t>, int64_t> serve(ModelRunner& r, const std::vector<int32_t>& prompt, int32_t maxTokens) {
  const SeqId id = *r.add(greedy(prompt, maxTokens, false));
  std::vector<int32_t> tokens;
  int64_t cachedTokens = -1;
  for (int guard = 0; r.hasWork() && guard < 1000; ++guard)
    for (const SeqEvent& e : r.step().events) {
      if (e.id != id) continue;
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.promptCachedTokens >= 0) cachedTokens = e.promptCachedTokens;
    }
  return {tokens, cachedTokens};
}

}  // namespace

class TestTorchPrefixCache : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(2); }

  void aHitsKeysEqualKeysComputedFromScratch() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    const auto shared = randomTokens(22, 96, 1);
    const auto first = join(shared, randomTokens(5, 96, 2)), second = join(shared, randomTokens(9, 96, 3));
    QCOMPARE(serve(*r, first, 4).second, int64_t{0});
    SequenceRequest q = greedy(second, 1, true);
    q.keepKv = true;
    const SeqId id = *r->add(q);
    Run run = drain(*r, 96)[id];
    const memory::PrefixCacheStats st = r->prefixCache()->stats();
    QCOMPARE(st.hitTokens, int64_t{20});  // the shared 22 tokens' whole blocks
    // Only the suffix was computed: its logits rows are the ones reported, and they equal the
    // dense reference's for those positions.
    QCOMPARE(run.rows.size(), second.size() - 20);
    QVERIFY(maxDiff(run.logits(), dense(*m, second).narrow(0, 20, static_cast<int64_t>(second.size()) - 20)) < 1e-4);
    // The reused K/V equal a cold runner's, layer by layer.
    auto cold = makeRunner(m, {.blockSize = 4});
    SequenceRequest c = greedy(second, 1, false);
    c.keepKv = true;
    const SeqId coldId = *cold->add(c);
    drain(*cold, 96);
    for (int32_t layer = 0; layer < 2; ++layer) {
      const std::vector<float> a = *r->keys(id, layer, 30), b = *cold->keys(coldId, layer, 30);
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
      QVERIFY2(worst < 1e-5, qPrintable(QString("layer %1 error %2").arg(layer).arg(worst)));
    }
    QVERIFY(r->release(id).isOk());
  }

  void answersNeverDependOnTheCache() {
    auto m = tinyModel();
    auto off = makeRunner(m, {.blockSize = 4, .numBlocks = 256, .deterministic = true});
    RunnerParams on = cached(24);
    on.deterministic = true;
    auto withCache = makeRunner(m, on);  // small: evicts as it goes
    const auto stem = randomTokens(17, 96, 7);
    int64_t hits = 0;
    for (int i = 0; i < 8; ++i) {
      const auto prompt = join(i % 2 ? stem : randomTokens(9, 96, 40 + static_cast<uint64_t>(i)),
                               randomTokens(3 + i % 3, 96, 50 + static_cast<uint64_t>(i % 4)));
      auto [a, ca] = serve(*off, prompt, 6);
      auto [b, cb] = serve(*withCache, prompt, 6);
      QCOMPARE(b, a);
      QCOMPARE(ca, int64_t{0});
      hits += cb;
    }
    QVERIFY(hits > 0);
    QVERIFY(withCache->prefixCache()->stats().evictedBlocks > 0);
  }

  void aFullPoolEvictsBeforeItPreempts() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached(12));
    for (uint64_t i = 0; i < 4; ++i) serve(*r, randomTokens(15, 96, 60 + i), 1);  // fill the cache
    QVERIFY(r->kvStats().used >= 9);
    // Two sequences that need 10 of the 12 blocks at once: cached prefixes give way, no preemption.
    const SeqId a = *r->add(greedy(randomTokens(14, 96, 70), 4, false));
    const SeqId b = *r->add(greedy(randomTokens(14, 96, 71), 4, false));
    int preempted = 0;
    auto runs = drain(*r, 96, &preempted);
    QCOMPARE(preempted, 0);
    QCOMPARE(runs[a].tokens.size(), size_t{4});
    QCOMPARE(runs[b].tokens.size(), size_t{4});
    QVERIFY(r->kvStats().reclaimedBlocks > 0);
    // Eviction freed real blocks: with nothing live, only what the cache holds is used.
    QCOMPARE(r->kvStats().used, r->prefixCache()->stats().computeBlocks);
  }

  void hostTierHitsComeBackExact() {
    auto m = tinyModel();
    RunnerParams p = cached(10, 0);
    p.deterministic = true;
    auto probe = makeRunner(m, p);
    p.hostKvBytes = 16 * probe->kvStats().bytesPerBlock;
    auto r = makeRunner(m, p);
    auto reference = makeRunner(m, {.blockSize = 4, .numBlocks = 64, .deterministic = true});
    const auto prompt = randomTokens(18, 96, 80);
    const auto expected = serve(*reference, prompt, 5).first;
    QCOMPARE(serve(*r, prompt, 5).first, expected);
    for (uint64_t i = 0; i < 3; ++i) serve(*r, randomTokens(22, 96, 90 + i), 1);  // push it out
    QVERIFY(r->kvStats().blocksToHost > 0);
    auto [tokens, cachedTokens] = serve(*r, prompt, 5);
    QCOMPARE(tokens, expected);
    QVERIFY(cachedTokens >= 16);
    QVERIFY(r->prefixCache()->stats().hostHitTokens > 0);
    QVERIFY(r->kvStats().blocksToCompute > 0);
  }

  void aTruncatedSequenceContinuesOnANewPromptAsAFreshOne() {
    auto m = tinyModel();
    auto r = makeRunner(m, {.blockSize = 4, .numBlocks = 128, .deterministic = true});
    const auto common = randomTokens(13, 96, 100);
    const auto draft = join(common, randomTokens(6, 96, 101)), final = join(common, randomTokens(8, 96, 102));
    const SeqId id = *r->add(greedy(draft, 6, false));
    for (int i = 0; i < 4; ++i) r->step();  // some of the draft's answer is out
    QVERIFY(r->truncate(id, 13).isOk());
    QVERIFY(r->append(id, std::span<const int32_t>(final).subspan(13), /*asPrompt=*/true).isOk());
    std::vector<int32_t> resumed;
    for (const SeqEvent& e : r->step().events) resumed.insert(resumed.end(), e.tokens.begin(), e.tokens.end());
    auto rest = drain(*r, 96)[id];
    resumed.insert(resumed.end(), rest.tokens.begin(), rest.tokens.end());
    auto fresh = makeRunner(m, {.blockSize = 4, .numBlocks = 128, .deterministic = true});
    QCOMPARE(resumed, serve(*fresh, final, 6).first);
    // Extending the prompt after tokens were generated is refused, naming the fix.
    const SeqId other = *r->add(greedy(draft, 10, false));
    for (int i = 0; i < 2; ++i) r->step();
    const std::vector<int32_t> more{1, 2};
    Status s = r->append(other, more, /*asPrompt=*/true);
    QCOMPARE(s.code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s, {"truncate"}));
  }

  void hostTiersBelowOneBlockAreRefused() {
    auto m = tinyModel();
    RunnerParams p = cached(8, 100);  // 100 bytes: less than one block
    auto r = ModelRunner::create(m, p);
    QVERIFY(!r.isOk());
    QVERIFY(mentions(r.status(), {"host KV tier", "at least one block"}));
    p.hostKvBytes = 0;
    p.evictionPolicy = "mru";
    auto bad = ModelRunner::create(m, p);
    QVERIFY(mentions(bad.status(), {"mru", "lru"}));
  }
};

QTEST_GUILESS_MAIN(TestTorchPrefixCache)
#include "test_torch_prefix_cache.moc"
