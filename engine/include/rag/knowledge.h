// The knowledge graph as an inspector sees it: name completion, an entity's typed
// neighbourhood, its passages; and what a knowledge node of a served request retrieved
// (KnowledgeUse, carried by the request's StageTiming::knowledge).
//
//   rag::Result<std::shared_ptr<const rag::KnowledgeExplorer>> kg = rag::KnowledgeExplorer::open(corpus);
//   if (!kg) return show(kg.status().message());
//   for (const rag::KgNameMatch& m : (*kg)->complete("hot d", 20)) ... m.name, m.entities
//   rag::Result<std::vector<rag::KgEntity>> senses = (*kg)->find("dog");  // NotFound: no such name
//   rag::Result<rag::KgNeighbourhood> n = (*kg)->neighbourhood(senses->front().id, {.maxEdges = 60});
//   rag::Result<std::vector<rag::Passage>> ps = (*kg)->passages(senses->front().id);
//
// Threading: open() reads the whole graph (entities, relations, passage owners) and takes a
// second or two: call it off the GUI thread. The explorer is immutable afterwards except for its
// one SQLite connection (passages() and the glosses in find()), which a mutex guards: any number
// of threads may share one. complete() and neighbourhood() touch memory only (microseconds to a
// few milliseconds).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rag/corpus.h"
#include "rag/status.h"

namespace rag {

enum class KgEntityKind : uint8_t { Synset, Lemma, Term };
const char* kgEntityKindName(KgEntityKind k);  // "synset" | "lemma" | "term"

struct KgEntity {
  int32_t id = 0;  // the corpus's entity id (dense from 1)
  std::string name;
  KgEntityKind kind = KgEntityKind::Synset;
};

// One typed relation, as stored: src --relation--> dst.
struct KgRelationEdge {
  int32_t src = 0;
  int32_t dst = 0;
  std::string relation;  // "hypernym", "part_holonym", "lemma_of", "xref", ...
  bool operator==(const KgRelationEdge&) const = default;
};

struct KgNameMatch {
  std::string name;      // lower-cased, as linking matches it
  int32_t entities = 0;  // entities of that name (senses)
};

struct NeighbourhoodParams {
  // Edges of the entity shown at most (out-edges first, then in-edges); the rest are counted in
  // KgNeighbourhood::cutEdges.
  int32_t maxEdges = 60;
  // In-edges (other --r--> entity) too, except those mirrored by an out-edge to the same entity
  // (WordNet stores most relations both ways: hypernym/hyponym, part_holonym/part_meronym).
  bool incoming = true;
  Status validate() const;  // InvalidArgument naming the bad field
};

// The entity's edges and the entities at their other ends (the entity itself first).
struct KgNeighbourhood {
  KgEntity centre;
  std::vector<KgEntity> entities;  // centre first, each once
  std::vector<KgRelationEdge> edges;
  int64_t cutEdges = 0;            // edges left out by maxEdges
  int64_t totalEdges = 0;          // out-edges + unmirrored in-edges of the entity
};

struct KgPassage {
  int64_t id = 0;
  std::string title;
  std::string text;
};

// ---- what a request's knowledge node used --------------------------------------------------

enum class KgLinkSource : uint8_t { Name, Passage };  // an n-gram of the question / a BM25 passage

struct KgLink {
  KgEntity entity;
  KgLinkSource source = KgLinkSource::Name;
  std::string matched = {};  // the n-gram (Name) or the passage id (Passage)
  double score = 0;     // cosine of the question with the entity's passage
  bool chosen = false;  // the node expanded it (a subgraph root)
};

struct KgPathUse {
  std::vector<KgEntity> entities = {};      // root first
  std::vector<std::string> relations = {};  // relations[i]: entities[i] -> entities[i + 1]
  double score = 0;                    // cosine of the path's text with the question
  bool kept = false;                   // among the top-K the prompt holds; false: pruned
};

struct KgSubgraphUse {
  KgLink root;
  std::vector<KgPathUse> paths = {};  // kept in prompt order, then the pruned ones by score
  int64_t cutEdges = 0;          // out-edges the fan-out cap skipped
};

struct KnowledgeUse {
  std::string query;
  std::vector<KgLink> links;             // every entity linked (name candidates and passage entities)
  std::vector<KgSubgraphUse> subgraphs;  // one per chosen entity
  std::string note;                      // why nothing was linked, when nothing was
  int64_t keptPaths() const;
  int64_t prunedPaths() const;
};

// ---- the explorer --------------------------------------------------------------------------

class KnowledgeExplorer {
public:
  // NotFound / SchemaMismatch naming the fix (`ragraph corpus build`) for a missing or foreign
  // corpus file.
  static Result<std::shared_ptr<const KnowledgeExplorer>> open(const std::filesystem::path& corpus);
  ~KnowledgeExplorer();
  KnowledgeExplorer(const KnowledgeExplorer&) = delete;
  KnowledgeExplorer& operator=(const KnowledgeExplorer&) = delete;

  int64_t entityCount() const;
  int64_t edgeCount() const;
  std::vector<std::string> relationNames() const;  // every relation type of the graph

  // Names starting with `prefix` (case-insensitive, words as linking splits them), in
  // alphabetical order, at most `limit`. Empty for an empty prefix.
  std::vector<KgNameMatch> complete(std::string_view prefix, int32_t limit) const;
  // Every entity named `name` (case-insensitive), synsets first. NotFound naming the name when
  // none is.
  Result<std::vector<KgEntity>> find(std::string_view name) const;
  // NotFound for an id outside the graph.
  Result<KgEntity> entity(int32_t id) const;
  // The entity's first passage's text, trimmed to `maxChars` ("" when it has none): what tells
  // the senses of one name apart.
  Result<std::string> gloss(int32_t id, size_t maxChars = 120) const;
  Result<KgNeighbourhood> neighbourhood(int32_t id, const NeighbourhoodParams& params) const;
  // The passages describing the entity (a synset's gloss, a term's chunks), in chunk order;
  // empty for an entity no passage describes (a lemma).
  Result<std::vector<KgPassage>> passages(int32_t id) const;

private:
  struct Impl;
  explicit KnowledgeExplorer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag
