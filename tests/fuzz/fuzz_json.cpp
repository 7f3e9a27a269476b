// The strict JSON reader (engine/core/json.h): any bytes either parse or give an error with a
// position inside the input; a parsed document written by JsonWriter reads back the same.
#include <sstream>
#include <string>

#include "core/json.h"
#include "core/json_writer.h"
#include "fuzz_check.h"

namespace {

using rag::JsonValue;

void write(rag::JsonWriter& w, const JsonValue& v) {
  switch (v.type()) {
    case JsonValue::Type::Null: w.null(); break;
    case JsonValue::Type::Bool: w.value(v.asBool()); break;
    case JsonValue::Type::Number:
      if (std::optional<int64_t> i = v.asInt64()) w.value(*i);
      else w.value(v.asDouble());
      break;
    case JsonValue::Type::String: w.value(v.asString()); break;
    case JsonValue::Type::Array:
      w.beginArray();
      for (const JsonValue& e : v.asArray()) write(w, e);
      w.endArray();
      break;
    case JsonValue::Type::Object:
      w.beginObject();
      for (const auto& [k, e] : v.asObject()) {
        w.key(k);
        write(w, e);
      }
      w.endObject();
      break;
  }
}

bool same(const JsonValue& a, const JsonValue& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case JsonValue::Type::Null: return true;
    case JsonValue::Type::Bool: return a.asBool() == b.asBool();
    case JsonValue::Type::Number: return a.asDouble() == b.asDouble() && a.asInt64() == b.asInt64();
    case JsonValue::Type::String: return a.asString() == b.asString();
    case JsonValue::Type::Array:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!same(a.asArray()[i], b.asArray()[i])) return false;
      return true;
    case JsonValue::Type::Object:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (a.asObject()[i].first != b.asObject()[i].first ||
            !same(a.asObject()[i].second, b.asObject()[i].second))
          return false;
      return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = rag::fuzz::asText(data, size);
  rag::JsonError where;
  rag::Result<JsonValue> doc = rag::parseJson(text, &where);
  if (!doc) {
    RAG_FUZZ_CHECK(where.offset <= size);
    RAG_FUZZ_CHECK(where.line >= 1 && where.column >= 1);
    RAG_FUZZ_CHECK(!where.what.empty());
    return 0;
  }
  std::ostringstream out;
  rag::JsonWriter w(out);
  write(w, *doc);
  rag::Result<JsonValue> again = rag::parseJson(out.str());
  RAG_FUZZ_CHECK(again.isOk());
  RAG_FUZZ_CHECK(same(*doc, *again));
  return 0;
}
