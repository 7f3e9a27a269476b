#include "rag/status.h"

namespace rag {

std::string_view statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::Ok: return "ok";
    case StatusCode::InvalidArgument: return "invalid argument";
    case StatusCode::NotFound: return "not found";
    case StatusCode::AlreadyExists: return "already exists";
    case StatusCode::IoError: return "i/o error";
    case StatusCode::Corrupt: return "corrupt";
    case StatusCode::SchemaMismatch: return "schema mismatch";
    case StatusCode::Busy: return "busy";
    case StatusCode::Cancelled: return "cancelled";
    case StatusCode::Unavailable: return "unavailable";
    case StatusCode::Internal: return "internal error";
  }
  return "unknown";
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  std::string s(statusCodeName(m_code));
  s += ": ";
  s += m_message;
  return s;
}

Status Status::withContext(std::string_view context) const {
  if (isOk()) return *this;
  std::string m(context);
  m += ": ";
  m += m_message;
  return {m_code, std::move(m)};
}

}  // namespace rag
