// Status and Result<T>: how every fallible engine function reports failure.
//
// A Status carries a code (for programs) and a one-line message (for people) that names the
// problem and, where one exists, the fix:
//
//   return Status::notFound("WordNet data file /usr/share/wordnet/data.noun is missing; "
//                           "install it with: apt-get install wordnet-base");
//
// Result<T> is either a value or a non-ok Status:
//
//   Result<Db> db = Db::open(path, OpenMode::ReadOnly);
//   if (!db) return db.status();
//   db->exec("...");
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace rag {

enum class StatusCode : int {
  Ok = 0,
  InvalidArgument,   // the caller passed something malformed
  NotFound,          // a file, table, entity or id does not exist
  AlreadyExists,
  IoError,           // the OS refused a read or write
  Corrupt,           // data exists but cannot be parsed
  SchemaMismatch,    // a database written by an older or newer build
  Busy,              // a bounded queue is full: a normal answer, try again later
  Cancelled,
  Unavailable,       // a device or optional component is not present
  Internal,          // a bug: an invariant did not hold
};

std::string_view statusCodeName(StatusCode code);

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message) : m_code(code), m_message(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalidArgument(std::string m) { return {StatusCode::InvalidArgument, std::move(m)}; }
  static Status notFound(std::string m) { return {StatusCode::NotFound, std::move(m)}; }
  static Status alreadyExists(std::string m) { return {StatusCode::AlreadyExists, std::move(m)}; }
  static Status ioError(std::string m) { return {StatusCode::IoError, std::move(m)}; }
  static Status corrupt(std::string m) { return {StatusCode::Corrupt, std::move(m)}; }
  static Status schemaMismatch(std::string m) { return {StatusCode::SchemaMismatch, std::move(m)}; }
  static Status busy(std::string m) { return {StatusCode::Busy, std::move(m)}; }
  static Status cancelled(std::string m) { return {StatusCode::Cancelled, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::Unavailable, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::Internal, std::move(m)}; }

  bool isOk() const { return m_code == StatusCode::Ok; }
  explicit operator bool() const { return isOk(); }
  StatusCode code() const { return m_code; }
  const std::string& message() const { return m_message; }

  // "corrupt: <message>", or "ok".
  std::string toString() const;

  // Prefixes context to the message, keeping the code: "while reading X: <message>".
  Status withContext(std::string_view context) const;

private:
  StatusCode m_code = StatusCode::Ok;
  std::string m_message;
};

template <typename T>
class [[nodiscard]] Result {
public:
  Result(T value) : m_value(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : m_status(std::move(status)) {  // NOLINT
    assert(!m_status.isOk() && "a Result built from a Status must carry an error");
    if (m_status.isOk()) m_status = Status::internal("Result constructed from an ok Status");
  }

  bool isOk() const { return m_value.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return m_status; }

  T& value() & { assert(isOk()); return *m_value; }
  const T& value() const& { assert(isOk()); return *m_value; }
  T&& value() && { assert(isOk()); return std::move(*m_value); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }  // move-only values out of a temporary

  T valueOr(T fallback) const& { return isOk() ? *m_value : std::move(fallback); }

private:
  std::optional<T> m_value;
  Status m_status;  // Ok when m_value holds
};

}  // namespace rag

// Early-return helpers, as in Abseil/Arrow.
#define RAG_CONCAT_INNER(a, b) a##b
#define RAG_CONCAT(a, b) RAG_CONCAT_INNER(a, b)

#define RAG_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::rag::Status rag_status_ = (expr);           \
    if (!rag_status_.isOk()) return rag_status_;  \
  } while (0)

#define RAG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.isOk()) return tmp.status();           \
  lhs = std::move(tmp).value()

#define RAG_ASSIGN_OR_RETURN(lhs, expr) \
  RAG_ASSIGN_OR_RETURN_IMPL(RAG_CONCAT(rag_result_, __LINE__), lhs, expr)
