#include "core/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace rag {

void JsonWriter::writeEscaped(std::ostream& out, std::string_view s) {
  out << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\r': out << "\\r"; break;
      case '\t': out << "\\t"; break;
      case '\b': out << "\\b"; break;
      case '\f': out << "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out << buf;
        } else {
          out << static_cast<char>(c);
        }
    }
  }
  out << '"';
}

void JsonWriter::newline() {
  if (!m_pretty) return;
  m_out << '\n';
  for (size_t i = 0; i < m_stack.size(); ++i) m_out << "  ";
}

void JsonWriter::beforeValue() {
  if (m_afterKey) {
    m_afterKey = false;
    return;
  }
  if (m_stack.empty()) return;
  Level& top = m_stack.back();
  if (!top.empty) m_out << ',';
  top.empty = false;
  newline();
}

JsonWriter& JsonWriter::beginObject() {
  beforeValue();
  m_out << '{';
  m_stack.push_back({false, true});
  return *this;
}

JsonWriter& JsonWriter::endObject() {
  bool empty = m_stack.back().empty;
  m_stack.pop_back();
  if (!empty) newline();
  m_out << '}';
  return *this;
}

JsonWriter& JsonWriter::beginArray() {
  beforeValue();
  m_out << '[';
  m_stack.push_back({true, true});
  return *this;
}

JsonWriter& JsonWriter::endArray() {
  bool empty = m_stack.back().empty;
  m_stack.pop_back();
  if (!empty) newline();
  m_out << ']';
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  beforeValue();
  writeEscaped(m_out, k);
  m_out << (m_pretty ? ": " : ":");
  m_afterKey = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view v) {
  beforeValue();
  writeEscaped(m_out, v);
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  beforeValue();
  m_out << v;
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) {
  beforeValue();
  m_out << v;
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  beforeValue();
  if (!std::isfinite(v)) {
    m_out << "null";
    return *this;
  }
  // The shortest text that reads back as the same double (a checkpoint's loss history and a
  // workflow file must round-trip exactly); -0 as 0, since parseJson reads "-0" as 0.
  if (v == 0) v = 0;
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  m_out << std::string_view(buf, ec == std::errc() ? static_cast<size_t>(end - buf) : 0);
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  beforeValue();
  m_out << (v ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::null() {
  beforeValue();
  m_out << "null";
  return *this;
}

}  // namespace rag
