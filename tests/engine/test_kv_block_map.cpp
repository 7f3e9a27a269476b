// Who holds each KV pool block (sched/kv_block_map.h), over a real pool and radix cache: free
// blocks, a sequence's, a cached prefix in use (the sequence's), and blocks only the cache holds,
// by namespace (prompts, DepCache subgraphs, Block-Attention passages); eviction frees them.
#include <QtTest>

#include <numeric>

#include "memory/radix_cache.h"
#include "rag/engine.h"
#include "sched/kv_block_map.h"
#include "sched/segment_kv.h"

using namespace rag::memory;
using rag::KvBlockOwner;

namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> seq(int32_t base, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), base);
  return v;
}

uint8_t code(KvBlockOwner o) { return static_cast<uint8_t>(o); }

}  // namespace

class TestKvBlockMap : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void ownersFollowReferencesAndNamespaces() {
    auto pool = std::move(*KvPool::create({.layers = 1, .kvHeads = 1, .headDim = 2, .blockSize = kBs, .computeBlocks = 12}));
    RadixCache cache(*pool, std::move(*makeEvictionPolicy("lru")));
    std::vector<uint8_t> owners;

    rag::sched::mapKvBlocks(*pool, &cache, owners);
    QCOMPARE(owners, std::vector<uint8_t>(12, code(KvBlockOwner::Free)));

    // A running sequence's two blocks, then cached under the prompt namespace: still the
    // sequence's while it holds them, a cached prefix once it lets go.
    std::vector<int32_t> a = *pool->allocate(2);
    rag::sched::mapKvBlocks(*pool, &cache, owners);
    QCOMPARE(owners[static_cast<size_t>(a[0])], code(KvBlockOwner::Sequence));
    QCOMPARE(owners[static_cast<size_t>(a[1])], code(KvBlockOwner::Sequence));
    cache.insert(seq(0, 2 * kBs), a);
    rag::sched::mapKvBlocks(*pool, &cache, owners);
    QCOMPARE(owners[static_cast<size_t>(a[0])], code(KvBlockOwner::Sequence));
    pool->release(a);
    rag::sched::mapKvBlocks(*pool, &cache, owners);
    QCOMPARE(owners[static_cast<size_t>(a[0])], code(KvBlockOwner::Prefix));
    QCOMPARE(owners[static_cast<size_t>(a[1])], code(KvBlockOwner::Prefix));

    // A passage block and a subgraph, by their namespaces.
    std::vector<int32_t> p = *pool->allocate(1);
    cache.insert(seq(100, kBs), p, {.ns = rag::sched::kBlockNamespace});
    pool->release(p);
    std::vector<int32_t> d = *pool->allocate(3);
    cache.insert(seq(200, 3 * kBs), d, {.ns = rag::sched::kDepCacheNamespace});
    pool->release(d);
    rag::sched::mapKvBlocks(*pool, &cache, owners);
    QCOMPARE(owners[static_cast<size_t>(p[0])], code(KvBlockOwner::Passage));
    for (int32_t b : d) QCOMPARE(owners[static_cast<size_t>(b)], code(KvBlockOwner::Subgraph));

    rag::KvBlockMap map{owners, 0, 0};
    const std::vector<int32_t> counts = map.counts();
    QCOMPARE(counts[static_cast<size_t>(KvBlockOwner::Free)], 6);
    QCOMPARE(counts[static_cast<size_t>(KvBlockOwner::Prefix)], 2);
    QCOMPARE(counts[static_cast<size_t>(KvBlockOwner::Passage)], 1);
    QCOMPARE(counts[static_cast<size_t>(KvBlockOwner::Subgraph)], 3);
    QCOMPARE(counts[static_cast<size_t>(KvBlockOwner::Sequence)], 0);

    // Evicted blocks are free again; without a cache every used block is a sequence's.
    QCOMPARE(cache.evict(100), 6);
    rag::sched::mapKvBlocks(*pool, &cache, owners);
    QCOMPARE(owners, std::vector<uint8_t>(12, code(KvBlockOwner::Free)));
    std::vector<int32_t> s = *pool->allocate(1);
    rag::sched::mapKvBlocks(*pool, nullptr, owners);
    QCOMPARE(owners[static_cast<size_t>(s[0])], code(KvBlockOwner::Sequence));
    QCOMPARE(rag::kvBlockOwnerName(KvBlockOwner::Passage), std::string_view("passage"));
  }
};

QTEST_GUILESS_MAIN(TestKvBlockMap)
#include "test_kv_block_map.moc"
