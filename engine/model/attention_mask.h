// Which earlier tokens each token of a sequence may attend to. One description serves the
// paged runner, the dense reference and the training loop, so the three cannot disagree.
//
//   Causal    token i sees tokens 0..i.
//   Block     Block-Attention (§2): the prompt is cut into blocks at `blockStarts` (ascending,
//             the first is 0). A token of any block but the last sees only the tokens of its own
//             block up to itself; a token of the last block, and every token after the prompt
//             (generated ones), sees everything before it.
//   Ancestor  DepCache's dependency attention: `parents[i]` is the position of token i's parent
//             (< i) or -1 for a root; token i sees itself and its ancestors. Tokens at positions
//             >= parents.size() (the question and generated tokens) see everything before them.
//
//   AttentionMask m = AttentionMask::blocks({0, 40, 80, 120});
//   RAG_RETURN_IF_ERROR(m.validate(promptLength));
//   std::vector<uint8_t> row(i + 1); m.fillRow(i, row);  // row[j] = 1 when i may see j
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "rag/status.h"

namespace rag::model {

enum class MaskKind : uint8_t { Causal, Block, Ancestor };

struct AttentionMask {
  MaskKind kind = MaskKind::Causal;
  std::vector<int32_t> blockStarts;  // Block only
  std::vector<int32_t> parents;      // Ancestor only

  static AttentionMask causal() { return {}; }
  static AttentionMask blocks(std::vector<int32_t> starts) {
    return {MaskKind::Block, std::move(starts), {}};
  }
  static AttentionMask ancestors(std::vector<int32_t> parentOf) {
    return {MaskKind::Ancestor, {}, std::move(parentOf)};
  }

  // InvalidArgument naming the first problem: block starts not ascending, not starting at 0 or
  // beyond the prompt; a parent that is not an earlier position; a parent array longer than
  // the prompt.
  Status validate(int64_t promptLength) const;

  // True when every token sees every earlier token (causal, or one block, or no parents).
  bool isCausal() const;

  // row[j] for j in [0, i]: 1 when token i may attend to token j (row.size() >= i + 1).
  void fillRow(int64_t i, std::span<uint8_t> row) const;

  // The n x n matrix of fillRow rows, row-major, zero above the diagonal.
  std::vector<uint8_t> dense(int64_t n) const;
};

}  // namespace rag::model
