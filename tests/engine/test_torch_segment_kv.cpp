// The segment KV path (sched/segment_kv.h) on real tensors, for both systems that use it.
// DepCache: a dependency prompt built through the prefix cache gives the logits of the dense
// reference under the ancestor mask, whether its segments were computed, found at another offset
// (GKVR's re-encoded keys), found in part, or copied back from the host tier; eviction frees
// blocks. Block-Attention: passage blocks stored and re-encoded give the keys computed in place
// under the block mask and the same greedy answers, also after a restart from the block store.
#include "model/llama.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way
#include "model/runner.h"

#include <QtTest>

#include <QTemporaryDir>

#include "memory/block_store.h"
#include "model/dep_prompt.h"
#include "sched/segment_kv.h"
#include "status_checks.h"
#include "torch_runner_fixtures.h"

using namespace rag;
using namespace rag::model;
using rag::sched::SegmentKvBuilder;

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

SegmentedPrompt promptOf(const std::vector<DepTree>& trees, const std::vector<int32_t>& tail) {
  SegmentedPrompt p;
  for (const DepTree& t : trees) p.segments.push_back({t, 1});
  p.tail = tail;
  return p;
}

struct Served {
  std::vector<float> lastLogits;  // the first sampled token's logits row
  int32_t first = -1;
  int64_t hits = 0;
  std::vector<rag::SegmentKvUse> uses;  // SegmentKvBuilder::uses
};

// Phase 1 and 2 through the builder; the sequence computes its tail and one token.
Served serve(ModelRunner& r, SegmentKvBuilder& b, SegmentedPrompt p) {
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
  out.uses = b.uses(*t);
  auto id = r.add(std::move(*q));
  if (!id.isOk()) qFatal("%s", id.status().message().c_str());
  b.finish(*t);
  Run run = drain(r, kVocab)[*id];
  out.lastLogits = run.rows.back();
  out.first = run.tokens.empty() ? -1 : run.tokens[0];
  return out;
}

double diffToDense(const LlamaModel& m, const SegmentedPrompt& p, const Served& s) {
  torch::Tensor ref = dense(m, p.tokens(), p.mask());
  torch::Tensor last = ref[ref.size(0) - 1];
  torch::Tensor got = torch::from_blob(const_cast<float*>(s.lastLogits.data()), {kVocab}, torch::kFloat32);
  return maxDiff(last, got);
}

RunnerParams cached(int32_t numBlocks = 256, int64_t hostBytes = 0, std::string policy = "lru") {
  return {.blockSize = 4, .numBlocks = numBlocks, .prefixCache = true, .evictionPolicy = std::move(policy),
          .hostKvBytes = hostBytes};
}

// A Block-Attention prompt: `passages` blocks of seeded tokens (passage ids 10, 11, ...), then a
// question block.
SegmentedPrompt blockPromptOf(const std::vector<uint64_t>& seeds, uint64_t questionSeed) {
  std::vector<int32_t> tokens, starts;
  std::vector<int64_t> ids;
  for (uint64_t s : seeds) {
    starts.push_back(static_cast<int32_t>(tokens.size()));
    const std::vector<int32_t> b = randomTokens(7 + static_cast<int64_t>(s % 5), kVocab, s);
    tokens.insert(tokens.end(), b.begin(), b.end());
    ids.push_back(10 + static_cast<int64_t>(s));
  }
  starts.push_back(static_cast<int32_t>(tokens.size()));
  const std::vector<int32_t> q = randomTokens(5, kVocab, questionSeed);
  tokens.insert(tokens.end(), q.begin(), q.end());
  return *blockPrompt(tokens, starts, ids);
}

memory::BlockStoreParams storeParams(const QString& dir, std::string fingerprint = "tiny-a") {
  const LlamaConfig c = tinyConfig();
  return {.file = std::filesystem::path(dir.toStdString()) / "tiny.kvblocks",
          .fingerprint = std::move(fingerprint),
          .layers = static_cast<int32_t>(c.numHiddenLayers),
          .kvHeads = static_cast<int32_t>(c.numKeyValueHeads),
          .headDim = static_cast<int32_t>(c.headDim),
          .elementBytes = 4};
}

}  // namespace

class TestTorchSegmentKv : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { torch::set_num_threads(2); }

  void aBuiltPromptEqualsTheDenseReference() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    SegmentKvBuilder b(*r);
    const SegmentedPrompt p = promptOf({chainTree(randomTokens(5, kVocab, 40)), randomTree(1), randomTree(2)},
                                 randomTokens(6, kVocab, 41));
    const Served s = serve(*r, b, p);
    QCOMPARE(s.hits, int64_t{0});
    QVERIFY2(diffToDense(*m, p, s) < 2e-3, "first request differs from the dense ancestor-mask reference");
    QCOMPARE(b.stats(SegmentAttention::Dependency).computedTokens, p.contextTokens());
    QVERIFY(r->prefixCache()->stats().nodes > 0);
  }

  void aHitAtAnotherOffsetIsReencodedExactly() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    SegmentKvBuilder b(*r);
    const DepTree t1 = randomTree(1), t2 = randomTree(2), t3 = randomTree(3);
    serve(*r, b, promptOf({t1, t2}, randomTokens(4, kVocab, 50)));
    // The same subgraphs in another order, after a new one: both at new offsets.
    const SegmentedPrompt p = promptOf({t3, t2, t1}, randomTokens(5, kVocab, 51));
    const Served s = serve(*r, b, p);
    const int64_t wholeBlocks = static_cast<int64_t>(t1.tokens.size()) / 4 * 4 + static_cast<int64_t>(t2.tokens.size()) / 4 * 4;
    QCOMPARE(s.hits, wholeBlocks);  // every whole block of t1 and t2, none of t3
    // Where each segment's KV came from (StageTiming::segments), in prompt order: t3 computed at
    // offset 0, t2 and t1 reused from the cache and re-encoded to their new offsets.
    QCOMPARE(s.uses.size(), size_t(3));
    QCOMPARE(s.uses[0].offset, int64_t{0});
    QCOMPARE(s.uses[0].computedTokens(), static_cast<int64_t>(t3.tokens.size()));
    QVERIFY(!s.uses[0].reencoded);
    QCOMPARE(s.uses[1].offset, static_cast<int64_t>(t3.tokens.size()));
    QCOMPARE(s.uses[1].cachedTokens, static_cast<int64_t>(t2.tokens.size()) / 4 * 4);
    QCOMPARE(s.uses[2].cachedTokens, static_cast<int64_t>(t1.tokens.size()) / 4 * 4);
    QVERIFY(s.uses[1].reencoded && s.uses[2].reencoded);
    for (const rag::SegmentKvUse& u : s.uses) QCOMPARE(u.storedTokens, int64_t{0});
    QVERIFY2(diffToDense(*m, p, s) < 2e-3, "re-encoded hits differ from keys computed at their new positions");
  }

  void aPartialHitComputesOnlyTheRest() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    SegmentKvBuilder b(*r);
    const std::vector<int32_t> root = randomTokens(8, kVocab, 60);
    auto path = [&](uint64_t seed) {
      std::vector<int32_t> s = root;
      const auto leaf = randomTokens(5, kVocab, seed);
      s.insert(s.end(), leaf.begin(), leaf.end());
      return s;
    };
    const std::vector<std::vector<int32_t>> two = {path(61), path(62)}, three = {path(61), path(63), path(62)};
    serve(*r, b, promptOf({buildDepTree(two)}, randomTokens(3, kVocab, 64)));
    const int64_t before = b.stats(SegmentAttention::Dependency).computedTokens;
    const SegmentedPrompt p = promptOf({buildDepTree(three)}, randomTokens(3, kVocab, 65));
    const Served s = serve(*r, b, p);
    // The pre-order prefix root + path(61) is shared: its whole blocks hit, the rest is computed.
    QCOMPARE(s.hits, int64_t{12});
    QCOMPARE(b.stats(SegmentAttention::Dependency).computedTokens - before, p.contextTokens() - 12);
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
    SegmentKvBuilder b(*r);
    const DepTree hot = randomTree(100);
    const std::vector<int32_t> tail = randomTokens(3, kVocab, 101);
    serve(*r, b, promptOf({hot}, tail));
    for (uint64_t i = 0; i < 12; ++i) serve(*r, b, promptOf({randomTree(200 + i)}, tail));
    const memory::PrefixCacheStats st = r->prefixCache()->stats();
    QVERIFY(st.evictedBlocks > 0);
    QVERIFY(st.demotedBlocks > 0);
    // Nothing live: the pool holds only what the cache holds.
    QCOMPARE(r->kvStats().used, st.computeBlocks);
    const SegmentedPrompt p = promptOf({randomTree(300), hot}, tail);
    const Served s = serve(*r, b, p);
    QVERIFY(s.hits > 0);
    QVERIFY(r->prefixCache()->stats().hostHitTokens > 0);
    QVERIFY2(diffToDense(*m, p, s) < 2e-3, "a host-tier hit differs from the dense reference");
  }

  void lacrKeepsWhatThePendingQueueNeeds() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached(24, 0, "lacr"));
    SegmentKvBuilder b(*r);
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

  // ---- Block-Attention ----

  void aBlockPromptCutsThePromptAtItsPassages() {
    PromptTokens p;
    p.tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    p.segments = {{SegmentOrigin::Text, -1, 0, 2}, {SegmentOrigin::Passage, 7, 2, 5},
                  {SegmentOrigin::Passage, 9, 5, 7}, {SegmentOrigin::Text, -1, 7, 9}};
    const std::optional<SegmentedPrompt> b = blockPrompt(p);
    QVERIFY(b.has_value());
    QCOMPARE(b->segments.size(), size_t{3});  // the instruction text and both passages
    QCOMPARE(b->segments[1].passageId, int64_t{7});
    QCOMPARE(b->segments[2].tree.tokens, (std::vector<int32_t>{6, 7}));
    QCOMPARE(b->tail, (std::vector<int32_t>{8, 9}));
    QCOMPARE(b->tokens(), p.tokens);
    const AttentionMask m = b->mask();
    QCOMPARE(m.kind, MaskKind::Block);
    QCOMPARE(m.blockStarts, (std::vector<int32_t>{0, 2, 5, 7}));
    // No passage, or nothing after the last one: not a block prompt.
    p.segments = {{SegmentOrigin::Text, -1, 0, 9}};
    QVERIFY(!blockPrompt(p).has_value());
    p.segments = {{SegmentOrigin::Text, -1, 0, 2}, {SegmentOrigin::Passage, 7, 2, 9}};
    QVERIFY(!blockPrompt(p).has_value());
  }

  void storedBlocksReencodedEqualKeysComputedInPlace() {
    auto m = tinyModel();
    auto r = makeRunner(m, cached());
    SegmentKvBuilder b(*r);
    serve(*r, b, blockPromptOf({1, 2, 3}, 70));  // caches blocks 1, 2, 3 at positions 0..n-1
    // The same passages in another order after a new one: every block at a new offset.
    const SegmentedPrompt p = blockPromptOf({4, 3, 1, 2}, 71);
    auto t = b.begin(p);
    QVERIFY(t.isOk());
    for (int guard = 0; !b.ready(*t) && guard < 1000; ++guard) {
      StepResult s = r->step();
      b.absorb(s.events);
    }
    auto q = b.request(*t);
    QVERIFY(q.isOk());
    q->sampling.maxTokens = 1;
    q->keepKv = true;
    auto viaStore = r->add(std::move(*q));
    QVERIFY(viaStore.isOk());
    b.finish(*t);
    SequenceRequest inPlace = greedy(p.tokens(), 1, false);
    inPlace.mask = p.mask();
    inPlace.keepKv = true;
    auto computed = r->add(std::move(inPlace));
    QVERIFY(computed.isOk());
    drain(*r, kVocab);
    const int64_t n = static_cast<int64_t>(p.tokens().size());
    for (int32_t layer = 0; layer < 2; ++layer) {
      auto a = r->keys(*viaStore, layer, n);
      auto c = r->keys(*computed, layer, n);
      QVERIFY(a.isOk() && c.isOk());
      double worst = 0;
      for (size_t i = 0; i < a->size(); ++i) worst = std::max(worst, static_cast<double>(std::abs((*a)[i] - (*c)[i])));
      QVERIFY2(worst < 1e-4, qPrintable(QString("layer %1: re-encoded stored keys differ by %2").arg(layer).arg(worst)));
    }
    QVERIFY(b.stats(SegmentAttention::Block).hitTokens > 0);
    QCOMPARE(b.stats(SegmentAttention::Dependency).prompts, int64_t{0});
  }

  void blockAnswersEqualFullPrefillTokenForToken() {
    auto m = tinyModel();
    RunnerParams rp = cached();
    rp.deterministic = true;
    auto r = makeRunner(m, rp);
    SegmentKvBuilder b(*r);
    serve(*r, b, blockPromptOf({5, 6, 7}, 80));
    const SegmentedPrompt p = blockPromptOf({7, 8, 5, 6}, 81);
    auto answer = [&](bool viaBlocks) {
      SequenceRequest q;
      std::optional<SegmentKvBuilder::Ticket> t;
      if (viaBlocks) {
        auto begun = b.begin(p);
        if (!begun.isOk()) qFatal("%s", begun.status().message().c_str());
        t = *begun;
        for (int guard = 0; !b.ready(*t) && guard < 1000; ++guard) {
          StepResult s = r->step();
          b.absorb(s.events);
        }
        q = *b.request(*t);
      } else {
        q.prompt = p.tokens();
        q.mask = p.mask();
      }
      q.sampling.maxTokens = 8;
      auto id = r->add(std::move(q));
      if (t) b.finish(*t);  // the sequence holds its own copies now
      if (!id.isOk()) qFatal("%s", id.status().message().c_str());
      return drain(*r, kVocab)[*id].tokens;
    };
    const std::vector<int32_t> full = answer(false), blocks = answer(true);
    QCOMPARE(full.size(), size_t{8});
    QCOMPARE(blocks, full);
  }

  void theBlockStoreServesARestart() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    auto m = tinyModel();
    const SegmentedPrompt p = blockPromptOf({11, 12, 13}, 90);
    {
      auto r = makeRunner(m, cached());
      auto store = memory::BlockStore::open(storeParams(dir.path()));
      QVERIFY(store.isOk());
      SegmentKvBuilder b(*r, true, store->get());
      serve(*r, b, p);
      QCOMPARE((*store)->stats().pending, int64_t{3});
      QVERIFY((*store)->save().isOk());
    }
    // A new process: an empty prefix cache, the store on disk.
    auto r = makeRunner(m, cached());
    auto store = memory::BlockStore::open(storeParams(dir.path()));
    QVERIFY(store.isOk());
    QVERIFY((*store)->openReport().empty());
    QCOMPARE((*store)->stats().records, int64_t{3});
    SegmentKvBuilder b(*r, true, store->get());
    const SegmentedPrompt moved = blockPromptOf({13, 11, 12}, 91);
    const Served s = serve(*r, b, moved);
    QCOMPARE(s.hits, moved.contextTokens());
    QCOMPARE(b.stats(SegmentAttention::Block).storeHitTokens, moved.contextTokens());
    QCOMPARE(b.stats(SegmentAttention::Block).computedTokens, int64_t{0});
    QVERIFY2(diffToDense(*m, moved, s) < 2e-3, "blocks loaded from the store differ from the dense block-mask reference");
    // Another model's store is never read: it is set aside and the store starts empty.
    auto other = memory::BlockStore::open(storeParams(dir.path(), "tiny-b"));
    QVERIFY(other.isOk());
    QVERIFY((*other)->openReport().find("not of tiny-b") != std::string::npos);
    QCOMPARE((*other)->stats().records, int64_t{0});
    QVERIFY(!(*other)->contains(11, moved.segments[1].tree.tokens));
  }
};

QTEST_GUILESS_MAIN(TestTorchSegmentKv)
#include "test_torch_segment_kv.moc"
