// A small JSON reader: strict RFC 8259 recursive descent into a DOM (JsonValue), with the byte
// offset, line and column of the first error. Writing is JsonWriter's job (core/json_writer.h).
//
//   JsonError where;
//   Result<JsonValue> doc = parseJson(text, &where);
//   if (!doc) return doc.status().withContext("reading config.json");   // names line and column
//   if (const JsonValue* dim = doc->find("hidden_size"); dim && dim->asInt64())
//     params.hiddenSize = *dim->asInt64();
//
// What it accepts: exactly one value, surrounded by optional whitespace (an initial UTF-8 byte
// order mark is skipped). Strings must be valid UTF-8; \uXXXX escapes are decoded to UTF-8 and a
// surrogate pair becomes one code point, while an unpaired surrogate is an error (no UTF-8
// string can hold it). Numbers follow the JSON grammar exactly (no leading '+', no leading
// zeros, no NaN/Infinity); one too large for a double is an error, one too small becomes 0.
// Nesting deeper than kMaxJsonDepth is an error rather than a stack overflow.
// Objects keep their members in document order; a repeated key is kept, and find() returns
// its last occurrence (what JavaScript and Python do).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rag/status.h"

namespace rag {

inline constexpr int kMaxJsonDepth = 512;

class JsonValue {
public:
  enum class Type { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<JsonValue>;
  using Member = std::pair<std::string, JsonValue>;
  using Object = std::vector<Member>;

  JsonValue() = default;  // null
  static JsonValue fromBool(bool b);
  static JsonValue fromDouble(double d);
  // An integer literal keeps its exact value next to the double (ids above 2^53 survive).
  static JsonValue fromInt64(int64_t i);
  static JsonValue fromString(std::string s);
  static JsonValue fromArray(Array a);
  static JsonValue fromObject(Object o);

  Type type() const { return static_cast<Type>(m_data.index()); }
  bool isNull() const { return type() == Type::Null; }
  bool isBool() const { return type() == Type::Bool; }
  bool isNumber() const { return type() == Type::Number; }
  bool isString() const { return type() == Type::String; }
  bool isArray() const { return type() == Type::Array; }
  bool isObject() const { return type() == Type::Object; }

  // Accessors for the matching type; calling one on another type is a bug (asserted) and
  // returns an empty value in release builds.
  bool asBool() const;
  double asDouble() const;
  // The number as an integer when it is one exactly and fits int64 (3, 3.0 and 3e0 do; 3.5 and
  // 1e19 do not); nullopt otherwise, including for non-numbers.
  std::optional<int64_t> asInt64() const;
  const std::string& asString() const;
  const Array& asArray() const;
  const Object& asObject() const;

  // The last member named `key`, or nullptr when absent or when this is not an object.
  const JsonValue* find(std::string_view key) const;
  // Elements of an array or members of an object; 0 for scalars.
  size_t size() const;

private:
  struct Number {
    double value = 0;
    bool isInt = false;   // the literal was an integer that fits int64
    int64_t intValue = 0;
  };
  std::variant<std::monostate, bool, Number, std::string, Array, Object> m_data;
};

std::string_view jsonTypeName(JsonValue::Type t);  // "null", "bool", "number", ...

// Where parsing stopped. line and column are 1-based; column counts bytes.
struct JsonError {
  size_t offset = 0;
  size_t line = 0;
  size_t column = 0;
  std::string what;  // "expected ',' or '}' after an object member"
};

// Parses one JSON document. On failure the Status (code Corrupt) reads
// "JSON error at line L, column C: <what>" and `error`, when given, holds the same parts.
Result<JsonValue> parseJson(std::string_view text, JsonError* error = nullptr);

}  // namespace rag
