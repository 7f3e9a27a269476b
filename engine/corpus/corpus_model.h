// The corpus held in memory between parsing and writing: rows of the `entities`, `passages`
// and `relations` tables (ids are dense from 1, in vector order) plus the per-synset and
// per-term views the QA generator walks. buildCorpusModel() fills it from the Debian data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rag::corpus {

enum class EntityKind : uint8_t { Synset, Lemma, Term };
std::string_view entityKindName(EntityKind k);  // "synset" | "lemma" | "term"

// Where a row came from. `file` indexes CorpusModel::sourceFiles.
struct Provenance {
  uint8_t file = 0;
  uint64_t offset = 0;  // byte offset of the synset line / of the entry in the decompressed dict
};

struct Entity {
  EntityKind kind = EntityKind::Synset;
  char pos = 0;               // n|v|a|s|r for WordNet (lemmas: n|v|a|r), 0 for FOLDOC terms
  uint32_t synsetOffset = 0;  // kind Synset only
  std::string name;
  Provenance prov;
};

struct Passage {
  int64_t entityId = 0;
  int chunk = 0;
  std::string title;
  std::string text;
  uint32_t nTokens = 0;
  Provenance prov;
};

struct Relation {
  int64_t src = 0;
  std::string_view type;  // static storage: a WordNet pointer name, "lemma_of" or "xref"
  int64_t dst = 0;
  Provenance prov;
};

// A WordNet pointer resolved to synset indexes (into CorpusModel::synsets).
struct SynsetLink {
  std::string_view type;
  uint32_t target = 0;
  uint8_t sourceWord = 0;  // 1-based; 0 for a semantic pointer
  uint8_t targetWord = 0;
};

struct SynsetView {
  int64_t entityId = 0;
  int64_t passageId = 0;
  char pos = 'n';
  std::vector<std::string> lemmas;       // in WordNet order (the first is the most frequent)
  std::vector<int64_t> lemmaEntities;    // parallel to lemmas
  std::string definition;
  std::vector<SynsetLink> links;
};

struct TermView {
  int64_t entityId = 0;
  int64_t firstPassageId = 0;
  std::string term;
  std::vector<std::string> aliases;
  std::string category;
  std::string firstSentence;  // of the plain body, leading "(ABBR)" removed
};

struct CorpusModel {
  std::vector<std::string> sourceFiles;  // "data.noun", ..., "foldoc.dict.dz"
  std::vector<Entity> entities;          // id = index + 1
  std::vector<Passage> passages;         // id = index + 1
  std::vector<Relation> relations;
  std::vector<SynsetView> synsets;
  std::vector<TermView> terms;
  // Counted, not fatal: WordNet pointers to a synset missing from the data (only in trimmed
  // data sets) and FOLDOC cross-references that name no entry.
  uint64_t danglingPointers = 0;
  uint64_t unresolvedXrefs = 0;

  const Entity& entity(int64_t id) const { return entities[static_cast<size_t>(id - 1)]; }
  const Passage& passage(int64_t id) const { return passages[static_cast<size_t>(id - 1)]; }
  // 'wordnet' or 'foldoc', from the file name.
  std::string_view sourceOf(const Provenance& p) const;
};

}  // namespace rag::corpus
