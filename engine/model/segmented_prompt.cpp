#include "model/segmented_prompt.h"

namespace rag::model {

DepTree chainTree(std::vector<int32_t> tokens) {
  DepTree t;
  t.parents.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) t.parents[i] = static_cast<int32_t>(i) - 1;
  t.tokens = std::move(tokens);
  return t;
}

std::vector<int32_t> structuralKeys(const DepTree& tree, int32_t vocab) {
  std::vector<int32_t> keys(tree.tokens.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t dist = tree.parents[i] < 0 ? 0 : static_cast<int64_t>(i) - tree.parents[i];
    keys[i] = static_cast<int32_t>(tree.tokens[i] + static_cast<int64_t>(vocab) * dist);
  }
  return keys;
}

int64_t SegmentedPrompt::contextTokens() const {
  int64_t n = 0;
  for (const ContextSegment& s : segments) n += static_cast<int64_t>(s.tree.tokens.size());
  return n;
}

std::vector<int32_t> SegmentedPrompt::tokens() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(contextTokens()) + tail.size());
  for (const ContextSegment& s : segments) out.insert(out.end(), s.tree.tokens.begin(), s.tree.tokens.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

std::vector<int32_t> SegmentedPrompt::parents() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(contextTokens()));
  for (const ContextSegment& s : segments) {
    const auto offset = static_cast<int32_t>(out.size());
    for (int32_t p : s.tree.parents) out.push_back(p < 0 ? -1 : p + offset);
  }
  return out;
}

std::vector<int64_t> SegmentedPrompt::segmentOffsets() const {
  std::vector<int64_t> out;
  int64_t at = 0;
  for (const ContextSegment& s : segments) {
    out.push_back(at);
    at += static_cast<int64_t>(s.tree.tokens.size());
  }
  return out;
}

AttentionMask SegmentedPrompt::mask() const {
  if (attention == SegmentAttention::Dependency) return AttentionMask::ancestors(parents());
  std::vector<int32_t> starts;
  for (int64_t o : segmentOffsets()) starts.push_back(static_cast<int32_t>(o));
  starts.push_back(static_cast<int32_t>(contextTokens()));
  return AttentionMask::blocks(std::move(starts));
}

std::optional<SegmentedPrompt> blockPrompt(std::span<const int32_t> tokens, std::span<const int32_t> blockStarts,
                                           std::span<const int64_t> passageIds) {
  if (blockStarts.size() < 2 || blockStarts.back() >= static_cast<int32_t>(tokens.size())) return std::nullopt;
  SegmentedPrompt out;
  out.attention = SegmentAttention::Block;
  out.flatTokens = static_cast<int64_t>(tokens.size());
  for (size_t i = 0; i + 1 < blockStarts.size(); ++i) {
    ContextSegment c;
    c.tree = chainTree(std::vector<int32_t>(tokens.begin() + blockStarts[i], tokens.begin() + blockStarts[i + 1]));
    c.passageId = i < passageIds.size() ? passageIds[i] : -1;
    out.segments.push_back(std::move(c));
  }
  out.tail.assign(tokens.begin() + blockStarts.back(), tokens.end());
  return out;
}

std::optional<SegmentedPrompt> blockPrompt(const PromptTokens& p) {
  size_t lastPassage = p.segments.size();
  for (size_t i = 0; i < p.segments.size(); ++i)
    if (p.segments[i].origin == SegmentOrigin::Passage) lastPassage = i;
  if (lastPassage == p.segments.size()) return std::nullopt;
  std::vector<int32_t> starts;
  std::vector<int64_t> ids;
  for (size_t i = 0; i <= lastPassage; ++i) {
    starts.push_back(p.segments[i].begin);
    ids.push_back(p.segments[i].origin == SegmentOrigin::Passage ? p.segments[i].passageId : -1);
  }
  starts.push_back(p.segments[lastPassage].end);
  return blockPrompt(p.tokens, starts, ids);
}

}  // namespace rag::model
