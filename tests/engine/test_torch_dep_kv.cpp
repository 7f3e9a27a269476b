// DepCache's KV path (sched/dep_kv.h) on real tensors: a dependency prompt built through the
// prefix cache gives the logits of the dense reference under the ancestor mask, whether its
// segments were computed, found at another offset (GKVR's re-encoded keys), found in part, or
// copied back from the host tier; eviction frees blocks.
#include "model/llama.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way
#include "model/runner.h"

#include <QtTest>

#include "model/dep_prompt.h"
#include "sched/dep_kv.h"
#include "status_checks.h"
#include "torch_runner_fixtures.h"

using namespace rag;
using namespace rag::model;
using rag::sched::DepKvBuilder;

namespace {

constexpr int64_t kVocab = 96;

// A tree of paths that share prefixes, from seeded tokens.
DepTree randomTree(uint64_t seed, int paths = 4) {
  const std::vector<int32_t> root = randomTokens(6, kVocab, seed);
  std::vector<std::vector<int32_t>> seqs;
  for (int p = 0; p < paths; ++p) {
    std::vector<int32_t> s = root;
    const std::vector<int32_t> mid = randomTokens(3, kVocab, seed * 7 + static_cast<uint64_t>(p / 2));
    const std::vector<int32_t> leaf = randomTokens(4, kVocab, seed * 13 + static_cast<uint64_t>(p));
    s.insert(s.end(), mid.begin(), mid.end());
    s.insert(s.end(), leaf.begin(), leaf.end());
    seqs.push_back(std::move(s));
  }
  return buildDepTree(seqs);
}

DepPrompt promptOf(const std::vector<DepTree>& trees, const std::vector<int32_t>& tail) {
  DepPrompt p;
  for (const DepTree& t : trees) p.segments.push_back({t, 1});
  p.tail = tail;
  return p;
}

struct Served {
  std::vector<float> lastLogits;  // the first sampled token's logits row
  int32_t first = -1;
  int64_t hits = 0;
};

// Phase 1 and 2 through the builder; the sequence computes its tail and one token.
Served serve(ModelRunner& r, DepKvBuilder& b, DepPrompt p) {
  auto t = b.begin(std::move(p));
  if (!t.isOk()) qFatal("%s", t.status().message().c_str());
  for (int guard = 0; !b.ready(*t) && guard < 1000; ++guard) {
    StepResult s = r.step();
    b.absorb(s.events);
  }
  auto q = b.request(*t);
  if (!q.isOk()) qFatal("%s", q.status().message().c_str());
  q->sampling.maxTokens = 1;
  q->allLogits = true;
  Served out;
  out.hits = b.hitTokens(*t);
  auto id = r.add(std::move(*q));
  if (!id.isOk()) qFatal("%s", id.status().message().c_str());
  b.finish(*t);
  Run run = drain(r, kVocab)[*id];
  out.lastLogits = run.rows.back();
  out.first = run.tokens.empty() ? -1 : run.tokens[0];
  return out;
}

double diffToDense(const LlamaModel& m, const DepPrompt& p, const Served& s) {
  torch::Tensor ref = dense(m, p.tokens(), p.mask());
  torch::Tensor last = ref[ref.size(0) - 1];
  torch::Tensor got = torch::from_blob(const_cast<float*>(s.lastLogits.data()), {kVocab}, torch::kFloat32);
  return maxDiff(last, got);
}

RunnerParams cached(int32_t numBlocks = 256, int64_t hostBytes = 0, std::string policy = "lru") {
  return {.blockSize = 4, .numBlocks = numBlocks, .prefixCache = true, .evictionPolicy = std::move(policy),
          .hostKvBytes = hostBytes};
}

}  // namespace

class TestTorchDepKv : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(2); }

  void aBuiltPromptEqualsTheDenseReference() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    DepKvBuilder b(*r);
    const DepPrompt p = promptOf({chainTree(randomTokens(5, kVocab, 40)), randomTree(1), randomTree(2)},
                                 randomTokens(6, kVocab, 41));
    const Served s = serve(*r, b, p);
    QCOMPARE(s.hits, int64_t{0});
    QVERIFY2(diffToDense(*m, p, s) < 2e-3, "first request differs from the dense ancestor-mask reference");
    QCOMPARE(b.stats().computedTokens, p.contextTokens());
    QVERIFY(r->prefixCache()->stats().nodes > 0);
  }

  void aHitAtAnotherOffsetIsReencodedExactly() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    DepKvBuilder b(*r);
    const DepTree t1 = randomTree(1), t2 = randomTree(2), t3 = randomTree(3);
    serve(*r, b, promptOf({t1, t2}, randomTokens(4, kVocab, 50)));
    // The same subgraphs in another order, after a new one: both at new offsets.
    const DepPrompt p = promptOf({t3, t2, t1}, randomTokens(5, kVocab, 51));
    const Served s = serve(*r, b, p);
    const int64_t wholeBlocks = static_cast<int64_t>(t1.tokens.size()) / 4 * 4 + static_cast<int64_t>(t2.tokens.size()) / 4 * 4;
    QCOMPARE(s.hits, wholeBlocks);  // every whole block of t1 and t2, none of t3
    QVERIFY2(diffToDense(*m, p, s) < 2e-3, "re-encoded hits differ from keys computed at their new positions");
  }

  void aPartialHitComputesOnlyTheRest() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    DepKvBuilder b(*r);
    const std::vector<int32_t> root = randomTokens(8, kVocab, 60);
    auto path = [&](uint64_t seed) {
      std::vector<int32_t> s = root;
      const auto leaf = randomTokens(5, kVocab, seed);
      s.insert(s.end(), leaf.begin(), leaf.end());
      return s;
    };
    const std::vector<std::vector<int32_t>> two = {path(61), path(62)}, three = {path(61), path(63), path(62)};
    serve(*r, b, promptOf({buildDepTree(two)}, randomTokens(3, kVocab, 64)));
    const int64_t before = b.stats().computedTokens;
    const DepPrompt p = promptOf({buildDepTree(three)}, randomTokens(3, kVocab, 65));
    const Served s = serve(*r, b, p);
    // The pre-order prefix root + path(61) is shared: its whole blocks hit, the rest is computed.
    QCOMPARE(s.hits, int64_t{12});
    QCOMPARE(b.stats().computedTokens - before, p.contextTokens() - 12);
    QVERIFY2(diffToDense(*m, p, s) < 2e-3, "a partial hit differs from the dense reference");
  }

  void aStructureChangeIsNotAHit() {
    // The same tokens as a chain and as siblings: different KV, so the keys must differ.
    const DepTree chain = chainTree({1, 2, 3, 4, 5, 6, 7, 8});
    const DepTree siblings = buildDepTree(std::vector<std::vector<int32_t>>{{1, 2, 3, 4}, {5, 6, 7, 8}});
    QCOMPARE(chain.tokens, siblings.tokens);
    QVERIFY(structuralKeys(chain, static_cast<int32_t>(kVocab)) != structuralKeys(siblings, static_cast<int32_t>(kVocab)));
  }

  void evictionFreesBlocksAndHostHitsComeBackExact() {
    auto m = tinyModel();
    const int64_t blockBytes = 2 * 2 * 4 * 2 * 16 * 4;  // layers · (K, V) · block · kv heads · head dim · f32
    auto r = makeRunner(m, cached(40, 64 * blockBytes));
    DepKvBuilder b(*r);
    const DepTree hot = randomTree(100);
    const std::vector<int32_t> tail = randomTokens(3, kVocab, 101);
    serve(*r, b, promptOf({hot}, tail));
    for (uint64_t i = 0; i < 12; ++i) serve(*r, b, promptOf({randomTree(200 + i)}, tail));
    const memory::PrefixCacheStats st = r->prefixCache()->stats();
    QVERIFY(st.evictedBlocks > 0);
    QVERIFY(st.demotedBlocks > 0);
    // Nothing live: the pool holds only what the cache holds.
    QCOMPARE(r->kvStats().used, st.computeBlocks);
    const DepPrompt p = promptOf({randomTree(300), hot}, tail);
    const Served s = serve(*r, b, p);
    QVERIFY(s.hits > 0);
    QVERIFY(r->prefixCache()->stats().hostHitTokens > 0);
    QVERIFY2(diffToDense(*m, p, s) < 2e-3, "a host-tier hit differs from the dense reference");
  }

  void lacrKeepsWhatThePendingQueueNeeds() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached(24, 0, "lacr"));
    DepKvBuilder b(*r);
    const DepTree soon = randomTree(400);
    std::vector<memory::PendingPrompt> pending = {
        {sched::kDepCacheNamespace, structuralKeys(soon, static_cast<int32_t>(kVocab))}};
    r->prefixCache()->setPendingQueue([&] { return pending; });
    const std::vector<int32_t> tail = randomTokens(3, kVocab, 401);
    serve(*r, b, promptOf({soon}, tail));
    for (uint64_t i = 0; i < 6; ++i) serve(*r, b, promptOf({randomTree(500 + i)}, tail));
    const Served s = serve(*r, b, promptOf({soon}, tail));
    QCOMPARE(s.hits, static_cast<int64_t>(soon.tokens.size()) / 4 * 4);
  }
};

QTEST_GUILESS_MAIN(TestTorchDepKv)
#include "test_torch_dep_kv.moc"
