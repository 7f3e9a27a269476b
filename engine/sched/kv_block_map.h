// Who holds each compute block of the KV pool (rag::KvBlockMap's owners), for the KV heatmap.
//
//   std::vector<uint8_t> owners;
//   mapKvBlocks(runner.kvPool(), runner.prefixCache(), owners);  // [pool.capacity()] KvBlockOwner
//
// A block's reference count says how many hold it; the prefix cache holds one reference per
// block it caches (PrefixCache::forEachComputeBlock). A block with more references than the
// cache's is a sequence's (running, or building a segment's KV); one with only the cache's is a
// cached prefix, subgraph or passage block by the cache namespace it lives in (sched/segment_kv.h).
// Runs on the thread that drives the pool (it reads the pool's and the cache's tables).
#pragma once

#include <cstdint>
#include <vector>

#include "memory/kv_pool.h"
#include "memory/prefix_cache.h"

namespace rag::sched {

// Fills `owners` ([pool.capacity()], resized) with a rag::KvBlockOwner per compute block;
// `cache` may be null (no prefix cache: every used block is a sequence's).
void mapKvBlocks(const memory::KvPool& pool, const memory::PrefixCache* cache, std::vector<uint8_t>& owners);

}  // namespace rag::sched
