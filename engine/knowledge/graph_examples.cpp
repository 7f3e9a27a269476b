#include "knowledge/graph_examples.h"

#include <algorithm>

#include "core/json.h"
#include "core/random.h"
#include "corpus/corpus_db.h"
#include "model/prompt.h"

namespace rag::knowledge {

GraphExampleSource::GraphExampleSource(std::shared_ptr<const KnowledgeGraph> kg, model::Tokenizer tokenizer,
                                       GraphExampleOptions options, std::vector<Item> items)
    : m_kg(kg),
      m_tokenizer(std::move(tokenizer)),
      m_options(std::move(options)),
      m_items(std::move(items)),
      m_elements(m_tokenizer),
      m_expander(kg, nullptr, nullptr, nullptr) {}

Result<std::unique_ptr<GraphExampleSource>> GraphExampleSource::open(const std::filesystem::path& corpus,
                                                                     const model::Tokenizer& tokenizer,
                                                                     const GraphExampleOptions& options) {
  if (options.mask != model::MaskKind::Ancestor && options.mask != model::MaskKind::Causal)
    return Status::invalidArgument("graph data trains under the ancestor mask (dependency trees) or causal (flat paths)");
  if (options.subgraphs < 1 || options.paths < 1 || options.fanout < 1)
    return Status::invalidArgument("graph examples need at least one subgraph, one path and a fan-out of one");
  RAG_ASSIGN_OR_RETURN(std::shared_ptr<const KnowledgeGraph> kg, KnowledgeGraph::load(corpus));
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(corpus));
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT question, answers, kg_path FROM qa WHERE split = ? AND "
                                                "type IN ('single_hop', 'two_hop') ORDER BY id"));
  st.bind(1, options.split);
  std::vector<Item> items;
  while (true) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    Result<JsonValue> answers = parseJson(st.columnTextView(1));
    Result<JsonValue> path = parseJson(st.columnTextView(2));
    if (!answers || !path || !answers->isArray() || answers->asArray().empty() || !path->isArray()) continue;
    Item it;
    it.question = st.columnText(0);
    it.answer = answers->asArray()[0].isString() ? answers->asArray()[0].asString() : std::string();
    const JsonValue::Array& p = path->asArray();
    bool ok = !it.answer.empty() && p.size() >= 3 && p.size() % 2 == 1;
    for (size_t i = 0; ok && i < p.size(); ++i) {
      if (i % 2 == 0) {
        const std::optional<int64_t> e = p[i].asInt64();
        ok = p[i].isNumber() && e && kg->contains(static_cast<EntityId>(*e));
        if (ok) it.entities.push_back(static_cast<EntityId>(*e));
      } else {
        ok = p[i].isString() && kg->relationId(p[i].asString()) >= 0;
        if (ok) it.relations.push_back(p[i].asString());
      }
    }
    if (ok) items.push_back(std::move(it));
  }
  if (items.empty())
    return Status::notFound("the " + options.split + " split of " + corpus.string() +
                            " has no single-hop or two-hop questions with a knowledge-graph path; rebuild the corpus");
  return std::unique_ptr<GraphExampleSource>(new GraphExampleSource(std::move(kg), tokenizer, options, std::move(items)));
}

Result<model::TrainingExample> GraphExampleSource::example(uint64_t seed, int64_t step, int64_t index, int64_t maxTokens) {
  Rng rng(deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(index)));
  const Item& item = m_items[rng.below(m_items.size())];
  KgPath gold;
  gold.entities = item.entities;
  for (const std::string& r : item.relations) gold.relations.push_back(m_kg->relationId(r));
  gold.kept = true;
  // The topic's subgraph and the distractors' (other questions' topics), as path sets.
  std::vector<std::pair<EntityId, std::vector<KgPath>>> all;
  all.push_back({gold.entities.front(), m_expander.expand(gold.entities.front(), 2, m_options.fanout)});
  for (int32_t s = 1; s < m_options.subgraphs; ++s) {
    const EntityId e = m_items[rng.below(m_items.size())].entities.front();
    if (e == gold.entities.front()) continue;
    all.push_back({e, m_expander.expand(e, 2, m_options.fanout)});
  }
  for (auto& [root, paths] : all) rng.shuffle(paths);
  rng.shuffle(all);
  const std::string completion = " " + item.answer;
  std::vector<int32_t> answer = m_tokenizer.encode(completion, {.parseSpecial = false});
  if (auto eos = m_tokenizer.eosId()) answer.push_back(*eos);

  for (int32_t k = m_options.paths; k >= 1; k /= 2) {
    model::GraphVariables graphs;
    std::vector<model::SubgraphText>& subgraphs = graphs["graph"];
    for (const auto& [root, paths] : all) {
      std::vector<KgPath> kept;
      const bool hasGold = root == gold.entities.front();
      if (hasGold) kept.push_back(gold);
      for (const KgPath& p : paths) {
        if (static_cast<int32_t>(kept.size()) >= k) break;
        if (hasGold && p.entities == gold.entities && p.relations == gold.relations) continue;
        kept.push_back(p);
      }
      std::stable_sort(kept.begin(), kept.end(), canonicalLess);
      model::SubgraphText t{.root = root, .paths = {}};
      for (const KgPath& p : kept) t.paths.push_back(pathElements(*m_kg, p));
      subgraphs.push_back(std::move(t));
    }
    Variables vars{{"question", item.question}, {"graph", model::flatGraphText(subgraphs)}};
    model::TrainingExample ex;
    if (m_options.mask == model::MaskKind::Ancestor) {
      RAG_ASSIGN_OR_RETURN(std::optional<model::SegmentedPrompt> dep,
                           model::dependencyPrompt(m_elements, m_options.promptTemplate, vars, graphs));
      if (!dep) return Status::invalidArgument("the graph example template has no {graph} variable");
      ex.tokens = dep->tokens();
      ex.mask = dep->mask();
    } else {
      RAG_ASSIGN_OR_RETURN(std::vector<model::PromptPiece> pieces, model::promptPieces(m_options.promptTemplate, vars, {}));
      ex.tokens = model::tokenizePieces(m_tokenizer, pieces).tokens;
    }
    const size_t promptLength = ex.tokens.size();
    if (static_cast<int64_t>(promptLength + answer.size()) > maxTokens && k > 1) continue;
    ex.tokens.insert(ex.tokens.end(), answer.begin(), answer.end());
    if (static_cast<int64_t>(ex.tokens.size()) > maxTokens)
      return Status::invalidArgument("a graph example does not fit " + std::to_string(maxTokens) +
                                     " tokens even with one path per subgraph; raise --seq-len");
    ex.lossWeights.assign(ex.tokens.size(), m_options.promptLossWeight);
    for (size_t t = promptLength; t < ex.tokens.size(); ++t) ex.lossWeights[t] = 1.0f;
    return ex;
  }
  return Status::internal("no path budget fits");
}

}  // namespace rag::knowledge
