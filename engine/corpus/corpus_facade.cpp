// rag/corpus.h: the public, Qt-free view of a built corpus used by the CLI and the workbench.
#include "rag/corpus.h"

#include "corpus/qa_prompt.h"

#include "core/fs.h"
#include "corpus/corpus_db.h"

namespace rag {

int64_t CorpusStats::qaTotal(const std::string& split) const {
  auto it = qa.find(split);
  if (it == qa.end()) return 0;
  int64_t n = 0;
  for (const auto& [type, count] : it->second) n += count;
  return n;
}

std::filesystem::path defaultCorpusLocation() { return defaultCorpusPath(); }

bool answerContainsGold(std::string_view answer, std::span<const std::string> gold) {
  return corpus::answerMatches(answer, gold);
}

Result<CorpusStats> readCorpusStats(const std::filesystem::path& path) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(path));
  RAG_ASSIGN_OR_RETURN(corpus::CorpusCounts c, corpus::readCorpusCounts(db));
  CorpusStats s;
  s.path = path;
  s.sizeBytes = static_cast<uint64_t>(c.sizeBytes);
  s.schemaVersion = c.schemaVersion;
  s.passages = c.passages;
  s.entities = c.entities;
  s.relations = c.relations;
  for (const auto& [split, types] : c.qa)
    for (const auto& [type, count] : types)
      if (type != "total") s.qa[split][type] = count;  // totals are derived: qaTotal()
  s.meta = std::move(c.meta);
  return s;
}

}  // namespace rag
