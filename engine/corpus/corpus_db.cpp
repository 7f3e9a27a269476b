#include "corpus/corpus_db.h"

#include <sstream>

#include "core/json_writer.h"
#include "corpus/corpus_schema.h"

namespace fs = std::filesystem;

namespace rag::corpus {

namespace {

constexpr std::string_view kRebuild = "rebuild it with `ragraph corpus build`";

std::string jsonStrings(const std::vector<std::string>& v) {
  std::ostringstream os;
  JsonWriter w(os);
  w.beginArray();
  for (const std::string& s : v) w.value(s);
  w.endArray();
  return os.str();
}

std::string jsonInts(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

// Reports every `step` rows and at the end, so a phase costs a handful of callback calls.
class Ticker {
public:
  Ticker(const ProgressFn& fn, std::string_view phase, uint64_t total)
      : m_fn(fn), m_phase(phase), m_total(total) {
    if (m_fn) m_fn(m_phase, 0, m_total);
  }
  void tick() {
    if (++m_done % 16384 == 0 && m_fn) m_fn(m_phase, m_done, m_total);
  }
  void finish() {
    if (m_fn) m_fn(m_phase, m_total, m_total);
  }

private:
  const ProgressFn& m_fn;
  std::string_view m_phase;
  uint64_t m_total;
  uint64_t m_done = 0;
};

Status writeRows(sql::Db& db, const CorpusModel& m, const std::vector<QaItem>& qa,
                 const std::vector<std::pair<std::string, std::string>>& meta,
                 const ProgressFn& progress) {
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt ins,
                         db.prepare("INSERT INTO entities(id, kind, name, pos, synset_offset, "
                                    "source, source_file, source_offset) VALUES (?,?,?,?,?,?,?,?)"));
    Ticker t(progress, "storing entities", m.entities.size());
    int64_t id = 0;
    for (const Entity& e : m.entities) {
      ins.bind(1, ++id).bind(2, entityKindName(e.kind)).bind(3, e.name);
      if (e.pos) ins.bind(4, std::string_view(&e.pos, 1));
      else ins.bindNull(4);
      if (e.kind == EntityKind::Synset) ins.bind(5, static_cast<int64_t>(e.synsetOffset));
      else ins.bindNull(5);
      ins.bind(6, m.sourceOf(e.prov)).bind(7, m.sourceFiles[e.prov.file]);
      ins.bind(8, static_cast<int64_t>(e.prov.offset));
      RAG_RETURN_IF_ERROR(ins.run());
      t.tick();
    }
    t.finish();
  }
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt ins,
                         db.prepare("INSERT INTO passages(id, entity_id, chunk, title, text, "
                                    "n_tokens, source, source_file, source_offset) "
                                    "VALUES (?,?,?,?,?,?,?,?,?)"));
    Ticker t(progress, "storing passages", m.passages.size());
    int64_t id = 0;
    for (const Passage& p : m.passages) {
      ins.bind(1, ++id).bind(2, p.entityId).bind(3, p.chunk).bind(4, p.title).bind(5, p.text);
      ins.bind(6, static_cast<int64_t>(p.nTokens)).bind(7, m.sourceOf(p.prov));
      ins.bind(8, m.sourceFiles[p.prov.file]).bind(9, static_cast<int64_t>(p.prov.offset));
      RAG_RETURN_IF_ERROR(ins.run());
      t.tick();
    }
    t.finish();
  }
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt ins,
                         db.prepare("INSERT INTO relations(src, type, dst, source, source_file, "
                                    "source_offset) VALUES (?,?,?,?,?,?)"));
    Ticker t(progress, "storing relations", m.relations.size());
    for (const Relation& r : m.relations) {
      ins.bind(1, r.src).bind(2, r.type).bind(3, r.dst).bind(4, m.sourceOf(r.prov));
      ins.bind(5, m.sourceFiles[r.prov.file]).bind(6, static_cast<int64_t>(r.prov.offset));
      RAG_RETURN_IF_ERROR(ins.run());
      t.tick();
    }
    t.finish();
  }
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt ins,
                         db.prepare("INSERT INTO qa(id, split, type, relation, topic_entity, "
                                    "question, answers, gold_passages, kg_path) "
                                    "VALUES (?,?,?,?,?,?,?,?,?)"));
    RAG_ASSIGN_OR_RETURN(sql::Stmt name,
                         db.prepare("INSERT INTO qa_topic_names(qa_id, topic_name) VALUES (?,?)"));
    Ticker t(progress, "storing QA", qa.size());
    int64_t id = 0;
    for (const QaItem& q : qa) {
      ins.bind(1, ++id).bind(2, q.split).bind(3, q.type).bind(4, q.relation);
      ins.bind(5, q.topicEntity).bind(6, q.question).bind(7, jsonStrings(q.answers));
      ins.bind(8, jsonInts(q.goldPassages)).bind(9, kgPathJson(q));
      RAG_RETURN_IF_ERROR(ins.run());
      name.bind(1, id).bind(2, q.topicName);
      RAG_RETURN_IF_ERROR(name.run());
      t.tick();
    }
    t.finish();
  }
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt ins, db.prepare("INSERT INTO meta(key, value) VALUES (?, ?)"));
    auto put = [&](std::string_view k, std::string_view v) {
      ins.bind(1, k).bind(2, v);
      return ins.run();
    };
    RAG_RETURN_IF_ERROR(put("format", kCorpusFormat));
    RAG_RETURN_IF_ERROR(put("schema_version", std::to_string(kCorpusSchemaVersion)));
    for (const auto& [k, v] : meta) RAG_RETURN_IF_ERROR(put(k, v));
  }
  return Status::ok();
}

}  // namespace

Result<sql::Db> openCorpus(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return Status::notFound("corpus " + path.string() +
                            " does not exist; build it with `ragraph corpus build`"
                            " (or pass --corpus PATH)");
  Result<sql::Db> db = sql::Db::open(path, sql::OpenMode::ReadOnly);
  if (!db) {
    if (db.status().code() == StatusCode::Corrupt)
      return Status::corrupt("corpus " + path.string() + " is not a readable SQLite database; " +
                             std::string(kRebuild));
    return db.status();
  }
  RAG_RETURN_IF_ERROR(sql::requireSchemaVersion(*db, kCorpusSchemaVersion, "corpus", kRebuild));
  RAG_ASSIGN_OR_RETURN(bool hasMeta, db->tableExists("meta"));
  bool isCorpus = false;
  if (hasMeta) {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db->prepare("SELECT value FROM meta WHERE key = 'format'"));
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    isCorpus = row && st.columnTextView(0) == kCorpusFormat;
  }
  if (!isCorpus)
    return Status::schemaMismatch(path.string() + " is not a RAGraph corpus (another kind of "
                                  "SQLite database, or an interrupted build); " +
                                  std::string(kRebuild));
  return std::move(db).value();
}

Status writeCorpusFile(const fs::path& path, const CorpusModel& model,
                       const std::vector<QaItem>& qa,
                       const std::vector<std::pair<std::string, std::string>>& meta,
                       const ProgressFn& progress) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, sql::Db::open(path, sql::OpenMode::Create));
  // A build target is a private temp file: no concurrent readers and it is discarded on any
  // failure, so durability settings only cost time.
  RAG_RETURN_IF_ERROR(db.exec("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; "
                              "PRAGMA locking_mode = EXCLUSIVE; PRAGMA temp_store = MEMORY; "
                              "PRAGMA cache_size = -262144;"));
  RAG_RETURN_IF_ERROR(sql::migrate(db, kCorpusMigrations, "corpus"));
  {
    sql::Transaction tx(db);
    RAG_RETURN_IF_ERROR(tx.beginStatus());
    RAG_RETURN_IF_ERROR(writeRows(db, model, qa, meta, progress));
    if (progress) progress("indexing", 0, 2);
    RAG_RETURN_IF_ERROR(db.exec(kCorpusIndexes));
    if (progress) progress("indexing", 1, 2);
    RAG_RETURN_IF_ERROR(db.exec("ANALYZE"));
    RAG_RETURN_IF_ERROR(tx.commit());
    if (progress) progress("indexing", 2, 2);
  }
  return db.close();
}

Result<CorpusCounts> readCorpusCounts(sql::Db& db) {
  CorpusCounts s;
  s.path = db.path();
  std::error_code ec;
  auto size = fs::file_size(s.path, ec);
  s.sizeBytes = ec ? -1 : static_cast<int64_t>(size);
  RAG_ASSIGN_OR_RETURN(s.schemaVersion, db.userVersion());
  auto grouped = [&](const char* sqlText, std::map<std::string, int64_t>& out,
                     int64_t& total) -> Status {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare(sqlText));
    total = 0;
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      out[st.columnText(0)] = st.columnInt64(1);
      total += st.columnInt64(1);
    }
    return Status::ok();
  };
  RAG_RETURN_IF_ERROR(grouped("SELECT source, count(*) FROM passages GROUP BY source",
                              s.passagesBySource, s.passages));
  RAG_RETURN_IF_ERROR(grouped("SELECT kind, count(*) FROM entities GROUP BY kind",
                              s.entitiesByKind, s.entities));
  RAG_RETURN_IF_ERROR(grouped("SELECT type, count(*) FROM relations GROUP BY type",
                              s.relationsByType, s.relations));
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st,
                         db.prepare("SELECT split, type, count(*) FROM qa GROUP BY split, type"));
    for (const char* split : {"train", "dev", "test"}) s.qa[split]["total"] = 0;
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      auto& bySplit = s.qa[st.columnText(0)];
      int64_t n = st.columnInt64(2);
      bySplit[st.columnText(1)] = n;
      bySplit["total"] += n;
      s.qaTotal += n;
    }
  }
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT key, value FROM meta ORDER BY key"));
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      s.meta[st.columnText(0)] = st.columnText(1);
    }
  }
  return s;
}

}  // namespace rag::corpus
