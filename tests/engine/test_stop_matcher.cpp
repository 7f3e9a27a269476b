#include <QtTest>

#include <random>
#include <string>
#include <vector>

#include "model/stop_matcher.h"
#include "model/unicode_tables.h"

using namespace rag::model;

namespace {

QString q(const std::string& s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

// Feeds the pieces in order and returns the concatenated emits; `last` is the last Action.
std::string feedAll(StopMatcher& m, const std::vector<std::string>& pieces,
                    StopMatcher::Action* last = nullptr) {
  std::string out;
  for (const std::string& p : pieces) {
    StopMatcher::Action a = m.feed(p);
    out += a.emit;
    if (last) *last = a;
    if (a.stopped) break;
  }
  return out;
}

}  // namespace

class TestStopMatcher : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void stopStringSplitAcrossThreePieces() {
    std::vector<std::string> stops = {"</answer>"};
    StopMatcher m(stops);
    StopMatcher::Action a = m.feed("The answer is 42</an");
    QCOMPARE(q(a.emit), QString("The answer is 42"));
    QVERIFY(!a.stopped);
    QCOMPARE(q(m.pending()), QString("</an"));
    a = m.feed("swe");
    QCOMPARE(q(a.emit), QString());
    QVERIFY(!a.stopped);
    a = m.feed("r> and more");
    QVERIFY(a.stopped);
    QCOMPARE(a.stopIndex, 0);
    QCOMPARE(q(a.emit), QString());
    QCOMPARE(q(a.finalText), QString("The answer is 42"));
    QCOMPARE(q(m.text()), QString("The answer is 42"));
    QVERIFY(m.stopped());

    // Later pieces change nothing.
    a = m.feed("ignored");
    QVERIFY(a.stopped);
    QCOMPARE(q(a.emit), QString());
    QCOMPARE(q(a.finalText), QString("The answer is 42"));
    QCOMPARE(q(m.flush()), QString());
  }

  void stopInsideOnePieceEmitsTheTextBeforeIt() {
    std::vector<std::string> stops = {"\n\n"};
    StopMatcher m(stops);
    StopMatcher::Action a = m.feed("one");
    QCOMPARE(q(a.emit), QString("one"));
    a = m.feed(" two\n\nthree");
    QVERIFY(a.stopped);
    QCOMPARE(q(a.emit), QString(" two"));
    QCOMPARE(q(a.finalText), QString("one two"));
  }

  void heldBackPrefixThatIsNotAStop() {
    std::vector<std::string> stops = {"STOP"};
    StopMatcher m(stops);
    StopMatcher::Action a = m.feed("abc ST");
    QCOMPARE(q(a.emit), QString("abc "));
    QCOMPARE(q(m.pending()), QString("ST"));
    a = m.feed("ARS");  // "STARS": not a stop, but its last "S" could start one
    QCOMPARE(q(a.emit), QString("STAR"));
    QCOMPARE(q(m.pending()), QString("S"));
    a = m.feed(" shine");
    QCOMPARE(q(a.emit), QString("S shine"));
    QCOMPARE(q(m.pending()), QString());
    a = m.feed(" STO");
    QCOMPARE(q(a.emit), QString(" "));
    QCOMPARE(q(m.flush()), QString("STO"));  // generation ended: the prefix was text after all
    QCOMPARE(q(m.text()), QString("abc STARS shine STO"));
    QVERIFY(!m.stopped());
  }

  void overlappingCandidates() {
    // "aab" inside "aaab": the first "a" is safe once three have arrived.
    std::vector<std::string> stops = {"aab"};
    StopMatcher m(stops);
    QCOMPARE(q(m.feed("a").emit), QString());
    QCOMPARE(q(m.feed("a").emit), QString());
    QCOMPARE(q(m.feed("a").emit), QString("a"));
    StopMatcher::Action a = m.feed("b");
    QVERIFY(a.stopped);
    QCOMPARE(q(a.finalText), QString("a"));

    // "abc" is held as a prefix of "abcd", then "bce" completes inside it.
    std::vector<std::string> two = {"abcd", "bce"};
    StopMatcher n(two);
    QCOMPARE(q(n.feed("xabc").emit), QString("x"));
    a = n.feed("e");
    QVERIFY(a.stopped);
    QCOMPARE(a.stopIndex, 1);
    QCOMPARE(q(a.finalText), QString("xa"));
  }

  void multipleStopStrings() {
    std::vector<std::string> stops = {"", "\nQuestion:", "###"};  // the empty one is ignored
    std::string text = "first line###\nQuestion: more";
    StopMatcher m(stops);
    StopMatcher::Action last;
    std::vector<std::string> chars;
    for (char c : text) chars.emplace_back(1, c);
    std::string emitted = feedAll(m, chars, &last);
    QVERIFY(last.stopped);
    QCOMPARE(last.stopIndex, 2);  // index in the caller's list
    QCOMPARE(q(emitted), QString("first line"));
    QCOMPARE(q(last.finalText), QString("first line"));

    // Both complete in one piece: the earlier occurrence wins.
    StopMatcher n(stops);
    StopMatcher::Action a = n.feed("x\nQuestion:y###");
    QCOMPARE(a.stopIndex, 1);
    QCOMPARE(q(a.finalText), QString("x"));

    // Two stop strings starting at the same place: the first in the list.
    std::vector<std::string> nested = {"abc", "ab"};
    StopMatcher k(nested);
    a = k.feed("zabcz");
    QCOMPARE(a.stopIndex, 0);
    QCOMPARE(q(a.finalText), QString("z"));
  }

  void utf8TextIsNeverCutInsideACharacter() {
    std::vector<std::string> stops = {"終わり"};
    std::string text = "こんにちは、世界。😀終わりです";
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size(); i += 2) pieces.push_back(text.substr(i, 2));
    StopMatcher m(stops);
    std::string emitted;
    StopMatcher::Action a;
    for (const std::string& p : pieces) {
      a = m.feed(p);
      QVERIFY2(unicode::isValidUtf8(a.emit), qPrintable(QString::number(emitted.size())));
      emitted += a.emit;
      if (a.stopped) break;
    }
    QVERIFY(a.stopped);
    QCOMPARE(q(emitted), QString::fromUtf8("こんにちは、世界。😀"));
    QCOMPARE(q(a.finalText), QString::fromUtf8("こんにちは、世界。😀"));

    // Byte by byte without a stop: every emit is whole characters; flush returns the rest.
    std::string plain = "héllo wörld 😀";
    StopMatcher n(std::vector<std::string>{"zz"});
    std::string out;
    for (char c : plain) {
      a = n.feed(std::string(1, c));
      QVERIFY(unicode::isValidUtf8(a.emit));
      out += a.emit;
    }
    out += n.flush();
    QCOMPARE(q(out), QString::fromUtf8("héllo wörld 😀"));

    // A stop string that shares a lead byte with the text: "é" (C3 A9) vs stop "ë" (C3 AB).
    StopMatcher e(std::vector<std::string>{"ë!"});
    QCOMPARE(q(e.feed("caf\xC3").emit), QString("caf"));
    QCOMPARE(q(e.feed("\xA9 ").emit), QString::fromUtf8("é "));
    a = e.feed("no\xC3\xAB!");
    QVERIFY(a.stopped);
    QCOMPARE(q(a.finalText), QString::fromUtf8("café no"));
  }

  void randomSplitsAgreeWithSearchingTheWholeText() {
    // Reference: after each piece, the text so far either contains a stop string (then the
    // final text ends where the leftmost one begins) or not; what was emitted plus what is held
    // back is always the text so far.
    std::mt19937 rng(1234);
    const std::vector<std::string> stops = {"abc", "bb", "cab a", "ccc"};
    for (int trial = 0; trial < 500; ++trial) {
      std::string text;
      size_t len = rng() % 40;
      for (size_t i = 0; i < len; ++i) text.push_back("abc "[rng() % 4]);
      StopMatcher m(stops);
      std::string soFar, emitted;
      bool stopped = false;
      for (size_t pos = 0; pos < text.size() && !stopped;) {
        size_t n = 1 + rng() % 5;
        std::string piece = text.substr(pos, n);
        pos += piece.size();
        soFar += piece;
        StopMatcher::Action a = m.feed(piece);
        emitted += a.emit;
        size_t first = std::string::npos;
        for (const std::string& s : stops) first = std::min(first, soFar.find(s));
        QCOMPARE(a.stopped, first != std::string::npos);
        if (a.stopped) {
          QCOMPARE(q(a.finalText), q(soFar.substr(0, first)));
          QCOMPARE(q(emitted), q(a.finalText));
          stopped = true;
        } else {
          QCOMPARE(q(emitted + m.pending()), q(soFar));
          QVERIFY(m.pending().size() < 5);  // at most the longest stop string minus one byte
        }
      }
      if (!stopped) {
        emitted += m.flush();
        QCOMPARE(q(emitted), q(text));
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestStopMatcher)
#include "test_stop_matcher.moc"
