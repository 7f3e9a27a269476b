// Which cached prefix gives way first: the priority a prefix cache (memory/radix_cache.h)
// gives each evictable node. The node with the lowest priority is evicted first (ties: the
// least recently used). Policies see a node's access history, its size, its measured recompute
// cost and, for look-ahead policies, how often the requests still waiting would reuse it.
//
//   lru    last access                                    (vLLM, SGLang's default)
//   lfu    hits, then last access
//   pgdsf  Clock + Frequency · Cost / Size                 (prompt-cache GDSF: Clock is the
//          priority of the last node evicted, Cost the node's measured recompute time given its
//          prefix, Size its blocks; a node's Clock term is fixed when it is accessed)
//   lacr   α · LFU + (1 − α) · F, F the node's weighted accesses by the pending queue
//          (DepCache's locality-aware replacement; α = 0.2 by default)
//
//   RAG_ASSIGN_OR_RETURN(std::unique_ptr<EvictionPolicy> p, makeEvictionPolicy("pgdsf"));
//
// The cache calls onAccess() when a match or insert touches a node and onEvicted() with the
// priority of each node it evicts; priority() must not change a node.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag::memory {

// What a policy may read (and, in onAccess, write) of one cached node.
struct EvictionNode {
  uint64_t lastAccess = 0;   // the cache's logical clock at the last match or insert touching it
  int64_t hits = 0;          // matches that reused it (an insert is not a hit)
  int32_t blocks = 0;        // its size
  double recomputeSeconds = 0;  // measured cost of computing its tokens given its prefix
  double lookahead = 0;      // weighted accesses by the pending queue (look-ahead policies)
  double policyState = 0;    // the policy's own per-node value (PGDSF: Clock at last access)
};

class EvictionPolicy {
public:
  virtual ~EvictionPolicy() = default;
  virtual std::string_view name() const = 0;
  virtual double priority(const EvictionNode& n) const = 0;
  virtual void onAccess(EvictionNode& /*n*/) {}
  virtual void onEvicted(double /*priority*/) {}
  // True when priority() reads `lookahead`: the cache then scores the pending queue before
  // each eviction.
  virtual bool usesLookahead() const { return false; }
};

std::vector<std::string> evictionPolicyNames();  // lru, lfu, pgdsf, lacr
// InvalidArgument naming the known policies for another name, or an alpha outside [0, 1].
Result<std::unique_ptr<EvictionPolicy>> makeEvictionPolicy(std::string_view name, double lacrAlpha = 0.2);

}  // namespace rag::memory
