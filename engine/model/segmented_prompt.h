// Segmented prompts: a prompt whose context is independent segments, each computed as if it
// stood alone at position 0, followed by a tail (the question) that sees everything. Two
// systems make them, and one KV path serves both (sched/segment_kv.h):
//
//   DepCache (model/dep_prompt.h)   a segment is the prefix tree of one subgraph's relation
//                                   paths; a token sees its ancestors (the ancestor mask).
//   Block-Attention (blockPrompt)   a segment is one block (a retrieved passage, or template text
//                                   before the last passage), a chain; a token sees the earlier
//                                   tokens of its block (the block mask, §2.1 of the paper).
//
// Because no segment sees anything before it, its KV depends only on its own tokens and
// structure: it can be computed once, cached, and placed at any offset by re-encoding its keys'
// RoPE positions (Block-Attention Eq. 1-3, DepCache's GKVR).
//
//   PromptTokens p = tokenizePieces(tok, pieces);          // passages keep their ids
//   std::optional<SegmentedPrompt> b = blockPrompt(p);     // nullopt: no passage in the prompt
//   q.prompt = b->tokens(); q.mask = b->mask();            // the block mask over the whole prompt
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/attention_mask.h"
#include "model/prompt.h"

namespace rag::model {

// A tree of tokens laid out in pre-order: each token's parent is an earlier token (or none).
struct DepTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;  // index of each token's parent in `tokens`; -1 for a root
};
// A chain: every token's parent is the one before it (a block of text).
DepTree chainTree(std::vector<int32_t> tokens);
// What a prefix cache keys a tree by: one id per token that encodes the token and the distance to
// its parent (token + vocab · (i − parent), 0 distance for a root), so that two trees with equal
// key prefixes have equal token prefixes *and* equal structure there, hence equal KV.
std::vector<int32_t> structuralKeys(const DepTree& tree, int32_t vocab);

struct ContextSegment {
  DepTree tree;
  int64_t subgraphRoot = -1;  // DepCache: the subgraph's entity; -1 otherwise
  int64_t passageId = -1;     // Block-Attention: the passage this block holds; -1 for template text
};

enum class SegmentAttention : uint8_t {
  Dependency,  // segments are trees under the ancestor mask (DepCache)
  Block,       // segments are chains under the block mask (Block-Attention)
};

struct SegmentedPrompt {
  SegmentAttention attention = SegmentAttention::Dependency;
  std::vector<ContextSegment> segments;  // each sees only itself
  std::vector<int32_t> tail;             // sees everything before it
  int64_t flatTokens = 0;                // what the flat (causal) rendering of the same prompt costs

  int64_t contextTokens() const;         // tokens of the segments
  std::vector<int32_t> tokens() const;   // segments then tail
  std::vector<int32_t> parents() const;  // the segments' parents, offset into tokens()
  // Ancestors (Dependency) or blocks at the segments' offsets and the tail's (Block): the same
  // visibility for a chain, but the block mask is the one the runner computes fastest.
  AttentionMask mask() const;
  std::vector<int64_t> segmentOffsets() const;
};

// The Block-Attention prompt of `p`: every segment up to the last passage is a block of its own,
// the rest (the question and the template text after the passages) is the tail. nullopt when
// `p` holds no passage, or nothing follows the last one (no last block to compute).
std::optional<SegmentedPrompt> blockPrompt(const PromptTokens& p);
// The same over `tokens` cut at `blockStarts` (ascending, [0] = 0; a QA prompt's, QaTokens):
// every block but the last is a segment, block i holding passageIds[i] when given. nullopt for
// fewer than two blocks.
std::optional<SegmentedPrompt> blockPrompt(std::span<const int32_t> tokens, std::span<const int32_t> blockStarts,
                                           std::span<const int64_t> passageIds = {});

}  // namespace rag::model
