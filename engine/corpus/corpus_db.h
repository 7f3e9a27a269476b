// The corpus SQLite file: opening it for reading (with the schema check every command shares),
// writing a freshly built corpus, and the counts `ragraph corpus stats` prints.
//
//   RAG_ASSIGN_OR_RETURN(sql::Db db, openCorpus(defaultCorpusPath()));
//   RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT text FROM passages WHERE id = ?"));
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "corpus/corpus_model.h"
#include "corpus/qa_builder.h"
#include "rag/progress.h"
#include "rag/status.h"
#include "storage/sqlite.h"

namespace rag::corpus {

// Opens an existing corpus read-only. NotFound says how to build one; a file of another schema
// version (older or newer) or not a corpus at all gives SchemaMismatch with the fix
// "rebuild it with `ragraph corpus build`".
Result<sql::Db> openCorpus(const std::filesystem::path& path);

// Creates `path` (which must not hold a database yet) and writes the whole corpus into it in
// one transaction, then creates the indexes and runs ANALYZE. The caller builds into a temp
// file and renames it (see buildCorpus); on failure the file is left for the caller to discard.
Status writeCorpusFile(const std::filesystem::path& path, const CorpusModel& model,
                       const std::vector<QaItem>& qa,
                       const std::vector<std::pair<std::string, std::string>>& meta,
                       const ProgressFn& progress = {});

// The counts `ragraph corpus stats` prints, with breakdowns the public rag::CorpusStats lacks.
struct CorpusCounts {
  std::filesystem::path path;
  int64_t sizeBytes = 0;
  int schemaVersion = 0;
  int64_t passages = 0;
  int64_t entities = 0;
  int64_t relations = 0;
  std::map<std::string, int64_t> passagesBySource;
  std::map<std::string, int64_t> entitiesByKind;
  std::map<std::string, int64_t> relationsByType;
  // split -> type -> count; each split also has "total".
  std::map<std::string, std::map<std::string, int64_t>> qa;
  int64_t qaTotal = 0;
  std::map<std::string, std::string> meta;
};

Result<CorpusCounts> readCorpusCounts(sql::Db& db);

}  // namespace rag::corpus
