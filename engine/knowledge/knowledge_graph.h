// The corpus's knowledge graph in memory, for GraphRAG (DepCache §2): WordNet synsets, lemmas
// and FOLDOC terms as entities, their typed relations as out-edges in CSR form, and the name
// index that entity linking matches questions against. Read once from the corpus SQLite file
// (entities, relations, passages tables; corpus/corpus_schema.h); immutable afterwards, so any
// number of threads may read one graph.
//
//   RAG_ASSIGN_OR_RETURN(auto kg, KnowledgeGraph::load(corpusPath));
//   for (const KgEdge& e : kg->outEdges(id)) ... kg->relationName(e.relation) ... kg->name(e.dst)
//
// Ids are the corpus's entity ids (dense from 1); 0 is never an entity.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rag/status.h"

namespace rag::knowledge {

using EntityId = int32_t;

enum class EntityKind : uint8_t { Synset, Lemma, Term };

struct KgEdge {
  int32_t relation = 0;  // index into relationNames()
  EntityId dst = 0;
};

struct KgStats {
  int64_t entities = 0;
  int64_t edges = 0;
  int64_t names = 0;  // distinct lower-cased names in the linking index
};

class KnowledgeGraph {
public:
  // FailedPrecondition naming the fix ("ragraph corpus build") when the file is missing or not
  // a corpus; the corpus's own schema check otherwise.
  static Result<std::shared_ptr<const KnowledgeGraph>> load(const std::filesystem::path& corpus);
  // A graph from parts, for tests: entities 1..names.size(), edges as (src, relation, dst).
  struct EdgeSpec {
    EntityId src;
    std::string relation;
    EntityId dst;
  };
  static std::shared_ptr<const KnowledgeGraph> fromParts(std::vector<std::string> names, std::vector<EntityKind> kinds,
                                                         std::span<const EdgeSpec> edges,
                                                         std::vector<EntityId> passageEntity = {});

  bool contains(EntityId id) const { return id >= 1 && static_cast<size_t>(id) < m_kind.size(); }
  std::string_view name(EntityId id) const;
  EntityKind kind(EntityId id) const { return m_kind[static_cast<size_t>(id)]; }
  std::span<const KgEdge> outEdges(EntityId id) const;
  const std::vector<std::string>& relationNames() const { return m_relations; }
  std::string_view relationName(int32_t r) const { return m_relations[static_cast<size_t>(r)]; }
  // -1 when the graph has no relation of that name.
  int32_t relationId(std::string_view name) const;

  // Entities whose lower-cased name is exactly `lowerName` (lemmas, synsets and terms alike).
  std::span<const EntityId> byName(std::string_view lowerName) const;
  // The longest name in words (entity linking tries n-grams up to this long).
  int32_t maxNameWords() const { return m_maxNameWords; }

  // The entity a passage describes (its synset or term); 0 for an unknown passage id.
  EntityId passageEntity(int64_t passageId) const;
  // The first passage describing `id` (its gloss); -1 when none does.
  int64_t entityPassage(EntityId id) const;

  KgStats stats() const;

private:
  KnowledgeGraph() = default;
  struct Row {
    EntityId src;
    int32_t rel;
    EntityId dst;
  };
  int32_t internRelation(std::string_view name);  // its index in m_relations, added when new
  void setEdges(std::vector<Row> rows);           // the CSR over entities 1..m_kind.size() - 1
  void buildIndexes();

  std::vector<EntityKind> m_kind;        // by id; [0] unused
  std::vector<uint32_t> m_nameOffset;    // by id, into m_names; size entities + 2
  std::string m_names;
  std::vector<uint32_t> m_edgeOffset;    // CSR by src; size entities + 2
  std::vector<KgEdge> m_edges;
  std::vector<std::string> m_relations;
  std::unordered_map<std::string, std::vector<EntityId>> m_byName;
  std::vector<EntityId> m_passageEntity;  // by passage id
  std::vector<int64_t> m_entityPassage;   // by entity id
  int32_t m_maxNameWords = 1;
};

// Lower-case ASCII words of a text (letters, digits, '-', '\'', '.' inside a word), the unit
// entity linking matches on. "What is a hot-dog's part?" -> what, is, a, hot-dog's, part.
std::vector<std::string> linkWords(std::string_view text);

}  // namespace rag::knowledge
