#include "model/attention_mask.h"

#include <algorithm>
#include <string>

namespace rag::model {

Status AttentionMask::validate(int64_t promptLength) const {
  switch (kind) {
    case MaskKind::Causal:
      return Status::ok();
    case MaskKind::Block:
      if (blockStarts.empty() || blockStarts[0] != 0)
        return Status::invalidArgument("block mask: the first block must start at position 0");
      for (size_t b = 1; b < blockStarts.size(); ++b) {
        if (blockStarts[b] <= blockStarts[b - 1])
          return Status::invalidArgument("block mask: block start " + std::to_string(blockStarts[b]) +
                                         " is not after the previous one (" +
                                         std::to_string(blockStarts[b - 1]) + ")");
      }
      if (blockStarts.back() >= promptLength)
        return Status::invalidArgument("block mask: block start " + std::to_string(blockStarts.back()) +
                                       " is beyond the prompt of " + std::to_string(promptLength) +
                                       " tokens");
      return Status::ok();
    case MaskKind::Ancestor:
      if (static_cast<int64_t>(parents.size()) > promptLength)
        return Status::invalidArgument("ancestor mask: " + std::to_string(parents.size()) +
                                       " parents given for a prompt of " +
                                       std::to_string(promptLength) + " tokens");
      for (size_t i = 0; i < parents.size(); ++i) {
        if (parents[i] < -1 || parents[i] >= static_cast<int32_t>(i))
          return Status::invalidArgument("ancestor mask: the parent of position " + std::to_string(i) +
                                         " is " + std::to_string(parents[i]) +
                                         "; it must be an earlier position or -1 for a root");
      }
      return Status::ok();
  }
  return Status::invalidArgument("unknown mask kind");
}

bool AttentionMask::isCausal() const {
  switch (kind) {
    case MaskKind::Causal: return true;
    case MaskKind::Block: return blockStarts.size() <= 1;
    case MaskKind::Ancestor: return parents.empty();
  }
  return true;
}

void AttentionMask::fillRow(int64_t i, std::span<uint8_t> row) const {
  const auto n = static_cast<size_t>(i + 1);
  if (kind == MaskKind::Block && blockStarts.size() > 1 && i < blockStarts.back()) {
    // The block holding i: the last start <= i.
    const auto it = std::upper_bound(blockStarts.begin(), blockStarts.end(), static_cast<int32_t>(i));
    const int64_t start = *(it - 1);
    std::fill(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(start), uint8_t{0});
    std::fill(row.begin() + static_cast<std::ptrdiff_t>(start), row.begin() + static_cast<std::ptrdiff_t>(n), uint8_t{1});
    return;
  }
  if (kind == MaskKind::Ancestor && i < static_cast<int64_t>(parents.size())) {
    std::fill(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(n), uint8_t{0});
    for (int64_t j = i; j >= 0; j = parents[static_cast<size_t>(j)]) row[static_cast<size_t>(j)] = 1;
    return;
  }
  std::fill(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(n), uint8_t{1});
}

std::vector<uint8_t> AttentionMask::dense(int64_t n) const {
  std::vector<uint8_t> out(static_cast<size_t>(n * n), 0);
  for (int64_t i = 0; i < n; ++i)
    fillRow(i, std::span<uint8_t>(out).subspan(static_cast<size_t>(i * n), static_cast<size_t>(n)));
  return out;
}

}  // namespace rag::model
