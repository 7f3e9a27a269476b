#include "memory/block_allocator.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace rag::memory {

BlockAllocator::BlockAllocator(int32_t numBlocks) : m_refs(static_cast<size_t>(numBlocks), 0) {
  m_free.reserve(static_cast<size_t>(numBlocks));
  for (int32_t b = numBlocks - 1; b >= 0; --b) m_free.push_back(b);  // block 0 is handed out first
}

std::optional<int32_t> BlockAllocator::allocate() {
  if (m_free.empty()) return std::nullopt;
  const int32_t b = m_free.back();
  m_free.pop_back();
  m_refs[static_cast<size_t>(b)] = 1;
  return b;
}

std::optional<std::vector<int32_t>> BlockAllocator::allocate(int32_t n) {
  if (n > freeBlocks()) return std::nullopt;
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) out.push_back(*allocate());
  return out;
}

void BlockAllocator::retain(int32_t block) {
  // A retain of a free block is a bookkeeping bug in the caller: fail loudly, never corrupt.
  if (m_refs.at(static_cast<size_t>(block)) <= 0)
    throw std::logic_error("KV block " + std::to_string(block) + " retained while free");
  ++m_refs[static_cast<size_t>(block)];
}

bool BlockAllocator::release(int32_t block) {
  int32_t& r = m_refs.at(static_cast<size_t>(block));
  if (r <= 0) throw std::logic_error("KV block " + std::to_string(block) + " released while free");
  if (--r > 0) return false;
  m_free.push_back(block);
  return true;
}

void BlockAllocator::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) release(b);
}

int32_t BlockAllocator::sharedBlocks() const {
  return static_cast<int32_t>(std::count_if(m_refs.begin(), m_refs.end(), [](int32_t r) { return r > 1; }));
}

}  // namespace rag::memory
