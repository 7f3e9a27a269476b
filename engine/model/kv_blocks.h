// Bookkeeping of the paged KV pool: which fixed-size blocks are free, and how many owners
// (sequences, prefix caches, exported handles) each used block has. Torch-free; the runner
// keeps the tensors, this keeps the accounting, so it can be tested and inspected alone.
//
//   KvBlockAllocator a(1024);
//   std::optional<int32_t> b = a.allocate();  // refcount 1
//   a.retain(*b);                             // shared by a second owner
//   a.release(*b); a.release(*b);             // back on the free list
//
// Not thread-safe: the runner's thread owns it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace rag::model {

class KvBlockAllocator {
public:
  explicit KvBlockAllocator(int32_t numBlocks);

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

}  // namespace rag::model
