// The paged KV pool in two tiers: fixed-size blocks of keys and values for every layer, shared
// by reference counts, in a compute tier (what attention reads: the GPU's memory in the papers,
// the runner's CPU pool here) and a host tier of its own capacity (the papers' CPU memory).
//
//   RAG_ASSIGN_OR_RETURN(auto pool, KvPool::create({.layers = 4, .kvHeads = 4, .headDim = 32,
//                                                     .blockSize = 16, .computeBlocks = 1024,
//                                                     .hostBlocks = 4096}));
//   std::optional<std::vector<int32_t>> b = pool->allocate(3);   // compute blocks, refcount 1
//   float* k = static_cast<float*>(pool->keys(layer));           // [capacity * 16, 4, 32]
//   std::optional<std::vector<int32_t>> h = pool->copyToHost(*b); // a real copy, counted, traced
//   pool->release(*b);                                            // compute blocks free again
//   std::optional<std::vector<int32_t>> back = pool->copyToCompute(*h);
//
// Contracts:
//   - A sequence's block table points into the compute tier only; host blocks are storage a
//     cache copies back (copyToCompute) before anything attends to them.
//   - Moving blocks between tiers copies their K and V of every layer (memcpy here; a device
//     transfer with a GPU backend), adds the bytes to stats() and traces one KvTransfer span per
//     call (arg0: blocks, arg1: 1 to host, 2 to compute).
//   - allocate() is where memory pressure is resolved: when the compute tier is short it asks
//     the reclaimer (a prefix cache's evict, memory/prefix_cache.h) for the shortfall once, then
//     tries again, so cached prefixes give way before any running sequence is preempted.
//   - Storage never moves after create(): pointers from keys()/values() stay valid for the
//     pool's life (the runner wraps them as tensors once).
//   - The compute tier's K/V live in host memory, or, given a KvComputeStore, wherever that
//     store keeps them (a GPU's memory: the runner's step backend). With a store keys() and
//     values() are null and every reader and writer of K/V outside the forward pass goes
//     through readRows()/writeRows(), copyBlock() and the tier moves, which the store carries
//     out; the pool keeps the bookkeeping (blocks, references, the host tier) either way.
//
// Layout of one layer's keys (and values): [capacity * blockSize, kvHeads, headDim] elements of
// elementBytes each (4: F32, 2: BF16); token slot t of block b is row b * blockSize + t.
// Not thread-safe: one thread (the runner's) drives a pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "memory/block_allocator.h"
#include "rag/status.h"

namespace rag {
class TraceRing;
}

namespace rag::memory {

enum class KvTier : uint8_t { Compute, Host };

// The compute tier's K/V where they are not in host memory. Rows are one token of one layer,
// kvHeads * headDim elements; slot = block * blockSize + token in block. A failed transfer is
// kept by the pool (KvPool::storeStatus), so callers that cannot return a Status still report it.
class KvComputeStore {
public:
  virtual ~KvComputeStore() = default;
  virtual Status copyBlock(int32_t from, int32_t to) = 0;  // K and V of every layer
  // keys and values: [slots.size(), row] each, contiguous, in host memory.
  virtual Status readRows(int32_t layer, std::span<const int64_t> slots, void* keys, void* values) const = 0;
  virtual Status writeRows(int32_t layer, std::span<const int64_t> slots, const void* keys, const void* values) = 0;
};

// The slots of tokens [first, first + n) of a sequence whose block table is `blocks`.
std::vector<int64_t> slotsOf(std::span<const int32_t> blocks, int64_t first, int64_t n, int32_t blockSize);
std::string_view kvTierName(KvTier t);  // "compute" | "host"

struct KvPoolParams {
  int32_t layers = 0;
  int32_t kvHeads = 0;
  int32_t headDim = 0;
  int32_t blockSize = 16;     // tokens per block
  int32_t computeBlocks = 0;  // >= 1
  int32_t hostBlocks = 0;     // >= 0; 0: no host tier
  int32_t elementBytes = 4;   // 4 (F32) or 2 (BF16)
  TraceRing* ring = nullptr;  // KvTransfer spans on a lane "kv tiers"; null: untraced
  // Where the compute tier's K/V live; null: host memory the pool allocates. Not owned: it
  // must outlive the pool.
  KvComputeStore* computeStore = nullptr;
};

struct KvPoolStats {
  int32_t blockSize = 0;
  int32_t capacity = 0;      // compute tier, blocks
  int32_t used = 0;
  int32_t shared = 0;        // used compute blocks with more than one owner
  int64_t bytesPerBlock = 0; // K and V of every layer
  int32_t hostCapacity = 0;
  int32_t hostUsed = 0;
  int64_t blocksToHost = 0, blocksToCompute = 0;  // moved since create()
  int64_t bytesToHost = 0, bytesToCompute = 0;
  int64_t reclaimedBlocks = 0;  // compute blocks the reclaimer freed inside allocate()
};

class KvPool {
public:
  // InvalidArgument for a shape or a tier below one block (naming the parameter and the fix),
  // or storage the machine cannot allocate.
  static Result<std::unique_ptr<KvPool>> create(const KvPoolParams& params);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // ---- compute tier ----
  // `n` compute blocks with reference count 1, or nullopt (nothing taken) when even after the
  // reclaimer has run the tier cannot supply them.
  std::optional<std::vector<int32_t>> allocate(int32_t n);
  std::optional<int32_t> allocateOne();
  // True when `n` blocks are free, calling the reclaimer for the shortfall if they are not.
  bool ensureFree(int32_t n);
  void retain(int32_t block);
  bool release(int32_t block);  // true: the block went back to the free list
  void release(std::span<const int32_t> blocks);
  int32_t refCount(int32_t block) const { return m_compute.refCount(block); }
  int32_t freeBlocks() const { return m_compute.freeBlocks(); }
  int32_t capacity() const { return m_compute.capacity(); }
  // Copies block `from`'s K/V of every layer into `to` (copy-on-write of a shared block).
  void copyBlock(int32_t from, int32_t to);
  // K and V rows of one layer at compute slots `slots`, to or from host memory ([slots.size(),
  // row] each; rowBytes() per row). InvalidArgument for a layer or slot outside the pool; the
  // store's error when it fails.
  Status readRows(int32_t layer, std::span<const int64_t> slots, void* keys, void* values) const;
  Status writeRows(int32_t layer, std::span<const int64_t> slots, const void* keys, const void* values);
  // ok, or the first failure of the compute store in a call that returns no Status (copyBlock,
  // the tier moves); it stays until the pool is gone.
  const Status& storeStatus() const { return m_storeStatus; }

  // Frees compute blocks on demand; returns how many it freed. Called by allocate()/ensureFree()
  // with the shortfall, never re-entered (a reclaimer may allocate host blocks, not compute ones).
  using Reclaimer = std::function<int32_t(int32_t shortfall)>;
  void setReclaimer(Reclaimer r) { m_reclaimer = std::move(r); }

  // ---- host tier ----
  bool hasHostTier() const { return m_host.capacity() > 0; }
  int32_t hostFreeBlocks() const { return m_host.freeBlocks(); }
  int32_t hostCapacity() const { return m_host.capacity(); }
  void releaseHost(std::span<const int32_t> hostBlocks);

  // ---- moves between tiers (all or nothing; the source blocks keep their references) ----
  // Copies compute blocks into new host blocks (refcount 1); nullopt when the host tier lacks room.
  std::optional<std::vector<int32_t>> copyToHost(std::span<const int32_t> computeBlocks);
  // Copies host blocks into new compute blocks (refcount 1), allocating (and so reclaiming) as
  // allocate() does; nullopt when the compute tier cannot supply them.
  std::optional<std::vector<int32_t>> copyToCompute(std::span<const int32_t> hostBlocks);

  // ---- storage ----
  // The compute tier's host memory, [capacity * blockSize, kvHeads, headDim] per layer; null
  // when a KvComputeStore holds it.
  void* keys(int32_t layer);
  void* values(int32_t layer);
  const void* keys(int32_t layer) const;
  const void* values(int32_t layer) const;
  const void* hostKeys(int32_t layer) const;
  const void* hostValues(int32_t layer) const;

  const KvPoolParams& params() const { return m_params; }
  int64_t bytesPerBlock() const { return m_bytesPerBlock; }
  int64_t rowBytes() const { return m_rowBytes; }
  KvPoolStats stats() const;

private:
  explicit KvPool(const KvPoolParams& params);
  struct Buffer {
    std::byte* data = nullptr;
    size_t bytes = 0;
  };
  void copyBetween(const std::vector<Buffer>& from, int32_t fromBlock, std::vector<Buffer>& to, int32_t toBlock);
  void traceMove(uint64_t beginNs, size_t blocks, uint32_t direction) const;
  enum class Direction { ToHost, ToCompute };
  // Copies K/V of blocks `from` into `to` across the tiers, counts and traces the move.
  void copyAcross(Direction d, std::span<const int32_t> from, std::span<const int32_t> to, uint64_t beginNs);
  void keep(Status s);  // the first failure of the compute store
  Status checkRows(int32_t layer, std::span<const int64_t> slots) const;

  KvPoolParams m_params;
  int64_t m_rowBytes = 0;         // one token of one layer, K or V
  int64_t m_blockBytesLayer = 0;  // one block of one layer, K or V
  int64_t m_bytesPerBlock = 0;
  BlockAllocator m_compute{0};
  BlockAllocator m_host{0};
  // Per layer: keys then values, each one contiguous buffer per tier.
  std::vector<Buffer> m_computeK, m_computeV, m_hostK, m_hostV;
  Reclaimer m_reclaimer;
  bool m_reclaiming = false;
  uint16_t m_lane = 0;
  KvPoolStats m_moves;  // the counters of stats() that are not read off the allocators
  Status m_storeStatus;
};

}  // namespace rag::memory
