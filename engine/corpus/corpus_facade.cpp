// rag/corpus.h: the public, Qt-free view of a built corpus used by the CLI and the workbench.
#include "rag/corpus.h"

#include "core/fs.h"
#include "corpus/corpus_schema.h"
#include "storage/sqlite.h"

namespace rag {

int64_t CorpusStats::qaTotal(const std::string& split) const {
  auto it = qa.find(split);
  if (it == qa.end()) return 0;
  int64_t n = 0;
  for (const auto& [type, count] : it->second) n += count;
  return n;
}

std::filesystem::path defaultCorpusLocation() { return defaultCorpusPath(); }

Result<CorpusStats> readCorpusStats(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Status::notFound("no corpus at " + path.string() +
                            "; build it with `ragraph corpus build` (or pass --corpus PATH)");
  RAG_ASSIGN_OR_RETURN(sql::Db db, sql::Db::open(path, sql::OpenMode::ReadOnly));
  RAG_RETURN_IF_ERROR(sql::requireSchemaVersion(db, corpus::kCorpusSchemaVersion, "corpus",
                                                "rebuild it with `ragraph corpus build`"));
  CorpusStats s;
  s.path = path;
  s.sizeBytes = std::filesystem::file_size(path, ec);
  s.schemaVersion = corpus::kCorpusSchemaVersion;
  RAG_ASSIGN_OR_RETURN(s.passages, db.queryInt64("SELECT count(*) FROM passages"));
  RAG_ASSIGN_OR_RETURN(s.entities, db.queryInt64("SELECT count(*) FROM entities"));
  RAG_ASSIGN_OR_RETURN(s.relations, db.queryInt64("SELECT count(*) FROM relations"));
  RAG_ASSIGN_OR_RETURN(sql::Stmt qa,
                       db.prepare("SELECT split, type, count(*) FROM qa GROUP BY split, type"));
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, qa.step());
    if (!row) break;
    s.qa[qa.columnText(0)][qa.columnText(1)] = qa.columnInt64(2);
  }
  RAG_ASSIGN_OR_RETURN(sql::Stmt meta, db.prepare("SELECT key, value FROM meta"));
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, meta.step());
    if (!row) break;
    s.meta[meta.columnText(0)] = meta.columnText(1);
  }
  return s;
}

}  // namespace rag
