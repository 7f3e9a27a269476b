// RAII wrapper over SQLite: Db (a connection), Stmt (a prepared statement), Transaction, and
// numbered schema migrations kept in PRAGMA user_version.
//
//   RAG_ASSIGN_OR_RETURN(sql::Db db, sql::Db::open(path, sql::OpenMode::Create));
//   RAG_RETURN_IF_ERROR(sql::migrate(db, kMigrations, "run history"));
//   sql::Transaction tx(db);
//   RAG_ASSIGN_OR_RETURN(sql::Stmt ins, db.prepare("INSERT INTO t(a, b) VALUES (?, ?)"));
//   ins.bind(1, int64_t{7}); ins.bind(2, "seven");
//   RAG_RETURN_IF_ERROR(ins.run());
//   RAG_RETURN_IF_ERROR(tx.commit());   // rolls back in the destructor if never committed
//
// Every failure comes back as a Status whose message names the database file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "rag/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace rag::sql {

enum class OpenMode { ReadOnly, ReadWrite, Create };

class Db;

class Stmt {
public:
  Stmt() = default;
  ~Stmt();
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Parameters are 1-based, as in SQLite. Text and blobs are copied (SQLITE_TRANSIENT).
  Stmt& bind(int index, int64_t v);
  Stmt& bind(int index, int v) { return bind(index, static_cast<int64_t>(v)); }
  Stmt& bind(int index, double v);
  Stmt& bind(int index, std::string_view v);
  Stmt& bind(int index, const char* v) { return bind(index, std::string_view(v)); }
  Stmt& bindBlob(int index, const void* data, size_t bytes);
  Stmt& bindNull(int index);

  // Advances to the next row: true when a row is ready, false when done.
  Result<bool> step();
  // Runs a statement that returns no rows and resets it for reuse.
  Status run();
  // Resets and clears bindings so the statement can be reused.
  void reset();

  int64_t columnInt64(int col) const;
  double columnDouble(int col) const;
  std::string columnText(int col) const;
  std::string_view columnTextView(int col) const;  // valid until the next step()
  std::span<const uint8_t> columnBlob(int col) const;  // valid until the next step()
  bool columnIsNull(int col) const;
  int columnCount() const;

private:
  friend class Db;
  Stmt(Db* db, sqlite3_stmt* s) : m_db(db), m_stmt(s) {}
  Db* m_db = nullptr;
  sqlite3_stmt* m_stmt = nullptr;
  Status m_bindError;  // first bind failure, reported by step()/run()
};

class Db {
public:
  static Result<Db> open(const std::filesystem::path& path, OpenMode mode);

  Db() = default;
  ~Db();
  Db(Db&& o) noexcept;
  Db& operator=(Db&& o) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Status exec(std::string_view sql);
  Result<Stmt> prepare(std::string_view sql);
  // Runs a query whose first row's first column is an integer.
  Result<int64_t> queryInt64(std::string_view sql);
  Result<bool> tableExists(std::string_view table);

  int64_t lastInsertRowId() const;
  int64_t changes() const;
  Result<int> userVersion();
  Status setUserVersion(int version);

  // Closes the connection; returns the error if SQLite could not close cleanly.
  Status close();

  bool isOpen() const { return m_db != nullptr; }
  const std::filesystem::path& path() const { return m_path; }
  sqlite3* handle() const { return m_db; }

  // A Status for the last error on this connection, prefixed with what was being done.
  Status lastError(std::string_view doing) const;

private:
  sqlite3* m_db = nullptr;
  std::filesystem::path m_path;
};

// Begins IMMEDIATE on construction; rolls back in the destructor unless commit() succeeded.
class Transaction {
public:
  explicit Transaction(Db& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const Status& beginStatus() const { return m_begin; }
  Status commit();
  void rollback();

private:
  Db* m_db;
  Status m_begin;
  bool m_open = false;
};

// One numbered step of a schema. Versions start at 1 and increase by one.
struct Migration {
  int version;
  const char* sql;  // one or more statements
};

// Brings `db` to the last migration's version, each step in its own transaction.
// A database whose user_version is newer than the last migration is refused with a
// SchemaMismatch that names `what` and the fix (use a newer build).
Status migrate(Db& db, std::span<const Migration> migrations, std::string_view what);

// Checks that `db` is at exactly `version`; older or newer gives SchemaMismatch naming `fix`.
Status requireSchemaVersion(Db& db, int version, std::string_view what, std::string_view fix);

}  // namespace rag::sql
