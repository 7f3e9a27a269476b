#include "model/dep_prompt.h"

namespace rag::model {

namespace {

constexpr std::string_view kPathEnd = "\n";

}  // namespace

std::string flatGraphText(std::span<const SubgraphText> subgraphs) {
  std::string out;
  for (const SubgraphText& g : subgraphs)
    for (const std::vector<std::string>& path : g.paths) {
      for (const std::string& e : path) out += e;
      out += kPathEnd;
    }
  return out;
}

DepTree buildDepTree(std::span<const std::vector<int32_t>> sequences) {
  // A token trie; each node keeps its children in insertion order.
  struct Node {
    int32_t token = -1;
    std::vector<int32_t> children;
  };
  std::vector<Node> nodes(1);  // [0]: the virtual root
  for (const std::vector<int32_t>& seq : sequences) {
    int32_t at = 0;
    for (int32_t t : seq) {
      int32_t next = -1;
      for (int32_t c : nodes[static_cast<size_t>(at)].children)
        if (nodes[static_cast<size_t>(c)].token == t) {
          next = c;
          break;
        }
      if (next < 0) {
        next = static_cast<int32_t>(nodes.size());
        nodes.push_back({t, {}});
        nodes[static_cast<size_t>(at)].children.push_back(next);
      }
      at = next;
    }
  }
  DepTree tree;
  tree.tokens.reserve(nodes.size() - 1);
  tree.parents.reserve(nodes.size() - 1);
  // Pre-order without recursion: (node, its index in the layout).
  std::vector<std::pair<int32_t, int32_t>> stack;
  const auto& top = nodes[0].children;
  for (auto it = top.rbegin(); it != top.rend(); ++it) stack.push_back({*it, -1});
  while (!stack.empty()) {
    const auto [n, parent] = stack.back();
    stack.pop_back();
    const auto index = static_cast<int32_t>(tree.tokens.size());
    tree.tokens.push_back(nodes[static_cast<size_t>(n)].token);
    tree.parents.push_back(parent);
    const auto& ch = nodes[static_cast<size_t>(n)].children;
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) stack.push_back({*it, index});
  }
  return tree;
}

const std::vector<int32_t>& ElementTokens::operator()(const std::string& element) {
  auto it = m_cache.find(element);
  if (it != m_cache.end()) return it->second;
  if (m_cache.size() >= m_capacity) m_cache.clear();  // a bound, not a policy: elements are cheap to encode again
  return m_cache.emplace(element, m_tok.encode(element, {.parseSpecial = false})).first->second;
}

Result<std::optional<SegmentedPrompt>> dependencyPrompt(ElementTokens& tokens, std::string_view tmpl, const Variables& vars,
                                                  const GraphVariables& graphs) {
  RAG_ASSIGN_OR_RETURN(std::vector<TemplatePiece> parts, parseTemplate(tmpl));
  size_t graphAt = parts.size();
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].isVariable && graphs.count(parts[i].text)) {
      graphAt = i;
      break;
    }
  if (graphAt == parts.size()) return std::optional<SegmentedPrompt>();
  auto text = [&](size_t b, size_t e) -> Result<std::string> {
    std::string s;
    for (size_t i = b; i < e; ++i) {
      if (!parts[i].isVariable) {
        s += parts[i].text;
        continue;
      }
      auto v = vars.find(parts[i].text);
      if (v == vars.end()) return renderTemplate(tmpl, vars).status();  // names what is set
      s += v->second;
    }
    return s;
  };
  RAG_ASSIGN_OR_RETURN(std::string head, text(0, graphAt));
  RAG_ASSIGN_OR_RETURN(std::string tail, text(graphAt + 1, parts.size()));
  SegmentedPrompt p;
  const std::vector<SubgraphText>& subgraphs = graphs.find(parts[graphAt].text)->second;
  if (!head.empty()) {
    std::vector<int32_t> ids = tokens(head);
    p.flatTokens += static_cast<int64_t>(ids.size());
    if (!ids.empty()) p.segments.push_back({chainTree(std::move(ids)), -1});
  }
  const std::vector<int32_t> end = tokens(std::string(kPathEnd));  // a copy: the cache may be cleared below
  for (const SubgraphText& g : subgraphs) {
    std::vector<std::vector<int32_t>> seqs;
    for (const std::vector<std::string>& path : g.paths) {
      std::vector<int32_t> seq;
      for (const std::string& e : path) {
        const std::vector<int32_t>& ids = tokens(e);
        seq.insert(seq.end(), ids.begin(), ids.end());
      }
      seq.insert(seq.end(), end.begin(), end.end());
      p.flatTokens += static_cast<int64_t>(seq.size());
      seqs.push_back(std::move(seq));
    }
    if (seqs.empty()) continue;
    p.segments.push_back({buildDepTree(seqs), g.root});
  }
  p.tail = tokens(tail);
  p.flatTokens += static_cast<int64_t>(p.tail.size());
  if (p.tail.empty())
    return Status::invalidArgument("a knowledge-graph prompt must end with text after the graph variable {" +
                                   parts[graphAt].text + "} (the question); add it to the template");
  return std::optional<SegmentedPrompt>(std::move(p));
}

}  // namespace rag::model
