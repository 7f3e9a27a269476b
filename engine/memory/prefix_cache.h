// The prefix cache interface (SGLang's match_prefix / insert / evict / lock refs): KV blocks of
// token sequences already computed, kept after their sequences finish so that a later prompt
// starting with the same tokens reuses them instead of prefilling them again.
//
//   PrefixMatch m = cache.match(prompt, {.maxTokens = prompt.size() - 1});  // path locked
//   ... seq.blocks = m.blocks, each retained by the caller (the cache keeps its own references);
//       prefill prompt[m.tokens:] ...
//   PrefixNodeId n = cache.insert(seq.tokens, seq.blocks);  // the cache retains its own refs
//   cache.lock(n); cache.unlock(m.node);                     // pin what the sequence now uses
//   ... when the sequence ends: cache.unlock(n) ...
//
// Granularity: whole KV blocks. Only full blocks are cached and matched, so a match's token
// count is a multiple of the pool's block size.
// Namespaces: `ns` keeps token sequences whose KV is not interchangeable apart (plain causal
// prompts at position 0 are namespace 0; a DepCache subgraph or a passage block under another
// mask gets its own). A match never crosses namespaces.
// Locking: a locked node (and so its whole path to the root) is never evicted. match() locks
// what it returns; every lock is undone by one unlock of the same node.
// Not thread-safe: the thread that drives the KV pool drives its cache.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "memory/kv_pool.h"

namespace rag::memory {

using PrefixNodeId = int32_t;
inline constexpr PrefixNodeId kNoPrefixNode = -1;

struct MatchParams {
  uint64_t ns = 0;
  // Match at most this many tokens (a prompt matches at most length - 1: its last token must be
  // computed to give the next token's logits).
  int64_t maxTokens = std::numeric_limits<int64_t>::max();
  bool loadFromHost = true;  // copy host-tier nodes on the path back; false: stop before them
};

struct PrefixMatch {
  int64_t tokens = 0;               // matched tokens, a multiple of the block size
  std::vector<int32_t> blocks;      // compute-tier blocks holding them, in order
  std::vector<int64_t> positions;   // the RoPE position each matched token's key was stored at
  PrefixNodeId node = kNoPrefixNode;  // the deepest matched node, locked (none: nothing matched)
  int64_t hostTokens = 0;           // of `tokens`, copied back from the host tier by this match
};

struct InsertParams {
  uint64_t ns = 0;
  int64_t firstPosition = 0;  // RoPE position of tokens[0]'s key (the rest follow one by one)
};

struct PrefixCacheStats {
  int64_t matches = 0;
  int64_t queriedTokens = 0;   // tokens offered to match(), up to each call's maxTokens
  int64_t hitTokens = 0;       // of those, found in the cache
  int64_t hostHitTokens = 0;   // of the hits, copied back from the host tier
  int64_t insertedTokens = 0;  // tokens that became new cache entries
  int64_t evictedBlocks = 0;   // compute blocks dropped from the cache
  int64_t demotedBlocks = 0;   // ... of which moved to the host tier instead of dropped
  int64_t hostDroppedBlocks = 0;  // host blocks dropped to make room
  int32_t nodes = 0;
  int32_t computeBlocks = 0;   // blocks the cache holds in each tier
  int32_t hostBlocks = 0;
  double hitRate() const {
    return queriedTokens > 0 ? static_cast<double>(hitTokens) / static_cast<double>(queriedTokens) : 0.0;
  }
};

// One node as inspectors show it (PrefixCache::snapshot).
struct PrefixNodeInfo {
  PrefixNodeId id = kNoPrefixNode;
  PrefixNodeId parent = kNoPrefixNode;  // kNoPrefixNode: a namespace root's child
  uint64_t ns = 0;
  std::vector<int32_t> tokens;  // this node's edge
  int64_t depthTokens = 0;      // tokens from the root to the end of this node
  KvTier tier = KvTier::Compute;
  int32_t locks = 0;
  int64_t hits = 0;
  double priority = 0;          // the eviction policy's, now
};

// A prompt still waiting to be served, for look-ahead eviction (oldest first).
struct PendingPrompt {
  uint64_t ns = 0;
  std::vector<int32_t> tokens;
};

class PrefixCache {
public:
  virtual ~PrefixCache() = default;

  virtual PrefixMatch match(std::span<const int32_t> tokens, const MatchParams& params = {}) = 0;
  // Caches the first floor(tokens / blockSize) blocks of `tokens` (their KV in `blocks`,
  // compute tier, one per block; extra blocks are ignored). Blocks of tokens already cached are
  // left to the caller; the new ones are retained. Returns the node ending at the last cached
  // block (kNoPrefixNode when nothing is cached).
  virtual PrefixNodeId insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks,
                              const InsertParams& params = {}) = 0;
  virtual void lock(PrefixNodeId node) = 0;
  virtual void unlock(PrefixNodeId node) = 0;
  // Frees at least `blocks` compute blocks if it can, by evicting unlocked nodes leaves first
  // (to the host tier when it has room); returns the compute blocks actually freed.
  virtual int32_t evict(int32_t blocks) = 0;
  virtual PrefixCacheStats stats() const = 0;
  virtual std::vector<PrefixNodeInfo> snapshot() const = 0;
  // Calls `fn(ns, block)` for every compute-tier block the cache holds a reference to (one call
  // per block), for maps of who holds the pool's blocks.
  virtual void forEachComputeBlock(const std::function<void(uint64_t ns, int32_t block)>& fn) const = 0;
  // Look-ahead eviction (LACR) reads the pending queue through this, before each eviction.
  virtual void setPendingQueue(std::function<std::vector<PendingPrompt>()> pending) = 0;
  virtual std::string_view policyName() const = 0;
};

}  // namespace rag::memory
