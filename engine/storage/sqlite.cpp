#include "storage/sqlite.h"

#include <sqlite3.h>

#include <sys/resource.h>

#include <cstdint>
#include <filesystem>
#include <utility>

namespace rag::sql {

// ---- Stmt -------------------------------------------------------------------

Stmt::~Stmt() {
  if (m_stmt) sqlite3_finalize(m_stmt);
}

Stmt::Stmt(Stmt&& o) noexcept
    : m_db(std::exchange(o.m_db, nullptr)),
      m_stmt(std::exchange(o.m_stmt, nullptr)),
      m_bindError(std::move(o.m_bindError)) {}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    if (m_stmt) sqlite3_finalize(m_stmt);
    m_db = std::exchange(o.m_db, nullptr);
    m_stmt = std::exchange(o.m_stmt, nullptr);
    m_bindError = std::move(o.m_bindError);
  }
  return *this;
}

static void noteBind(Status& slot, int rc, Db* db, int index) {
  if (rc != SQLITE_OK && slot.isOk() && db)
    slot = db->lastError("binding parameter " + std::to_string(index));
}

Stmt& Stmt::bind(int index, int64_t v) {
  noteBind(m_bindError, sqlite3_bind_int64(m_stmt, index, v), m_db, index);
  return *this;
}
Stmt& Stmt::bind(int index, double v) {
  noteBind(m_bindError, sqlite3_bind_double(m_stmt, index, v), m_db, index);
  return *this;
}
Stmt& Stmt::bind(int index, std::string_view v) {
  noteBind(m_bindError,
           sqlite3_bind_text64(m_stmt, index, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
           m_db, index);
  return *this;
}
Stmt& Stmt::bindBlob(int index, const void* data, size_t bytes) {
  noteBind(m_bindError, sqlite3_bind_blob64(m_stmt, index, data, bytes, SQLITE_TRANSIENT), m_db,
           index);
  return *this;
}
Stmt& Stmt::bindNull(int index) {
  noteBind(m_bindError, sqlite3_bind_null(m_stmt, index), m_db, index);
  return *this;
}

Result<bool> Stmt::step() {
  if (!m_stmt) return Status::internal("step() on an empty statement");
  if (!m_bindError.isOk()) return m_bindError;
  int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return m_db->lastError(std::string("running `") + sqlite3_sql(m_stmt) + "`");
}

Status Stmt::run() {
  Result<bool> r = step();
  reset();
  if (!r) return r.status();
  return Status::ok();
}

void Stmt::reset() {
  if (!m_stmt) return;
  sqlite3_reset(m_stmt);
  sqlite3_clear_bindings(m_stmt);
  m_bindError = Status::ok();
}

int64_t Stmt::columnInt64(int col) const { return sqlite3_column_int64(m_stmt, col); }
double Stmt::columnDouble(int col) const { return sqlite3_column_double(m_stmt, col); }
std::string Stmt::columnText(int col) const { return std::string(columnTextView(col)); }
std::string_view Stmt::columnTextView(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
  if (!p) return {};
  return {p, static_cast<size_t>(sqlite3_column_bytes(m_stmt, col))};
}
std::span<const uint8_t> Stmt::columnBlob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(m_stmt, col));
  if (!p) return {};
  return {p, static_cast<size_t>(sqlite3_column_bytes(m_stmt, col))};
}
bool Stmt::columnIsNull(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
int Stmt::columnCount() const { return sqlite3_column_count(m_stmt); }

// ---- Db ---------------------------------------------------------------------

Result<Db> Db::open(const std::filesystem::path& path, OpenMode mode) {
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case OpenMode::ReadOnly: flags |= SQLITE_OPEN_READONLY; break;
    case OpenMode::ReadWrite: flags |= SQLITE_OPEN_READWRITE; break;
    case OpenMode::Create: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
  }
  if (mode != OpenMode::Create && !std::filesystem::exists(path))
    return Status::notFound("database " + path.string() + " does not exist");

  Db db;
  db.m_path = path;
  int rc = sqlite3_open_v2(path.c_str(), &db.m_db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status s = db.m_db ? db.lastError("opening database")
                       : Status::ioError("cannot open database " + path.string());
    return s;
  }
  sqlite3_extended_result_codes(db.m_db, 1);
  sqlite3_busy_timeout(db.m_db, 5000);
  // A file that is not a database only fails on the first read: check now, with a clear message.
  Result<int64_t> probe = db.queryInt64("SELECT count(*) FROM sqlite_master");
  if (!probe)
    return Status::corrupt(path.string() + " is not a readable SQLite database (" +
                           probe.status().message() + "); delete it or point to another file");
  return db;
}

Db::~Db() {
  if (m_db) sqlite3_close_v2(m_db);
}

Db::Db(Db&& o) noexcept : m_db(std::exchange(o.m_db, nullptr)), m_path(std::move(o.m_path)) {}

Db& Db::operator=(Db&& o) noexcept {
  if (this != &o) {
    if (m_db) sqlite3_close_v2(m_db);
    m_db = std::exchange(o.m_db, nullptr);
    m_path = std::move(o.m_path);
  }
  return *this;
}

Status Db::close() {
  if (!m_db) return Status::ok();
  int rc = sqlite3_close(m_db);
  if (rc != SQLITE_OK) return lastError("closing database");
  m_db = nullptr;
  return Status::ok();
}

// What a failed write needs to be told about the space left: the free space on the file's disk
// when it is short, and the process's file-size limit (ulimit -f) when one is set.
static std::string spaceHint(const std::filesystem::path& file) {
  std::string hint;
  std::error_code ec;
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  const std::filesystem::space_info space = std::filesystem::space(dir, ec);
  constexpr uintmax_t kShort = uintmax_t{64} << 20;
  if (!ec && space.available < kShort)
    hint = "; only " + std::to_string(space.available >> 10) + " KiB are free on the disk of " + dir.string() +
           ": free space there and run it again";
  rlimit lim{};
  if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    hint += "; files are limited to " + std::to_string(lim.rlim_cur >> 10) +
            " KiB (ulimit -f): free space on that disk or raise the limit and run it again";
  return hint;
}

Status Db::lastError(std::string_view doing) const {
  int code = m_db ? sqlite3_extended_errcode(m_db) : SQLITE_ERROR;
  std::string msg = m_db ? sqlite3_errmsg(m_db) : "no connection";
  std::string full = std::string(doing) + " in " + m_path.string() + ": " + msg;
  // A write that failed for want of space says so (SQLite's "disk I/O error" alone does not tell
  // a full disk from a failing one, and the errno it keeps is often overwritten by its rollback).
  if ((code & 0xff) == SQLITE_IOERR || (code & 0xff) == SQLITE_FULL) full += spaceHint(m_path);
  switch (code & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::corrupt(std::move(full));
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Status::busy(std::move(full));
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM: return Status::ioError(std::move(full));
    case SQLITE_CONSTRAINT: return Status::alreadyExists(std::move(full));
    default: return Status::internal(std::move(full));
  }
}

Status Db::exec(std::string_view sqlText) {
  std::string text(sqlText);
  char* err = nullptr;
  int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) return lastError("executing SQL");
  return Status::ok();
}

Result<Stmt> Db::prepare(std::string_view sqlText) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v2(m_db, sqlText.data(), static_cast<int>(sqlText.size()), &s, nullptr);
  if (rc != SQLITE_OK) return lastError("preparing `" + std::string(sqlText) + "`");
  return Stmt(this, s);
}

Result<int64_t> Db::queryInt64(std::string_view sqlText) {
  RAG_ASSIGN_OR_RETURN(Stmt st, prepare(sqlText));
  RAG_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return Status::notFound("query returned no row: " + std::string(sqlText));
  return st.columnInt64(0);
}

Result<bool> Db::tableExists(std::string_view table) {
  RAG_ASSIGN_OR_RETURN(Stmt st, prepare("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"));
  st.bind(1, table);
  return st.step();
}

int64_t Db::lastInsertRowId() const { return sqlite3_last_insert_rowid(m_db); }
int64_t Db::changes() const { return sqlite3_changes64(m_db); }

Result<int> Db::userVersion() {
  RAG_ASSIGN_OR_RETURN(int64_t v, queryInt64("PRAGMA user_version"));
  return static_cast<int>(v);
}

Status Db::setUserVersion(int version) {
  return exec("PRAGMA user_version = " + std::to_string(version));
}

// ---- Transaction ------------------------------------------------------------

Transaction::Transaction(Db& db) : m_db(&db) {
  m_begin = db.exec("BEGIN IMMEDIATE");
  m_open = m_begin.isOk();
}

Transaction::~Transaction() { rollback(); }

Status Transaction::commit() {
  if (!m_open) return m_begin.isOk() ? Status::internal("commit on a closed transaction") : m_begin;
  Status s = m_db->exec("COMMIT");
  if (s.isOk()) m_open = false;
  return s;
}

void Transaction::rollback() {
  if (!m_open) return;
  (void)m_db->exec("ROLLBACK");
  m_open = false;
}

// ---- migrations ---------------------------------------------------------------

Status migrate(Db& db, std::span<const Migration> migrations, std::string_view what) {
  RAG_ASSIGN_OR_RETURN(int current, db.userVersion());
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  if (current > latest)
    return Status::schemaMismatch(
        std::string(what) + " database " + db.path().string() + " has schema version " +
        std::to_string(current) + ", newer than this build understands (" +
        std::to_string(latest) + "); open it with a newer RAGraph Workbench or use another file");
  int expect = 1;
  for (const Migration& m : migrations) {
    if (m.version != expect)
      return Status::internal("migrations of " + std::string(what) + " are not numbered 1, 2, 3, ...");
    ++expect;
    if (m.version <= current) continue;
    Transaction tx(db);
    RAG_RETURN_IF_ERROR(tx.beginStatus());
    Status s = db.exec(m.sql);
    if (!s) return s.withContext("migrating " + std::string(what) + " to version " + std::to_string(m.version));
    RAG_RETURN_IF_ERROR(db.setUserVersion(m.version));
    RAG_RETURN_IF_ERROR(tx.commit());
  }
  return Status::ok();
}

Status requireSchemaVersion(Db& db, int version, std::string_view what, std::string_view fix) {
  RAG_ASSIGN_OR_RETURN(int current, db.userVersion());
  if (current == version) return Status::ok();
  std::string age = current < version ? "older" : "newer";
  return Status::schemaMismatch(std::string(what) + " " + db.path().string() + " has schema version " +
                                std::to_string(current) + ", " + age + " than this build's " +
                                std::to_string(version) + "; " + std::string(fix));
}

}  // namespace rag::sql
