#include <QtTest>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "model/span_constraint.h"

using namespace rag::model;

namespace {

// Walks `text` byte by byte from the root; true when it is a substring of the source.
bool contains(const SpanSource& s, const std::string& text) {
  int32_t st = SpanSource::kRoot;
  for (char c : text) {
    st = s.next(st, static_cast<uint8_t>(c));
    if (st == SpanSource::kNone) return false;
  }
  return true;
}

// A vocabulary: id 0 is the end-of-sequence token (no bytes), the rest are the given pieces.
std::shared_ptr<const TokenPieces> vocab(const std::vector<std::string>& pieces) {
  std::vector<std::string> bytes = {""};
  bytes.insert(bytes.end(), pieces.begin(), pieces.end());
  return TokenPieces::make(std::move(bytes), {0});
}

// The rules of span_constraint.h written out per token, without the trie: whether `text`
// (generated so far) followed by `piece` stays a span of `source`, by std::string::find.
bool referenceAllows(const std::string& source, const std::string& text, const std::string& piece,
                     const std::vector<std::string>& stops, bool isEnd) {
  auto normal = [](const std::string& t, bool isSource) {
    std::string out;
    for (char ch : t) {
      auto c = static_cast<unsigned char>(ch);
      if (c == ' ' || c == '\t' || c == '\r') c = ' ';
      else if (c < 0x20 || c == 0x7f) c = '|';  // a break
      else c = static_cast<unsigned char>(std::tolower(c));
      if (c == ' ' && (out.empty() || out.back() == ' ' || (isSource && out.back() == '|'))) continue;
      if (!isSource && c == '|') return std::string("\x01");  // matches nothing
      out.push_back(static_cast<char>(c));
    }
    return out;
  };
  const std::string src = normal(source, true);
  std::string cut = piece;
  bool stopped = false;
  size_t at = std::string::npos;
  for (const std::string& s : stops) at = std::min(at, piece.find(s));
  if (at != std::string::npos) cut = piece.substr(0, at), stopped = true;
  const std::string t = normal(text + cut, false);
  if (isEnd || stopped) return !t.empty() && src.find(t) != std::string::npos;
  return src.find(t) != std::string::npos;
}

// The ids mask() leaves allowed.
std::vector<int32_t> allowed(SpanConstraint c, size_t vocabSize, const std::vector<std::string>& stops = {}) {
  std::vector<float> logits(vocabSize, 1.0f);
  c.mask(logits, stops, {});
  std::vector<int32_t> out;
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isfinite(logits[i])) out.push_back(static_cast<int32_t>(i));
  return out;
}

}  // namespace

class TestSpanConstraint : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // The automaton accepts exactly the substrings: checked against std::string::find for every
  // substring of a random text and for random strings that are not in it.
  void automatonAcceptsExactlyTheSubstrings() {
    std::mt19937 rng(7);
    for (int round = 0; round < 20; ++round) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 60);
      for (int i = 0; i < n; ++i) text.push_back(static_cast<char>('a' + rng() % 3));
      auto s = SpanSource::build(text);
      QVERIFY(s->states() <= 2 * text.size() + 1);
      for (size_t b = 0; b < text.size(); ++b)
        for (size_t e = b + 1; e <= text.size(); ++e) QVERIFY(contains(*s, text.substr(b, e - b)));
      for (int k = 0; k < 200; ++k) {
        std::string probe;
        const int m = 1 + static_cast<int>(rng() % 8);
        for (int i = 0; i < m; ++i) probe.push_back(static_cast<char>('a' + rng() % 3));
        QCOMPARE(contains(*s, probe), text.find(probe) != std::string::npos);
      }
    }
  }

  void normalisesCaseAndSpacesAndBreaksAtNewlines() {
    auto s = SpanSource::build("Dog,  domestic\tdog: a CANID.\nkind of: canine\n");
    QVERIFY(contains(*s, "dog, domestic dog"));  // two spaces and a tab read as one space
    QVERIFY(contains(*s, "a canid."));          // case ignored
    QVERIFY(!contains(*s, "Dog"));              // the walk itself takes normalised bytes
    QVERIFY(!contains(*s, "canid. kind"));       // a newline is no space: spans stay on their line
    QVERIFY(!contains(*s, "canid.kind"));
  }

  // The generated text may only grow into a span: after " canine" only pieces that continue a
  // span, and the end, are allowed; before any character the end is not.
  void masksTokensThatLeaveTheSource() {
    auto source = SpanSource::build("dog: a canid. kind of: canine, canid.\nwolf: a wild canine.\n");
    auto v = vocab({" can", "ine", "id", " wolf", " cat", "\n", "ine\n", " ", "x", "INE", ",", " Dog"});
    SpanConstraint c(source, v);
    const std::vector<std::string> stops = {"\n"};
    // Empty text: every piece found in the source, "ine\n" (stops after "ine") and " " (leading
    // whitespace is free); not the end (id 0) or "\n" (either would stop with nothing).
    QCOMPARE(allowed(c, v->bytes.size(), stops),
             (std::vector<int32_t>{1, 2, 3, 4, 7, 8, 10, 11, 12}));
    c.advance(1);  // " can"
    QVERIFY(c.started());
    // "can" + ...: "ine", "id", "ine\n" (stops after "canine"), "INE" (case), the end, "\n";
    // not " " ("can " is in no span).
    QCOMPARE(allowed(c, v->bytes.size(), stops), (std::vector<int32_t>{0, 2, 3, 6, 7, 10}));
    c.advance(2);  // "canine"
    // "canine" is followed by "," (kind of: canine, canid) and by "." (wild canine.): "," allowed;
    // a space would need "canine ", which is not in the source; the newline stops here.
    QCOMPARE(allowed(c, v->bytes.size(), stops), (std::vector<int32_t>{0, 6, 11}));
    c.advance(11);
    QVERIFY(!c.outside());
  }

  void pendingSpaceMustMatchASpace() {
    auto source = SpanSource::build("grain sorghum: a cereal.\n");
    auto v = vocab({"grain", " ", "sorghum", " sorghum", "cereal"});
    SpanConstraint c(source, v);
    c.advance(1);  // "grain"
    // "grain" + "sorghum" (no space) is not a span; with a space (alone or in the piece) it is.
    QCOMPARE(allowed(c, v->bytes.size()), (std::vector<int32_t>{0, 2, 4}));
    c.advance(2);  // "grain "
    // A second space joins the first; "sorghum" with or without its own leading space.
    QCOMPARE(allowed(c, v->bytes.size()), (std::vector<int32_t>{0, 2, 3, 4}));
    c.advance(3);  // "grain sorghum"
    QVERIFY(!c.outside());
    c.reset();
    QVERIFY(!c.started());
    QCOMPARE(allowed(c, v->bytes.size()), (std::vector<int32_t>{1, 2, 3, 4, 5}));
  }

  // Nothing allowed (an empty source): the row is left as it was, and a token outside the
  // source lifts the constraint rather than blocking the sequence.
  void neverBlocksASequence() {
    auto v = vocab({"a", "b"});
    SpanConstraint empty(SpanSource::build(""), v);
    std::vector<float> logits = {0.5f, 1.0f, 2.0f};
    QCOMPARE(empty.mask(logits, {}, {}), size_t{0});
    QCOMPARE(logits, (std::vector<float>{0.5f, 1.0f, 2.0f}));

    SpanConstraint c(SpanSource::build("a"), v);
    c.advance(2);  // "b": outside
    QVERIFY(c.outside());
    QCOMPARE(allowed(c, v->bytes.size()).size(), size_t{3});
  }

  // Below the floor at the start the constraint lifts for good; at or above it, it masks.
  void liftsWhenTheModelIsNotCopying() {
    auto v = vocab({"a", "b"});
    SpanConstraint c(SpanSource::build("a"), v);
    // "a" (in the source) is 1/9 as probable as "b" (not): kept at floor 0.05, lifted at 0.2
    std::vector<float> logits = {-std::numeric_limits<float>::infinity(), 0.0f, std::log(9.0f)};
    std::vector<float> row = logits;
    QCOMPARE(c.mask(row, {}, {}, 0.05f), size_t{1});
    QVERIFY(std::isfinite(row[1]) && !std::isfinite(row[2]));
    QVERIFY(!c.outside());
    row = logits;
    QCOMPARE(c.mask(row, {}, {}, 0.2f), size_t{3});
    QCOMPARE(row, logits);
    QVERIFY(c.outside());
    row = logits;
    c.mask(row, {}, {}, 0.0f);  // lifted: stays lifted
    QCOMPARE(row, logits);
    // Within the first word the floor still applies ("m" then a word the passages do not hold:
    // an answer from memory); after it, it no longer does (a miscopy, which the constraint fixes).
    auto v2 = vocab({"a", "b", "c", " ", "ab"});
    SpanConstraint inWord(SpanSource::build("ab ab"), v2);
    inWord.advance(1);  // "a"
    std::vector<float> strays = {0.0f, 0.0f, 0.0f, 10.0f, 0.0f, 0.0f};  // "c" far more likely than "b"
    QCOMPARE(inWord.mask(strays, {}, {}, 0.5f), size_t{6});            // lifted
    QVERIFY(inWord.outside());
    SpanConstraint later(SpanSource::build("ab ab"), v2);
    later.advance(5);  // "ab"
    later.advance(4);  // " "
    later.advance(1);  // "a"
    strays = {0.0f, 0.0f, 0.0f, 10.0f, 0.0f, 0.0f};
    QCOMPARE(later.mask(strays, {}, {}, 0.5f), size_t{2});  // the end and "b"
    QVERIFY(std::isfinite(strays[0]) && std::isfinite(strays[2]) && !std::isfinite(strays[3]));
    QVERIFY(!later.outside());
  }

  // The trie walk decides every token as the per-token rules do: random sources, vocabularies
  // (spaces, case, newlines, stop strings inside pieces) and texts.
  void maskAgreesWithThePerTokenRules() {
    std::mt19937 rng(11);
    const std::string alphabet = "abAB \n.";
    auto draw = [&](int n) {
      std::string s;
      for (int i = 0; i < n; ++i) s.push_back(alphabet[rng() % alphabet.size()]);
      return s;
    };
    for (int round = 0; round < 200; ++round) {
      const std::string source = draw(1 + static_cast<int>(rng() % 30));
      std::vector<std::string> pieces;
      for (int i = 0; i < 40; ++i) pieces.push_back(draw(1 + static_cast<int>(rng() % 4)));
      auto v = vocab(pieces);
      const std::vector<std::string> stops = round % 2 ? std::vector<std::string>{"\n"} : std::vector<std::string>{"b."};
      SpanConstraint c(SpanSource::build(source), v);
      std::string text;
      for (int step = 0; step < 4 && !c.outside(); ++step) {
        std::vector<float> logits(v->bytes.size(), 0.0f);
        SpanConstraint probe = c;
        probe.mask(logits, stops, {});
        std::vector<bool> want;
        for (size_t t = 0; t < v->bytes.size(); ++t)
          want.push_back(referenceAllows(source, text, v->bytes[t], stops, t == 0));
        const auto expected = static_cast<size_t>(std::count(want.begin(), want.end(), true));
        for (size_t t = 0; t < v->bytes.size(); ++t)  // nothing allowed: the row is left as it was
          QVERIFY2(std::isfinite(logits[t]) == (want[t] || expected == 0),
                   (source + " | " + text + " | " + v->bytes[t]).c_str());
        // Follow an allowed token that does not stop.
        int32_t next = -1;
        for (size_t t = 1; t < v->bytes.size(); ++t)
          if (std::isfinite(logits[t]) && v->bytes[t].find(stops[0]) == std::string::npos &&
              v->bytes[t].find('\n') == std::string::npos) next = static_cast<int32_t>(t);
        if (next < 0 || expected == 0) break;
        c.advance(next);
        text += v->bytes[static_cast<size_t>(next)];
      }
    }
  }

  void stopTokenIdsEndLikeEndOfSequence() {
    auto v = vocab({"a", "<stop>"});
    SpanConstraint c(SpanSource::build("a"), v);
    std::vector<float> logits(3, 0.0f);
    const std::vector<int32_t> stopIds = {2};
    c.mask(logits, {}, stopIds);
    QVERIFY(std::isfinite(logits[1]) && !std::isfinite(logits[0]) && !std::isfinite(logits[2]));
    c.advance(1);
    logits.assign(3, 0.0f);
    c.mask(logits, {}, stopIds);
    QVERIFY(std::isfinite(logits[0]) && !std::isfinite(logits[1]) && std::isfinite(logits[2]));
  }
};

QTEST_GUILESS_MAIN(TestSpanConstraint)
#include "test_span_constraint.moc"
