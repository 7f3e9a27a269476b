// Dependency prompts (DepCache §3, Algorithm 1): a prompt whose knowledge-graph context is laid
// out as prefix trees of its relation paths instead of flat text, with the attention mask that
// lets each token see only its ancestors.
//
// A knowledge-graph retrieval node leaves subgraphs in a variable (GraphVariables): each is the
// kept relation paths of one entity, a path being text elements, the root entity first, then one
// " relation entity" element per hop. The variable's plain text is the flat rendering (every
// path on its own line), what a causal prompt reads. A dependency prompt instead:
//   1. tokenizes every element on its own (so shared path prefixes give equal token prefixes),
//      each path ending with a newline token sequence;
//   2. inserts each path's tokens into a prefix tree (DepTree): a shared prefix is stored once;
//   3. lays the tree out in pre-order; token i's parent is the token before it on its path.
// The whole prompt is then independent segments, each seeing only itself: the template's text
// before the graph variable (a chain), one tree per subgraph (its root parentless, so its KV
// does not depend on what precedes it: the property GKVR reuse needs), then the tail (the
// question and the rest of the template), which sees everything. RoPE positions follow the
// layout.
//
//   RAG_ASSIGN_OR_RETURN(std::optional<SegmentedPrompt> p, dependencyPrompt(tok, node.promptTemplate, vars, graphs));
//   if (p) { q.prompt = p->tokens(); q.mask = p->mask(); }
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/segmented_prompt.h"
#include "model/tokenizer.h"
#include "rag/workflow.h"

namespace rag::model {

// One subgraph as a prompt holds it: the kept paths of the entity `root` (a corpus entity id),
// in the canonical order the retriever gives (so equal path sets give equal trees).
struct SubgraphText {
  int64_t root = 0;
  std::vector<std::vector<std::string>> paths;  // elements: root name, then " relation entity" per hop
};
using GraphVariables = std::map<std::string, std::vector<SubgraphText>, std::less<>>;

// What the variable's text is: every path's elements joined, one path per line.
std::string flatGraphText(std::span<const SubgraphText> subgraphs);

// A prefix tree of token sequences laid out in pre-order (children in first-insertion order).
DepTree buildDepTree(std::span<const std::vector<int32_t>> sequences);

// Tokenizes elements once each (the same element recurs across paths and requests).
class ElementTokens {
public:
  explicit ElementTokens(const Tokenizer& tokenizer, size_t capacity = 200'000)
      : m_tok(tokenizer), m_capacity(capacity) {}
  const std::vector<int32_t>& operator()(const std::string& element);

private:
  const Tokenizer& m_tok;
  size_t m_capacity;
  std::map<std::string, std::vector<int32_t>, std::less<>> m_cache;
};

// The dependency prompt of `tmpl` when it uses a graph variable (the first one it uses, whose
// subgraphs are in `graphs`); nullopt when it uses none. The template's other variables are
// text. InvalidArgument when nothing follows the graph (a prompt must end with its question), or
// for the template's own errors.
Result<std::optional<SegmentedPrompt>> dependencyPrompt(ElementTokens& tokens, std::string_view tmpl, const Variables& vars,
                                                  const GraphVariables& graphs);

}  // namespace rag::model
