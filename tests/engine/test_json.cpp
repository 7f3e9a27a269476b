#include <QtTest>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "core/json.h"
#include "core/json_writer.h"

using namespace rag;

namespace {

JsonValue parseOk(std::string_view text) {
  Result<JsonValue> v = parseJson(text);
  if (!v) qWarning("unexpected failure on %s: %s", std::string(text).c_str(),
                   v.status().message().c_str());
  return v.isOk() ? std::move(v).value() : JsonValue();
}

JsonError parseError(std::string_view text) {
  JsonError e;
  Result<JsonValue> v = parseJson(text, &e);
  if (v) qWarning("unexpected success on %s", std::string(text).c_str());
  return e;
}

}  // namespace

class TestJson : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void scalars() {
    QVERIFY(parseOk("null").isNull());
    QVERIFY(parseOk(" true ").asBool());
    QVERIFY(!parseOk("false").asBool());
    QCOMPARE(parseOk("\"hi\"").asString(), std::string("hi"));
    QCOMPARE(parseOk("\"\"").asString(), std::string());
    QCOMPARE(parseOk("[]").size(), size_t{0});
    QVERIFY(parseOk("{}").isObject());
    QCOMPARE(parseOk("{}").size(), size_t{0});
  }

  void numbers() {
    QCOMPARE(parseOk("0").asInt64(), std::optional<int64_t>(0));
    QCOMPARE(parseOk("-0").asDouble(), 0.0);
    QCOMPARE(parseOk("-17").asInt64(), std::optional<int64_t>(-17));
    QCOMPARE(parseOk("3.25").asDouble(), 3.25);
    QCOMPARE(parseOk("-1.5e3").asDouble(), -1500.0);
    QCOMPARE(parseOk("2E-2").asDouble(), 0.02);
    QCOMPARE(parseOk("1e+2").asDouble(), 100.0);
    // Exact integers: 3.0 and 1e3 are integers; 3.5 is not; ids above 2^53 stay exact.
    QCOMPARE(parseOk("3.0").asInt64(), std::optional<int64_t>(3));
    QCOMPARE(parseOk("1e3").asInt64(), std::optional<int64_t>(1000));
    QVERIFY(!parseOk("3.5").asInt64());
    QCOMPARE(parseOk("9007199254740993").asInt64(), std::optional<int64_t>(9007199254740993LL));
    QCOMPARE(parseOk("-9223372036854775808").asInt64(),
             std::optional<int64_t>(std::numeric_limits<int64_t>::min()));
    // Beyond int64: still a number, as a double, but not an integer.
    JsonValue big = parseOk("18446744073709551616");
    QVERIFY(big.isNumber());
    QCOMPARE(big.asDouble(), 18446744073709551616.0);
    QVERIFY(!big.asInt64());
    // Underflow rounds to zero; overflow is an error.
    QCOMPARE(parseOk("1e-400").asDouble(), 0.0);
    QCOMPARE(parseOk("0.0000001e-400").asDouble(), 0.0);
    QVERIFY(parseError("1e400").what.find("out of range") != std::string::npos);
    QVERIFY(parseError("-123456789e400").what.find("out of range") != std::string::npos);
    QCOMPARE(parseOk("0.1").asDouble(), 0.1);  // correctly rounded, locale-independent
  }

  void badNumbers() {
    for (const char* bad : {"01", "-", "+1", "1.", ".5", "1e", "1e+", "-a", "0x10", "NaN",
                            "Infinity", "-Infinity", "1.5.2", "00"}) {
      JsonError e;
      QVERIFY2(!parseJson(bad, &e).isOk(), bad);
    }
    QCOMPARE(parseError("01").what, std::string("invalid number: leading zeros are not allowed"));
    QCOMPARE(parseError("[1.]").column, size_t{4});
  }

  void stringEscapes() {
    QCOMPARE(parseOk("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"").asString(), std::string("a\"b\\c/d\b\f\n\r\t"));
    QCOMPARE(parseOk("\"\\u0041\\u00e9\\u20AC\"").asString(), std::string("A\xC3\xA9\xE2\x82\xAC"));
    QCOMPARE(parseOk("\"\\u0000\"").asString(), std::string("\0", 1));
    // A surrogate pair is one code point: U+1F600 (4 UTF-8 bytes), U+10FFFF at the top.
    QCOMPARE(parseOk("\"\\ud83d\\ude00\"").asString(), std::string("\xF0\x9F\x98\x80"));
    QCOMPARE(parseOk("\"\\uDBFF\\uDFFF\"").asString(), std::string("\xF4\x8F\xBF\xBF"));
    // Raw UTF-8 passes through unchanged.
    QCOMPARE(parseOk("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"").asString(),
             std::string("caf\xC3\xA9 \xF0\x9F\x98\x80"));
  }

  void badStrings() {
    JsonError e = parseError("\"ab\\x\"");
    QCOMPARE(e.column, size_t{4});
    QVERIFY(e.what.find("invalid escape") != std::string::npos);
    QVERIFY(parseError("\"\\u12\"").what.find("4 hex digits") != std::string::npos);
    QVERIFY(parseError("\"\\u12G4\"").what.find("4 hex digits") != std::string::npos);
    QVERIFY(parseError("\"\\ud83d\"").what.find("unpaired high surrogate") != std::string::npos);
    QVERIFY(parseError("\"\\ud83dx\"").what.find("unpaired high surrogate") != std::string::npos);
    QVERIFY(parseError("\"\\ud83d\\u0041\"").what.find("not a low surrogate") != std::string::npos);
    QVERIFY(parseError("\"\\ude00\"").what.find("unpaired low surrogate") != std::string::npos);
    QVERIFY(parseError("\"abc").what.find("unterminated") != std::string::npos);
    QCOMPARE(parseError("\"abc").column, size_t{1});  // points at the opening quote
    e = parseError("\"a\tb\"");
    QVERIFY(e.what.find("control character 0x09") != std::string::npos);
    QCOMPARE(e.column, size_t{3});
    // Invalid UTF-8: a lone continuation byte, an overlong encoding, an encoded surrogate,
    // a code point above U+10FFFF and a truncated sequence.
    for (const char* bad : {"\"\x80\"", "\"\xC0\xAF\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"",
                            "\"\xE2\x82\""}) {
      JsonError err;
      QVERIFY(!parseJson(bad, &err).isOk());
      QVERIFY2(err.what.find("UTF-8") != std::string::npos, err.what.c_str());
    }
  }

  void nesting() {
    JsonValue v = parseOk("{\"a\": [1, {\"b\": null, \"c\": [true, \"x\"]}], \"d\": {\"e\": {}}, \"a2\": -1}");
    QVERIFY(v.isObject());
    QCOMPARE(v.size(), size_t{3});
    const JsonValue* a = v.find("a");
    QVERIFY(a && a->isArray());
    QCOMPARE(a->size(), size_t{2});
    QCOMPARE(a->asArray()[0].asInt64(), std::optional<int64_t>(1));
    const JsonValue& inner = a->asArray()[1];
    QVERIFY(inner.find("b") && inner.find("b")->isNull());
    QCOMPARE(inner.find("c")->asArray()[1].asString(), std::string("x"));
    QVERIFY(v.find("d")->find("e")->isObject());
    QVERIFY(!v.find("missing"));
    QVERIFY(!a->find("a"));  // find on a non-object
    // Members keep document order.
    QCOMPARE(v.asObject()[0].first, std::string("a"));
    QCOMPARE(v.asObject()[2].first, std::string("a2"));
  }

  void duplicateKeysLastWins() {
    JsonValue v = parseOk("{\"k\": 1, \"k\": 2}");
    QCOMPARE(v.size(), size_t{2});
    QCOMPARE(v.find("k")->asInt64(), std::optional<int64_t>(2));
  }

  void whitespaceAndBom() {
    QCOMPARE(parseOk(" \t\r\n[ 1 ,\n2 ] \n").size(), size_t{2});
    QVERIFY(parseOk("\xEF\xBB\xBF{\"a\":1}").isObject());
  }

  void structuralErrorsWithPositions() {
    JsonError e = parseError("{\"a\": 1,\n \"b\" 2}");
    QCOMPARE(e.line, size_t{2});
    QCOMPARE(e.column, size_t{6});
    QCOMPARE(e.offset, size_t{14});
    QVERIFY(e.what.find("expected ':'") != std::string::npos);

    e = parseError("[1, 2");
    QVERIFY(e.what.find("end of input") != std::string::npos);
    QCOMPARE(e.column, size_t{6});

    e = parseError("[1 2]");
    QVERIFY(e.what.find("expected ',' or ']'") != std::string::npos);
    QCOMPARE(e.column, size_t{4});

    e = parseError("{\"a\":1 \"b\":2}");
    QVERIFY(e.what.find("expected ',' or '}'") != std::string::npos);

    QVERIFY(parseError("[1,]").what.find("trailing comma") != std::string::npos);
    QVERIFY(parseError("{\"a\":1,}").what.find("trailing comma") != std::string::npos);
    QVERIFY(parseError("{a:1}").what.find("double quotes") != std::string::npos);
    QVERIFY(parseError("").what.find("end of input") != std::string::npos);
    QVERIFY(parseError("   ").what.find("end of input") != std::string::npos);
    QVERIFY(parseError("tru").what.find("literal") != std::string::npos);
    QVERIFY(parseError("nul").what.find("literal") != std::string::npos);

    e = parseError("{} x");
    QVERIFY(e.what.find("after the JSON value") != std::string::npos);
    QCOMPARE(e.column, size_t{4});
    QVERIFY(parseError("[1] [2]").what.find("after the JSON value") != std::string::npos);

    // The Status message carries the position too.
    Result<JsonValue> r = parseJson("[1,\n  x]");
    QVERIFY(!r);
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    QVERIFY2(r.status().message().find("line 2, column 3") != std::string::npos,
             r.status().message().c_str());
  }

  void depthLimit() {
    std::string ok(kMaxJsonDepth, '[');
    ok += std::string(kMaxJsonDepth, ']');
    QVERIFY(parseJson(ok).isOk());
    std::string deep(100000, '[');  // would overflow the stack without the limit
    JsonError e;
    QVERIFY(!parseJson(deep, &e).isOk());
    QVERIFY(e.what.find("nesting deeper") != std::string::npos);
  }

  void builtValues() {
    JsonValue::Object o;
    o.emplace_back("n", JsonValue::fromInt64(5));
    o.emplace_back("s", JsonValue::fromString("v"));
    JsonValue v = JsonValue::fromObject(std::move(o));
    QCOMPARE(v.find("n")->asInt64(), std::optional<int64_t>(5));
    QCOMPARE(v.find("s")->asString(), std::string("v"));
    QVERIFY(!JsonValue::fromDouble(std::nan("")).asInt64());
    QVERIFY(!JsonValue::fromString("7").asInt64());
    QCOMPARE(jsonTypeName(JsonValue::Type::Array), std::string_view("array"));
  }

  // JsonWriter::value(double) writes the shortest text that reads back as the same double, so
  // files such as workflows and checkpoint states round-trip bit for bit.
  void writerExactDoublesReadBack() {
    for (double d : {0.0, -0.0, 0.1, 0.7, 0.1234567890123, 1.0 / 3.0, 1e-300, 6.02214076e23,
                     std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min()}) {
      std::ostringstream os;
      JsonWriter(os).value(d);
      JsonValue v = parseOk(os.str());
      QVERIFY2(v.isNumber(), os.str().c_str());
      QCOMPARE(v.asDouble(), d);
    }
    std::ostringstream os;
    JsonWriter(os).beginArray().value(0.7).value(2.0).value(-0.0).value(std::nan("")).endArray();
    QCOMPARE(os.str(), std::string("[0.7,2,0,null]"));  // the same text after a round trip
  }

  // Model output can stop inside a UTF-8 character: the writer still writes JSON its own parser
  // reads, each byte that starts no well-formed sequence becoming U+FFFD, valid text unchanged.
  void writerKeepsStringsValidUtf8() {
    const std::string fffd = "\xEF\xBF\xBD";
    const std::pair<std::string, std::string> cases[] = {
        {"caf\xC3\xA9 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xF0\x9F\x98\x80"},  // valid: as is
        {"ab\xE2\x82", "ab" + fffd + fffd},                                   // cut inside a character
        {"\xFF" "x", fffd + "x"},                                                // never a UTF-8 byte
        {"\xC0\xAF", fffd + fffd},                                              // overlong '/'
        {"\xED\xA0\x80", fffd + fffd + fffd},                                  // a surrogate
        {"\x80" "a\xC3\xA9", fffd + "a\xC3\xA9"},                               // a stray continuation byte
    };
    for (const auto& [in, out] : cases) {
      std::ostringstream os;
      JsonWriter(os).value(in);
      JsonValue v = parseOk(os.str());
      QCOMPARE(v.asString(), out);
    }
  }
};

QTEST_GUILESS_MAIN(TestJson)
#include "test_json.moc"
