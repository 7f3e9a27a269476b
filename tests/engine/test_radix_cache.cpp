// The radix-tree prefix cache over a real two-tier KV pool: shared prefixes stored once, block
// granularity, locks, leaves-first eviction in each policy's order, host-tier demotion with a
// bit-exact copy back, eviction inside allocation.
#include <QtTest>

#include <cstring>
#include <numeric>

#include "memory/radix_cache.h"
#include "status_checks.h"

using namespace rag::memory;

namespace {

constexpr int32_t kBs = 4;

std::unique_ptr<KvPool> makePool(int32_t compute, int32_t host = 0) {
  return std::move(*KvPool::create(
      {.layers = 1, .kvHeads = 1, .headDim = 2, .blockSize = kBs, .computeBlocks = compute, .hostBlocks = host}));
}

std::unique_ptr<RadixCache> makeCache(KvPool& pool, const char* policy = "lru") {
  auto cache = std::make_unique<RadixCache>(pool, std::move(*makeEvictionPolicy(policy)));
  pool.setReclaimer([c = cache.get()](int32_t n) { return c->evict(n); });
  return cache;
}

// Tokens base, base+1, ... (n of them).
std::vector<int32_t> seq(int32_t base, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), base);
  return v;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What a finished sequence does: computes KV into fresh blocks, inserts, drops its own refs.
std::vector<int32_t> computeAndInsert(KvPool& pool, PrefixCache& cache, const std::vector<int32_t>& tokens,
                                      float salt = 0.0f) {
  auto blocks = *pool.allocate(static_cast<int32_t>((tokens.size() + kBs - 1) / kBs));
  for (size_t b = 0; b < blocks.size(); ++b) {
    auto* k = static_cast<float*>(pool.keys(0)) + blocks[b] * kBs * 2;
    for (int i = 0; i < kBs * 2; ++i) k[i] = salt + static_cast<float>(b * 100 + static_cast<size_t>(i));
  }
  cache.insert(tokens, blocks);
  pool.release(blocks);
  return blocks;
}

}  // namespace

class TestRadixCache : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void sharedPrefixIsStoredOnce() {
    auto pool = makePool(16);
    auto cache = makeCache(*pool);
    const auto a = cat(seq(0, 8), seq(100, 4));   // 3 blocks
    const auto b = cat(seq(0, 8), seq(200, 6));   // 2 shared blocks + 1 + a partial one
    computeAndInsert(*pool, *cache, a);
    computeAndInsert(*pool, *cache, b);
    // 3 blocks of a, plus b's third block: b's shared blocks and its partial block are not kept.
    QCOMPARE(pool->stats().used, 4);
    QCOMPARE(cache->stats().nodes, 3);  // the shared prefix, then one leaf each
    QCOMPARE(cache->stats().computeBlocks, 4);

    PrefixMatch m = cache->match(b);
    QCOMPARE(m.tokens, int64_t{12});  // whole blocks only
    QCOMPARE(m.blocks.size(), size_t{3});
    QCOMPARE(m.positions, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    PrefixMatch ma = cache->match(a);
    QCOMPARE(ma.blocks[0], m.blocks[0]);  // the same blocks serve both
    QCOMPARE(ma.blocks[1], m.blocks[1]);
    QVERIFY(ma.blocks[2] != m.blocks[2]);
    cache->unlock(m.node);
    cache->unlock(ma.node);
  }

  void matchStopsAtMaxTokensOnABlockBoundary() {
    auto pool = makePool(8);
    auto cache = makeCache(*pool);
    const auto a = seq(0, 12);
    computeAndInsert(*pool, *cache, a);
    PrefixMatch m = cache->match(a, {.maxTokens = 11});  // a prompt keeps its last token to compute
    QCOMPARE(m.tokens, int64_t{8});
    cache->unlock(m.node);
    QCOMPARE(cache->stats().nodes, 2);  // the match split the node at the boundary it stopped at
    PrefixMatch none = cache->match(seq(50, 12));
    QCOMPARE(none.tokens, int64_t{0});
    QCOMPARE(none.node, kNoPrefixNode);
    const PrefixCacheStats s = cache->stats();
    QCOMPARE(s.queriedTokens, int64_t{11 + 12});
    QCOMPARE(s.hitTokens, int64_t{8});
  }

  void namespacesNeverMix() {
    auto pool = makePool(8);
    auto cache = makeCache(*pool);
    const auto a = seq(0, 8);
    auto blocks = *pool->allocate(2);
    cache->insert(a, blocks, {.ns = 7, .firstPosition = 40});
    pool->release(blocks);
    QCOMPARE(cache->match(a).tokens, int64_t{0});
    PrefixMatch m = cache->match(a, {.ns = 7});
    QCOMPARE(m.tokens, int64_t{8});
    QCOMPARE(m.positions.front(), int64_t{40});  // where the keys were encoded
    cache->unlock(m.node);
  }

  void evictionFreesBlocksLeavesFirst() {
    auto pool = makePool(16);
    auto cache = makeCache(*pool);
    computeAndInsert(*pool, *cache, cat(seq(0, 8), seq(100, 4)));
    computeAndInsert(*pool, *cache, cat(seq(0, 8), seq(200, 4)));
    QCOMPARE(pool->stats().used, 4);
    // One block: a leaf goes, never the shared parent under the other leaf.
    QCOMPARE(cache->evict(1), 1);
    QCOMPARE(pool->stats().used, 3);
    PrefixMatch gone = cache->match(cat(seq(0, 8), seq(100, 4)));
    QCOMPARE(gone.tokens, int64_t{8});  // its leaf went (the older one); the shared prefix stayed
    cache->unlock(gone.node);
    PrefixMatch keep = cache->match(cat(seq(0, 8), seq(200, 4)));
    QCOMPARE(keep.tokens, int64_t{12});
    cache->unlock(keep.node);
    // Everything: the parent only after its last child.
    QCOMPARE(cache->evict(100), 3);
    QCOMPARE(pool->stats().used, 0);
    QCOMPARE(cache->stats().nodes, 0);
    QCOMPARE(cache->stats().evictedBlocks, int64_t{4});
  }

  void lockedNodesAreNeverEvicted() {
    auto pool = makePool(8);
    auto cache = makeCache(*pool);
    computeAndInsert(*pool, *cache, seq(0, 8));
    computeAndInsert(*pool, *cache, seq(50, 8));
    PrefixMatch m = cache->match(seq(0, 8));
    QCOMPARE(cache->evict(100), 2);  // only the unlocked one
    QCOMPARE(cache->match(seq(50, 8)).tokens, int64_t{0});
    QCOMPARE(cache->evict(100), 0);  // everything left is locked: nothing to free, no crash
    PrefixMatch again = cache->match(seq(0, 8));
    QCOMPARE(again.tokens, int64_t{8});
    cache->unlock(again.node);
    cache->unlock(m.node);
    QCOMPARE(cache->evict(100), 2);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, cache->unlock(m.node));  // one unlock too many
  }

  void evictionRunsInsideAllocation() {
    auto pool = makePool(4);
    auto cache = makeCache(*pool);
    computeAndInsert(*pool, *cache, seq(0, 8));
    computeAndInsert(*pool, *cache, seq(50, 8));
    QCOMPARE(pool->freeBlocks(), 0);
    auto fresh = pool->allocate(3);  // the pool is full of cached prefixes: they give way
    QVERIFY(fresh.has_value());
    QCOMPARE(pool->stats().reclaimedBlocks, int64_t{4});
    // With everything held, an allocation fails cleanly.
    QVERIFY(!pool->allocate(2).has_value());
    pool->release(*fresh);
  }

  void lruEvictsTheLeastRecentlyUsed() {
    auto pool = makePool(16);
    auto cache = makeCache(*pool, "lru");
    computeAndInsert(*pool, *cache, seq(0, 4));
    computeAndInsert(*pool, *cache, seq(10, 4));
    cache->unlock(cache->match(seq(0, 4)).node);  // 0.. used more recently than 10..
    cache->evict(1);
    QCOMPARE(cache->match(seq(10, 4)).tokens, int64_t{0});
    QCOMPARE(cache->match(seq(0, 4)).tokens, int64_t{4});
  }

  void lfuEvictsTheLeastHit() {
    auto pool = makePool(16);
    auto cache = makeCache(*pool, "lfu");
    computeAndInsert(*pool, *cache, seq(0, 4));
    computeAndInsert(*pool, *cache, seq(10, 4));
    for (int i = 0; i < 3; ++i) cache->unlock(cache->match(seq(0, 4)).node);
    cache->unlock(cache->match(seq(10, 4)).node);  // the most recent, but hit once
    cache->evict(1);
    QCOMPARE(cache->match(seq(10, 4)).tokens, int64_t{0});
  }

  void pgdsfKeepsWhatIsCostlyToRecompute() {
    auto pool = makePool(16);
    auto cache = makeCache(*pool, "pgdsf");
    // Tokens from 1000 on are 50x as costly to recompute (a long prefix before them, say).
    cache->setRecomputeCost([](int64_t, int64_t n) { return static_cast<double>(n); });
    computeAndInsert(*pool, *cache, seq(0, 4));
    cache->setRecomputeCost([](int64_t, int64_t n) { return 50.0 * static_cast<double>(n); });
    computeAndInsert(*pool, *cache, seq(1000, 4));
    cache->setRecomputeCost([](int64_t, int64_t n) { return static_cast<double>(n); });
    computeAndInsert(*pool, *cache, seq(20, 4));  // the most recent, but cheap
    cache->evict(1);
    QCOMPARE(cache->match(seq(1000, 4)).tokens, int64_t{4});
    QCOMPARE(cache->match(seq(0, 4)).tokens + cache->match(seq(20, 4)).tokens, int64_t{4});
  }

  void lacrKeepsWhatThePendingQueueWants() {
    auto pool = makePool(16);
    auto cache = makeCache(*pool, "lacr");
    computeAndInsert(*pool, *cache, seq(0, 4));
    computeAndInsert(*pool, *cache, seq(10, 4));
    for (int i = 0; i < 2; ++i) cache->unlock(cache->match(seq(10, 4)).node);  // LFU favours 10..
    cache->setPendingQueue([] {
      return std::vector<PendingPrompt>{{0, cat(seq(0, 4), seq(90, 3))}, {0, seq(0, 6)}, {0, seq(0, 4)}};
    });
    cache->evict(1);  // 0.. is wanted by three waiting prompts: 10.. goes despite its hits
    QCOMPARE(cache->match(seq(0, 4)).tokens, int64_t{4});
    QCOMPARE(cache->match(seq(10, 4)).tokens, int64_t{0});
    QVERIFY(!makeEvictionPolicy("lacr", 1.5).isOk());
    QVERIFY(mentions(makeEvictionPolicy("lacr", -0.1).status(), {"alpha", "[0, 1]"}));
    QVERIFY(mentions(makeEvictionPolicy("fifo").status(), {"fifo", "lru, lfu, pgdsf or lacr"}));
  }

  void evictedNodesGoToTheHostTierAndComeBackBitExact() {
    auto pool = makePool(4, 8);
    auto cache = makeCache(*pool);
    const auto a = seq(0, 8);
    computeAndInsert(*pool, *cache, a, 0.5f);
    const auto keysOf = [&](const PrefixMatch& m) {
      std::vector<float> k;
      for (int32_t b : m.blocks) {
        const auto* p = static_cast<const float*>(pool->keys(0)) + b * kBs * 2;
        k.insert(k.end(), p, p + kBs * 2);
      }
      return k;
    };
    PrefixMatch before = cache->match(a);
    const std::vector<float> keys = keysOf(before);
    cache->unlock(before.node);
    QCOMPARE(cache->evict(2), 2);
    QCOMPARE(pool->stats().used, 0);
    QCOMPARE(pool->stats().hostUsed, 2);
    QCOMPARE(cache->stats().demotedBlocks, int64_t{2});
    // Fill the compute tier with other data, then match: copied back, same bytes.
    auto other = *pool->allocate(4);
    for (int32_t b : other) std::memset(static_cast<float*>(pool->keys(0)) + b * kBs * 2, 0x7f, kBs * 2 * sizeof(float));
    pool->release(std::span<const int32_t>(other).subspan(2));  // room for the copy back
    PrefixMatch after = cache->match(a);
    QCOMPARE(after.tokens, int64_t{8});
    QCOMPARE(after.hostTokens, int64_t{8});
    QCOMPARE(keysOf(after), keys);
    QCOMPARE(pool->stats().hostUsed, 0);
    QCOMPARE(cache->stats().hostHitTokens, int64_t{8});
    cache->unlock(after.node);
    pool->release(std::span<const int32_t>(other).first(2));
  }

  void aFullHostTierDropsItsOwnLeavesFirst() {
    auto pool = makePool(2, 1);
    auto cache = makeCache(*pool);
    computeAndInsert(*pool, *cache, seq(0, 4));
    computeAndInsert(*pool, *cache, seq(10, 4));
    QCOMPARE(cache->evict(2), 2);  // both demoted in turn; the second displaced the first from the one host block
    PrefixCacheStats s = cache->stats();
    QCOMPARE(s.hostBlocks, 1);
    QCOMPARE(s.nodes, 1);
    computeAndInsert(*pool, *cache, seq(20, 4));
    QCOMPARE(cache->evict(1), 1);  // demoting it needs the host block: the host leaf there goes
    QCOMPARE(cache->stats().hostDroppedBlocks, int64_t{2});
    QCOMPARE(cache->match(seq(20, 4), {.loadFromHost = false}).tokens, int64_t{0});
    PrefixMatch m = cache->match(seq(20, 4));
    QCOMPARE(m.tokens, int64_t{4});
    cache->unlock(m.node);
  }

  void snapshotShowsTheTree() {
    auto pool = makePool(16);
    auto cache = makeCache(*pool);
    computeAndInsert(*pool, *cache, cat(seq(0, 4), seq(100, 4)));
    computeAndInsert(*pool, *cache, cat(seq(0, 4), seq(200, 4)));
    PrefixMatch m = cache->match(cat(seq(0, 4), seq(200, 4)));
    std::vector<PrefixNodeInfo> nodes = cache->snapshot();
    QCOMPARE(nodes.size(), size_t{3});
    int roots = 0, locked = 0;
    for (const PrefixNodeInfo& n : nodes) {
      roots += n.parent == kNoPrefixNode;
      locked += n.locks > 0;
      QCOMPARE(n.tokens.size(), size_t{kBs});
    }
    QCOMPARE(roots, 1);
    QCOMPARE(locked, 2);  // the matched leaf and the shared parent
    cache->unlock(m.node);
    cache->clear();
    QCOMPARE(cache->stats().nodes, 0);
    QCOMPARE(pool->stats().used, 0);
  }
};

QTEST_GUILESS_MAIN(TestRadixCache)
#include "test_radix_cache.moc"
