#include "core/json.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace rag {

// ---- JsonValue ------------------------------------------------------------------------------

JsonValue JsonValue::fromBool(bool b) {
  JsonValue v;
  v.m_data = b;
  return v;
}

JsonValue JsonValue::fromDouble(double d) {
  JsonValue v;
  v.m_data = Number{d, false, 0};
  return v;
}

JsonValue JsonValue::fromInt64(int64_t i) {
  JsonValue v;
  v.m_data = Number{static_cast<double>(i), true, i};
  return v;
}

JsonValue JsonValue::fromString(std::string s) {
  JsonValue v;
  v.m_data = std::move(s);
  return v;
}

JsonValue JsonValue::fromArray(Array a) {
  JsonValue v;
  v.m_data = std::move(a);
  return v;
}

JsonValue JsonValue::fromObject(Object o) {
  JsonValue v;
  v.m_data = std::move(o);
  return v;
}

bool JsonValue::asBool() const {
  assert(isBool());
  const bool* b = std::get_if<bool>(&m_data);
  return b ? *b : false;
}

double JsonValue::asDouble() const {
  assert(isNumber());
  const Number* n = std::get_if<Number>(&m_data);
  return n ? n->value : 0.0;
}

std::optional<int64_t> JsonValue::asInt64() const {
  const Number* n = std::get_if<Number>(&m_data);
  if (!n) return std::nullopt;
  if (n->isInt) return n->intValue;
  // 2^63 is exactly representable; every double below it in magnitude with no fraction fits.
  constexpr double kTwo63 = 9223372036854775808.0;
  if (std::isfinite(n->value) && n->value == std::trunc(n->value) && n->value >= -kTwo63 &&
      n->value < kTwo63)
    return static_cast<int64_t>(n->value);
  return std::nullopt;
}

const std::string& JsonValue::asString() const {
  assert(isString());
  static const std::string kEmpty;
  const std::string* s = std::get_if<std::string>(&m_data);
  return s ? *s : kEmpty;
}

const JsonValue::Array& JsonValue::asArray() const {
  assert(isArray());
  static const Array kEmpty;
  const Array* a = std::get_if<Array>(&m_data);
  return a ? *a : kEmpty;
}

const JsonValue::Object& JsonValue::asObject() const {
  assert(isObject());
  static const Object kEmpty;
  const Object* o = std::get_if<Object>(&m_data);
  return o ? *o : kEmpty;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  const Object* o = std::get_if<Object>(&m_data);
  if (!o) return nullptr;
  for (auto it = o->rbegin(); it != o->rend(); ++it)
    if (it->first == key) return &it->second;
  return nullptr;
}

size_t JsonValue::size() const {
  if (const Array* a = std::get_if<Array>(&m_data)) return a->size();
  if (const Object* o = std::get_if<Object>(&m_data)) return o->size();
  return 0;
}

std::string_view jsonTypeName(JsonValue::Type t) {
  switch (t) {
    case JsonValue::Type::Null: return "null";
    case JsonValue::Type::Bool: return "bool";
    case JsonValue::Type::Number: return "number";
    case JsonValue::Type::String: return "string";
    case JsonValue::Type::Array: return "array";
    case JsonValue::Type::Object: return "object";
  }
  return "unknown";
}

// ---- parser ---------------------------------------------------------------------------------

namespace {

// Thrown inside the parser only, caught in parseJson: keeps every recursive call free of
// error plumbing. Nothing escapes this file.
struct ParseFailure {
  size_t offset;
  std::string what;
};

std::string describeByte(char c) {
  auto u = static_cast<unsigned char>(c);
  char buf[16];
  if (u >= 0x20 && u < 0x7f)
    std::snprintf(buf, sizeof buf, "'%c'", c);
  else
    std::snprintf(buf, sizeof buf, "byte 0x%02X", u);
  return buf;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
public:
  explicit Parser(std::string_view text) : m_text(text) {}

  JsonValue parseDocument() {
    if (m_text.substr(0, 3) == "\xEF\xBB\xBF") m_pos = 3;
    skipWhitespace();
    JsonValue v = parseValue(0);
    skipWhitespace();
    if (m_pos < m_text.size())
      fail(m_pos, "unexpected " + describeByte(m_text[m_pos]) + " after the JSON value");
    return v;
  }

private:
  [[noreturn]] void fail(size_t offset, std::string what) {
    throw ParseFailure{offset, std::move(what)};
  }

  bool atEnd() const { return m_pos >= m_text.size(); }
  char peek() const { return m_text[m_pos]; }

  void skipWhitespace() {
    while (!atEnd()) {
      char c = peek();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++m_pos;
    }
  }

  JsonValue parseValue(int depth) {
    if (atEnd()) fail(m_pos, "unexpected end of input, expected a value");
    switch (peek()) {
      case '{': return parseObject(depth + 1);
      case '[': return parseArray(depth + 1);
      case '"': return JsonValue::fromString(parseString());
      case 't': expectLiteral("true"); return JsonValue::fromBool(true);
      case 'f': expectLiteral("false"); return JsonValue::fromBool(false);
      case 'n': expectLiteral("null"); return JsonValue();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parseNumber();
        fail(m_pos, "unexpected " + describeByte(peek()) + ", expected a value");
    }
  }

  void expectLiteral(std::string_view word) {
    if (m_text.substr(m_pos, word.size()) != word)
      fail(m_pos, "invalid literal, expected true, false or null");
    m_pos += word.size();
  }

  void checkDepth(int depth) {
    if (depth > kMaxJsonDepth)
      fail(m_pos, "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }

  JsonValue parseObject(int depth) {
    checkDepth(depth);
    ++m_pos;  // '{'
    JsonValue::Object members;
    skipWhitespace();
    if (!atEnd() && peek() == '}') {
      ++m_pos;
      return JsonValue::fromObject(std::move(members));
    }
    for (;;) {
      skipWhitespace();
      if (atEnd()) fail(m_pos, "unexpected end of input inside an object");
      if (peek() != '"')
        fail(m_pos, peek() == '}' ? "expected a member name after ',' (trailing comma?)"
                                  : "expected a member name in double quotes, got " +
                                        describeByte(peek()));
      std::string key = parseString();
      skipWhitespace();
      if (atEnd() || peek() != ':')
        fail(m_pos, "expected ':' after member name \"" + key + "\"");
      ++m_pos;
      skipWhitespace();
      JsonValue value = parseValue(depth);
      members.emplace_back(std::move(key), std::move(value));
      skipWhitespace();
      if (atEnd()) fail(m_pos, "unexpected end of input inside an object");
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      if (peek() == '}') {
        ++m_pos;
        return JsonValue::fromObject(std::move(members));
      }
      fail(m_pos, "expected ',' or '}' after an object member, got " + describeByte(peek()));
    }
  }

  JsonValue parseArray(int depth) {
    checkDepth(depth);
    ++m_pos;  // '['
    JsonValue::Array elements;
    skipWhitespace();
    if (!atEnd() && peek() == ']') {
      ++m_pos;
      return JsonValue::fromArray(std::move(elements));
    }
    for (;;) {
      skipWhitespace();
      if (!atEnd() && peek() == ']') fail(m_pos, "expected a value after ',' (trailing comma?)");
      elements.push_back(parseValue(depth));
      skipWhitespace();
      if (atEnd()) fail(m_pos, "unexpected end of input inside an array");
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      if (peek() == ']') {
        ++m_pos;
        return JsonValue::fromArray(std::move(elements));
      }
      fail(m_pos, "expected ',' or ']' after an array element, got " + describeByte(peek()));
    }
  }

  uint32_t parseHex4(size_t escapeStart) {
    if (m_pos + 4 > m_text.size())
      fail(escapeStart, "invalid \\u escape: expected 4 hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = m_text[m_pos + i];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail(escapeStart, "invalid \\u escape: expected 4 hex digits");
    }
    m_pos += 4;
    return v;
  }

  void parseEscape(std::string& out) {
    size_t start = m_pos;  // at the backslash
    ++m_pos;
    if (atEnd()) fail(start, "unterminated string");
    char c = m_text[m_pos++];
    switch (c) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default: fail(start, "invalid escape \\" + std::string(1, c) + " in string");
    }
    uint32_t cp = parseHex4(start);
    if (cp >= 0xDC00 && cp <= 0xDFFF) fail(start, "unpaired low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      // A high surrogate must be followed at once by an escaped low surrogate.
      if (m_text.substr(m_pos, 2) != "\\u")
        fail(start, "unpaired high surrogate in \\u escape (expected a \\uDC00-\\uDFFF after it)");
      size_t lowStart = m_pos;
      m_pos += 2;
      uint32_t low = parseHex4(lowStart);
      if (low < 0xDC00 || low > 0xDFFF)
        fail(lowStart, "high surrogate followed by a \\u escape that is not a low surrogate");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    appendUtf8(out, cp);
  }

  // Copies one UTF-8 encoded character of 2-4 bytes, rejecting overlong forms, surrogates and
  // code points above U+10FFFF (the table in RFC 3629 §4).
  void copyUtf8Sequence(std::string& out) {
    size_t start = m_pos;
    auto b0 = static_cast<unsigned char>(m_text[m_pos]);
    int extra = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) extra = 1;
    else if (b0 == 0xE0) { extra = 2; lo = 0xA0; }
    else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) extra = 2;
    else if (b0 == 0xED) { extra = 2; hi = 0x9F; }
    else if (b0 == 0xF0) { extra = 3; lo = 0x90; }
    else if (b0 >= 0xF1 && b0 <= 0xF3) extra = 3;
    else if (b0 == 0xF4) { extra = 3; hi = 0x8F; }
    else fail(start, "invalid UTF-8 " + describeByte(m_text[start]) + " in string");
    for (int i = 1; i <= extra; ++i) {
      if (start + i >= m_text.size()) fail(start, "truncated UTF-8 sequence in string");
      auto b = static_cast<unsigned char>(m_text[start + i]);
      unsigned char bl = i == 1 ? lo : 0x80, bh = i == 1 ? hi : 0xBF;
      if (b < bl || b > bh) fail(start, "invalid UTF-8 sequence in string");
    }
    out.append(m_text.substr(start, static_cast<size_t>(extra) + 1));
    m_pos = start + static_cast<size_t>(extra) + 1;
  }

  std::string parseString() {
    size_t open = m_pos;
    ++m_pos;  // opening quote
    std::string out;
    for (;;) {
      // Copy the plain ASCII run in one go: most strings have no escapes.
      size_t runStart = m_pos;
      while (!atEnd()) {
        auto c = static_cast<unsigned char>(peek());
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++m_pos;
      }
      out.append(m_text.substr(runStart, m_pos - runStart));
      if (atEnd()) fail(open, "unterminated string");
      auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++m_pos;
        return out;
      }
      if (c == '\\') {
        parseEscape(out);
      } else if (c < 0x20) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "unescaped control character 0x%02X in string", c);
        fail(m_pos, buf);
      } else {
        copyUtf8Sequence(out);
      }
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  JsonValue parseNumber() {
    size_t start = m_pos;
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      ++m_pos;
    }
    if (atEnd() || !isDigit(peek())) fail(m_pos, "invalid number: expected a digit");
    size_t intStart = m_pos;
    if (peek() == '0') {
      ++m_pos;
      if (!atEnd() && isDigit(peek())) fail(start, "invalid number: leading zeros are not allowed");
    } else {
      while (!atEnd() && isDigit(peek())) ++m_pos;
    }
    size_t intEnd = m_pos;
    size_t fracStart = m_pos, fracEnd = m_pos;
    bool isInteger = true;
    if (!atEnd() && peek() == '.') {
      isInteger = false;
      ++m_pos;
      fracStart = m_pos;
      if (atEnd() || !isDigit(peek())) fail(m_pos, "invalid number: expected a digit after '.'");
      while (!atEnd() && isDigit(peek())) ++m_pos;
      fracEnd = m_pos;
    }
    int64_t exponent = 0;
    if (!atEnd() && (peek() == 'e' || peek() == 'E')) {
      isInteger = false;
      ++m_pos;
      bool expNegative = false;
      if (!atEnd() && (peek() == '+' || peek() == '-')) expNegative = m_text[m_pos++] == '-';
      if (atEnd() || !isDigit(peek())) fail(m_pos, "invalid number: expected a digit in the exponent");
      while (!atEnd() && isDigit(peek())) {
        if (exponent < 100'000'000) exponent = exponent * 10 + (peek() - '0');  // saturate
        ++m_pos;
      }
      if (expNegative) exponent = -exponent;
    }
    std::string_view literal = m_text.substr(start, m_pos - start);

    if (isInteger) {
      int64_t i = 0;
      auto [p, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), i);
      if (ec == std::errc() && p == literal.data() + literal.size()) return JsonValue::fromInt64(i);
      // Too large for int64: fall through to double.
    }
    // from_chars is locale-independent (strtod would read "1.5" wrongly under a German locale,
    // which a Qt application may have set).
    double d = 0;
    auto [p, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), d,
                                   std::chars_format::general);
    if (ec == std::errc() && p == literal.data() + literal.size()) return JsonValue::fromDouble(d);
    if (ec != std::errc::result_out_of_range) fail(start, "invalid number");
    // Out of range: overflow is an error, underflow rounds to zero. The decimal exponent of the
    // first significant digit tells which.
    int64_t decimalExponent = exponent;
    size_t firstNonZero = intStart;
    while (firstNonZero < intEnd && m_text[firstNonZero] == '0') ++firstNonZero;
    if (firstNonZero < intEnd) {
      decimalExponent += static_cast<int64_t>(intEnd - firstNonZero);
    } else {
      size_t z = fracStart;
      while (z < fracEnd && m_text[z] == '0') ++z;
      decimalExponent -= static_cast<int64_t>(z - fracStart);
    }
    if (decimalExponent > 0) fail(start, "number out of range: " + std::string(literal));
    return JsonValue::fromDouble(negative ? -0.0 : 0.0);
  }

  std::string_view m_text;
  size_t m_pos = 0;
};

}  // namespace

Result<JsonValue> parseJson(std::string_view text, JsonError* error) {
  try {
    Parser parser(text);
    return parser.parseDocument();
  } catch (const ParseFailure& f) {
    JsonError e;
    e.offset = std::min(f.offset, text.size());
    e.line = 1;
    size_t lineStart = 0;
    for (size_t i = 0; i < e.offset; ++i)
      if (text[i] == '\n') {
        ++e.line;
        lineStart = i + 1;
      }
    e.column = e.offset - lineStart + 1;
    e.what = f.what;
    Status s = Status::corrupt("JSON error at line " + std::to_string(e.line) + ", column " +
                               std::to_string(e.column) + ": " + e.what);
    if (error) *error = std::move(e);
    return s;
  }
}

}  // namespace rag
