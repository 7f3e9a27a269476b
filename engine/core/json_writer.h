// A small streaming JSON writer: correct escaping, commas and nesting, no DOM.
//
//   JsonWriter w(std::cout);
//   w.beginObject();
//   w.key("passages").value(int64_t{130000});
//   w.key("qa").beginObject(); ... w.endObject();
//   w.endObject();
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace rag {

class JsonWriter {
public:
  explicit JsonWriter(std::ostream& out, bool pretty = false) : m_out(out), m_pretty(pretty) {}

  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(const std::string& v) { return value(std::string_view(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(uint64_t v);
  // The shortest text that reads back as exactly `v`; -0 is written as 0 (parseJson reads "-0"
  // as 0 anyway) and non-finite numbers as null.
  JsonWriter& value(double v);
  JsonWriter& value(bool v);
  JsonWriter& null();

  static void writeEscaped(std::ostream& out, std::string_view s);

private:
  void beforeValue();
  void newline();
  std::ostream& m_out;
  bool m_pretty;
  struct Level { bool array; bool empty; };
  std::vector<Level> m_stack;
  bool m_afterKey = false;
};

}  // namespace rag
