// Bookkeeping of one tier of the paged KV pool (memory/kv_pool.h): which fixed-size blocks are
// free, and how many owners (sequences, the prefix cache, exported handles) each used block has.
// The pool keeps the K/V storage, this keeps the accounting, so it can be tested alone.
//
//   BlockAllocator a(1024);
//   std::optional<int32_t> b = a.allocate();  // refcount 1
//   a.retain(*b);                             // shared by a second owner
//   a.release(*b); a.release(*b);             // back on the free list
//
// Not thread-safe: the thread that drives the pool owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace rag::memory {

class BlockAllocator {
public:
  explicit BlockAllocator(int32_t numBlocks);

  // A free block with reference count 1, or nullopt when the pool is exhausted. Blocks are
  // reused most-recently-freed first (warm in cache).
  std::optional<int32_t> allocate();
  // Allocates `n` blocks or none at all.
  std::optional<std::vector<int32_t>> allocate(int32_t n);
  void retain(int32_t block);
  // Drops one reference; returns true when the block went back to the free list.
  bool release(int32_t block);
  void release(std::span<const int32_t> blocks);

  int32_t refCount(int32_t block) const { return m_refs[static_cast<size_t>(block)]; }
  int32_t capacity() const { return static_cast<int32_t>(m_refs.size()); }
  int32_t freeBlocks() const { return static_cast<int32_t>(m_free.size()); }
  int32_t usedBlocks() const { return capacity() - freeBlocks(); }
  // Used blocks with more than one owner.
  int32_t sharedBlocks() const;

private:
  std::vector<int32_t> m_refs;
  std::vector<int32_t> m_free;  // a stack
};

}  // namespace rag::memory
