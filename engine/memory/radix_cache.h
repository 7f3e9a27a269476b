// A radix tree over token ids at block granularity (SGLang's RadixAttention), the PrefixCache
// the runner uses: edges are compressed runs of whole blocks, a shared prefix is stored once,
// nodes a live sequence uses are locked, and eviction takes unlocked leaves first (a parent goes
// only after all its children), in the order an EvictionPolicy gives.
//
//   RAG_ASSIGN_OR_RETURN(auto policy, makeEvictionPolicy("lru"));
//   RadixCache cache(pool, std::move(policy));
//   pool.setReclaimer([&](int32_t n) { return cache.evict(n); });   // eviction inside allocation
//
// Tiers: an evicted node moves to the pool's host tier when it has room (making room there by
// dropping unlocked host leaves), else it is dropped. Host nodes are always below compute ones
// on a path, and match() copies a path's host nodes back into the compute tier before returning
// them. A node is demoted only when none of its children is in the compute tier.
// The recompute cost PGDSF weighs comes from setRecomputeCost (the runner's measured prefill
// speed); without one a node costs one unit per token.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "memory/eviction_policy.h"
#include "memory/prefix_cache.h"

namespace rag::memory {

class RadixCache final : public PrefixCache {
public:
  RadixCache(KvPool& pool, std::unique_ptr<EvictionPolicy> policy);
  ~RadixCache() override;

  PrefixMatch match(std::span<const int32_t> tokens, const MatchParams& params = {}) override;
  PrefixNodeId insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks,
                      const InsertParams& params = {}) override;
  void lock(PrefixNodeId node) override;
  void unlock(PrefixNodeId node) override;
  int32_t evict(int32_t blocks) override;
  PrefixCacheStats stats() const override;
  std::vector<PrefixNodeInfo> snapshot() const override;
  void forEachComputeBlock(const std::function<void(uint64_t ns, int32_t block)>& fn) const override;
  void setPendingQueue(std::function<std::vector<PendingPrompt>()> pending) override { m_pending = std::move(pending); }
  std::string_view policyName() const override { return m_policy->name(); }

  // Seconds to compute `tokens` tokens that follow `prefixTokens` already computed.
  void setRecomputeCost(std::function<double(int64_t prefixTokens, int64_t tokens)> cost) { m_cost = std::move(cost); }
  // Tokens of `tokens` the cache holds in namespace `ns` (whole blocks, either tier), touching
  // nothing: what a longest-prefix-match scheduler (LPM) ranks waiting requests by.
  int64_t peek(std::span<const int32_t> tokens, uint64_t ns = 0) const;
  // Drops every unlocked node (both tiers); what live sequences lock stays.
  void clear();

private:
  struct Node {
    PrefixNodeId parent = kNoPrefixNode;  // kNoPrefixNode for a namespace root
    uint64_t ns = 0;
    std::vector<int32_t> key;     // tokens of the edge into this node, whole blocks
    std::vector<int32_t> blocks;  // one per block of `key`, in `tier`
    KvTier tier = KvTier::Compute;
    int64_t firstPosition = 0;    // RoPE position of key[0]
    int64_t depth = 0;            // tokens from the root to the end of this node
    std::unordered_map<uint64_t, PrefixNodeId> children;  // by a hash of the child's first block
    int32_t computeChildren = 0;
    int32_t locks = 0;
    EvictionNode evict;
    bool live = false;
  };

  PrefixNodeId root(uint64_t ns);
  PrefixNodeId newNode();
  void freeNode(PrefixNodeId id);
  uint64_t blockHash(std::span<const int32_t> block) const;
  PrefixNodeId childFor(const Node& n, std::span<const int32_t> firstBlock) const;
  // Splits `id` after its first `blocks` blocks; returns the new upper node (the parent of `id`).
  PrefixNodeId split(PrefixNodeId id, int64_t blocks);
  // Blocks of `a` and `b` equal from the start, whole blocks only.
  int64_t commonBlocks(std::span<const int32_t> a, std::span<const int32_t> b) const;
  void touch(Node& n);
  void setTier(PrefixNodeId id, KvTier tier, std::vector<int32_t> blocks);
  void removeLeaf(PrefixNodeId id);
  bool evictable(const Node& n) const;
  double priorityOf(const Node& n) const;
  void scoreLookahead();
  int32_t dropHostLeaves(int32_t blocks, PrefixNodeId keep);

  KvPool& m_pool;
  std::unique_ptr<EvictionPolicy> m_policy;
  int64_t m_bs;
  std::vector<Node> m_nodes;
  std::vector<PrefixNodeId> m_freeIds;
  std::unordered_map<uint64_t, PrefixNodeId> m_roots;
  std::function<double(int64_t, int64_t)> m_cost;
  std::function<std::vector<PendingPrompt>()> m_pending;
  uint64_t m_clock = 0;
  PrefixCacheStats m_stats;
};

}  // namespace rag::memory
