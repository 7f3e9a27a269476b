// Knowledge-graph retrieval for GraphRAG (DepCache §2.1 and §6.1): from a question to the
// subgraphs a dependency prompt holds.
//
//   1. Entity linking: the question's word n-grams (longest first, not overlapping) matched
//      against entity names; a lemma stands for the synsets it is a lemma of (`lemma_of`); among
//      the candidates of one n-gram the embedder chooses (cosine of the question with the
//      candidate's passage). Single words that are question words or function words never link.
//   2. Related entities: the entities of the passages a passage search returns for the question,
//      until `subgraphs` entities are chosen (the paper's evaluation uses 5).
//   3. For each entity, its L-hop subgraph (out-edges, breadth first, at most `fanout` edges
//      followed per node, cycles cut: no entity twice on a path), written as root-to-leaf paths.
//   4. Pruning: every path scored by cos(embed(path text), embed(question)); the top `topK` kept
//      (the paper's K = 30), then put in canonical order (by entity and relation ids along the
//      path) so that the same kept set always gives the same prefix tree.
//
//   KgRetriever r(kg, embed, search, passageText);
//   RAG_ASSIGN_OR_RETURN(KgResult res, r.retrieve("What is a dog a kind of?", {}));
//
// The embedder, the passage search and the passage reader come in as functions, so this file
// needs neither libtorch nor an index (tests pass fakes). Not thread-safe (the path-embedding
// cache): one retriever per worker thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "knowledge/knowledge_graph.h"
#include "model/dep_prompt.h"
#include "rag/status.h"

namespace rag::knowledge {

struct KgParams {
  int32_t subgraphs = 5;           // entities (one subgraph each)
  int32_t hops = 2;                // L
  int32_t fanout = 8;              // out-edges followed per node
  int32_t topK = 30;               // paths kept per subgraph
  int32_t candidatePassages = 10;  // passages searched for related entities
  Status validate() const;         // InvalidArgument naming the bad field
};

struct KgPath {
  std::vector<EntityId> entities;   // root first
  std::vector<int32_t> relations;   // relations[i]: entities[i] -> entities[i + 1]
  double score = 0;                 // cosine with the question
  bool kept = false;
};

// How an entity came to be chosen.
enum class LinkSource : uint8_t { Name, Passage };

struct LinkedEntity {
  EntityId entity = 0;
  LinkSource source = LinkSource::Name;
  std::string matched;  // the n-gram (Name) or the passage id (Passage)
  double score = 0;     // cosine of the question with the entity's passage
};

struct Subgraph {
  LinkedEntity link;
  std::vector<KgPath> paths;   // kept paths in canonical order, then the pruned ones by score
  int64_t cutEdges = 0;        // out-edges the fan-out cap skipped
};

struct KgResult {
  std::vector<Subgraph> subgraphs;
  std::vector<LinkedEntity> nameCandidates;  // every entity an n-gram matched, chosen or not
  std::string note;  // e.g. "no entity of the knowledge graph is named in the question"
  int64_t embeddedTexts = 0;  // embedder calls' texts (path-cache misses included)
};

// The elements a dependency prompt tokenizes: the root's name, then " relation entity" per hop
// (relation names with '_' read as spaces).
std::vector<std::string> pathElements(const KnowledgeGraph& kg, const KgPath& path);
std::string pathText(const KnowledgeGraph& kg, const KgPath& path);
// The kept paths of each subgraph as a prompt's graph variable holds them.
std::vector<model::SubgraphText> subgraphTexts(const KnowledgeGraph& kg, std::span<const Subgraph> subgraphs);

class KgRetriever {
public:
  // Unit vectors, row-major, one per text.
  using EmbedFn = std::function<Result<std::vector<float>>(std::span<const std::string>)>;
  // Passage ids for a query, best first.
  using SearchFn = std::function<Result<std::vector<int64_t>>(std::string_view, int32_t)>;
  using PassageTextFn = std::function<Result<std::string>(int64_t)>;

  KgRetriever(std::shared_ptr<const KnowledgeGraph> kg, EmbedFn embed, SearchFn search, PassageTextFn passageText,
              size_t pathCacheEntries = 50'000);

  Result<KgResult> retrieve(std::string_view question, const KgParams& params);
  // Step 1 alone.
  Result<std::vector<LinkedEntity>> link(std::string_view question, std::span<const float> questionVector);
  // Step 3 alone (unscored, unpruned).
  std::vector<KgPath> expand(EntityId root, int32_t hops, int32_t fanout, int64_t* cutEdges = nullptr) const;

  const KnowledgeGraph& graph() const { return *m_kg; }

private:
  Result<std::vector<float>> embedCached(std::span<const std::string> texts, int64_t* embedded);

  std::shared_ptr<const KnowledgeGraph> m_kg;
  EmbedFn m_embed;
  SearchFn m_search;
  PassageTextFn m_passageText;
  size_t m_cacheEntries;
  std::unordered_map<std::string, std::vector<float>> m_cache;  // text -> unit vector
  int32_t m_lemmaOf = -1;
};

}  // namespace rag::knowledge
