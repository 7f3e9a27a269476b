// What the workbench and the CLI may ask of a built corpus without touching engine internals.
//
//   rag::Result<rag::CorpusStats> s = rag::readCorpusStats(rag::defaultCorpusLocation());
//   if (!s) show(s.status().message());
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag {

struct CorpusStats {
  std::filesystem::path path;
  uint64_t sizeBytes = 0;
  int schemaVersion = 0;
  int64_t passages = 0;
  int64_t entities = 0;
  int64_t relations = 0;
  // qa[split][type] = count; split is train|dev|test, type single_hop|definition|two_hop|foldoc.
  std::map<std::string, std::map<std::string, int64_t>> qa;
  std::map<std::string, std::string> meta;  // build time, sources, builder version, seed

  int64_t qaTotal(const std::string& split) const;
};

struct Passage {
  int64_t id = 0;
  std::string title;
  std::string text;
  std::string source;      // 'wordnet' | 'foldoc'
  std::string sourceFile;  // e.g. 'data.noun'
  int64_t sourceOffset = 0;
};

struct QaItem {
  int64_t id = 0;
  std::string split;     // train | dev | test
  std::string type;      // single_hop | definition | two_hop | foldoc
  std::string relation;  // the relation asked about, empty when none
  std::string question;
  std::vector<std::string> answers;  // every acceptable answer string
  std::vector<Passage> goldPassages; // in reasoning order
  std::string kgPath;                // JSON: alternating entity ids and relation names
};

// True when `answer` contains one of `gold` (case- and punctuation-insensitive): the accuracy
// rule of every evaluation (the Block-Attention paper's).
bool answerContainsGold(std::string_view answer, std::span<const std::string> gold);

// The corpus every command uses when no --corpus flag is given (see core/fs.h for the rules).
std::filesystem::path defaultCorpusLocation();

// Counts from a built corpus. NotFound when there is none yet (fix: `ragraph corpus build`),
// SchemaMismatch for a corpus of another build, Corrupt for a damaged file.
Result<CorpusStats> readCorpusStats(const std::filesystem::path& path);

}  // namespace rag
