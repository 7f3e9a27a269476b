#include "sched/kv_block_map.h"

#include "rag/engine.h"
#include "sched/segment_kv.h"

namespace rag::sched {

namespace {

KvBlockOwner cachedOwner(uint64_t ns) {
  if (ns == kBlockNamespace) return KvBlockOwner::Passage;
  if (ns == kDepCacheNamespace) return KvBlockOwner::Subgraph;
  return KvBlockOwner::Prefix;
}

}  // namespace

void mapKvBlocks(const memory::KvPool& pool, const memory::PrefixCache* cache, std::vector<uint8_t>& owners) {
  const int32_t n = pool.capacity();
  owners.assign(static_cast<size_t>(n), static_cast<uint8_t>(KvBlockOwner::Free));
  // First the cache's blocks, by namespace; a block whose count exceeds the cache's one
  // reference is also a sequence's, and a sequence's wins below.
  if (cache)
    cache->forEachComputeBlock([&](uint64_t ns, int32_t b) {
      if (b < 0 || b >= n) return;
      owners[static_cast<size_t>(b)] =
          static_cast<uint8_t>(pool.refCount(b) > 1 ? KvBlockOwner::Sequence : cachedOwner(ns));
    });
  for (int32_t b = 0; b < n; ++b) {
    uint8_t& o = owners[static_cast<size_t>(b)];
    if (o == static_cast<uint8_t>(KvBlockOwner::Free) && pool.refCount(b) > 0) o = static_cast<uint8_t>(KvBlockOwner::Sequence);
  }
}

}  // namespace rag::sched
