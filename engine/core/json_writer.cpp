#include "core/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace rag {

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when there is none.
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b0 >= 0xC2 && b0 <= 0xDF) n = 2;
  else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
  }
  return n;
}

}  // namespace

// Text a model generated can end inside a UTF-8 character (a byte-level BPE piece) or hold stray
// bytes; each byte that starts no well-formed sequence is written as U+FFFD, so every document
// written here is valid JSON that core/json.h (and any other parser) reads back.
void JsonWriter::writeEscaped(std::ostream& out, std::string_view s) {
  out << '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8SequenceLength(s, i);
      if (n == 0) {
        out << "\xEF\xBF\xBD";
      } else {
        out.write(s.data() + i, static_cast<std::streamsize>(n));
        i += n - 1;
      }
      continue;
    }
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
