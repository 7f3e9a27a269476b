// RECOMP's extractive compression (retrieval/extractive_summary.h): sentence splitting, the
// names each kept sentence carries, scoring by query words, and the two-hop bridge.
#include <QtTest>

#include <string>
#include <vector>

#include "retrieval/extractive_summary.h"

using namespace rag::retrieval;

namespace {

// Passages as a retrieval node writes them (corpus::formatPassage's default style).
const std::string kMycophagy =
    "mycophagy: the practice of eating fungi (especially mushrooms collected. kind of: eating, feeding. related "
    "forms: mycophagist.\n";
const std::string kEating =
    "eating, feeding: the act of consuming food. kind of: consumption, ingestion. has kinds: mycophagy, bite.\n";
const std::string kToken = "token: something serving as a sign of something else. kind of: sign, mark.\n";
const std::string kPlant =
    "plant life, flora: living organism lacking the power of locomotion. member of: Plantae, kingdom Plantae.\n";
const std::string kPlantae = "Plantae, kingdom Plantae: the taxonomic kingdom of plants. member of: Eukarya.\n";

std::vector<std::string_view> views(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

}  // namespace

class TestExtractiveSummary : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void sentencesAndNames() {
    const std::vector<std::string> s = passageSentences(kMycophagy);
    QCOMPARE(s.size(), size_t{3});
    QCOMPARE(s[0], std::string("mycophagy: the practice of eating fungi (especially mushrooms collected"));
    QCOMPARE(s[1], std::string("kind of: eating, feeding"));
    QCOMPARE(s[2], std::string("related forms: mycophagist"));
    QCOMPARE(passageNames(kEating), std::string_view("eating, feeding"));
    // Text that is not a formatted passage has no names, and its sentences are left as they are.
    QCOMPARE(passageNames("no colon here. none here either"), std::string_view());
    QCOMPARE(passageNames(std::string(300, 'x') + ": late colon"), std::string_view());
    QCOMPARE(standaloneSentence("", "none here either"), std::string("none here either."));
    const ExtractiveSummary plain = extractiveSummary("colon", {"no colon here. none here either"}, 1);
    QCOMPARE(plain.text, std::string("no colon here.\n"));
    QCOMPARE(standaloneSentence("eating, feeding", s[1]), std::string("eating, feeding: kind of: eating, feeding."));
    QCOMPARE(standaloneSentence("mycophagy", s[0]),
             std::string("mycophagy: the practice of eating fungi (especially mushrooms collected."));
    QVERIFY(passageSentences("").empty());
    QVERIFY(passageSentences(" . \n").empty());
    const std::string text = kMycophagy + "\n  \n" + kEating;  // the views point into it
    const std::vector<std::string_view> lines = passageLines(text);
    QCOMPARE(lines.size(), size_t{2});
    QCOMPARE(std::string(lines[1]) + "\n", kEating);
  }

  // The sentence holding the most query words wins, question words aside; ties go to the
  // better-ranked passage, then the earlier sentence.
  void scoresByQueryWords() {
    const std::vector<ScoredSentence> r =
        scoreSentences("What is plant life a member of?", views({kToken, kPlantae, kPlant}));
    QCOMPARE(r.front().text, std::string("plant life, flora: member of: Plantae, kingdom Plantae."));
    QCOMPARE(r.front().score, 3);  // plant, life, member
    QCOMPARE(r.front().passage, 2);
    QCOMPARE(r.front().sentence, 1);
    QCOMPARE(r.front().names, std::string("plant life, flora"));
    QCOMPARE(r.size(), size_t{2 + 2 + 2});
    for (size_t i = 1; i < r.size(); ++i) QVERIFY(r[i - 1].score >= r[i].score);
    // "what", "is", "a", "of" count for nothing: a query of them alone ties everything, in order.
    const std::vector<ScoredSentence> none = scoreSentences("what is a of", views({kToken, kPlant}));
    for (const ScoredSentence& s : none) QCOMPARE(s.score, 0);
    QCOMPARE(none.front().passage, 0);
    QCOMPARE(none.front().sentence, 0);
  }

  void oneHopKeepsTheBestSentences() {
    ExtractiveSummary s = extractiveSummary("What is plant life a member of?", views({kToken, kPlantae, kPlant}), 1);
    QCOMPARE(s.text, std::string("plant life, flora: member of: Plantae, kingdom Plantae.\n"));
    QCOMPARE(s.kept, int64_t{1});
    QCOMPARE(s.scored, int64_t{6});
    QVERIFY(!s.bridged);  // "member" is asked once and the sentence holds it
    ExtractiveSummary two = extractiveSummary("What is plant life a member of?", views({kToken, kPlantae, kPlant}), 2);
    QCOMPARE(two.kept, int64_t{2});
    QVERIFY(two.text.starts_with("plant life, flora: member of: Plantae, kingdom Plantae. "));
    QVERIFY(two.text.ends_with(".\n"));
    // More sentences asked than there are: all of them; none at all: an empty summary.
    QCOMPARE(extractiveSummary("plant", views({kPlant}), 10).kept, int64_t{2});
    QCOMPARE(extractiveSummary("plant", {}, 1).text, std::string());
    QCOMPARE(extractiveSummary("plant", views({kPlant}), 0).text, std::string());
  }

  // "X is a kind of something; what is that a kind of?" asks "kind" twice: the summary follows
  // the first sentence's value to the passage it names.
  void twoHopFollowsTheBridge() {
    const std::string q = "Mycophagy is a kind of something; what is that a kind of?";
    ExtractiveSummary s = extractiveSummary(q, views({kMycophagy, kToken, kEating}), 1);
    QVERIFY(s.bridged);
    QCOMPARE(s.kept, int64_t{2});
    QCOMPARE(s.text, std::string("mycophagy: kind of: eating, feeding. eating, feeding: kind of: consumption, ingestion.\n"));
    // Without the passage the value names there is nothing to follow.
    ExtractiveSummary alone = extractiveSummary(q, views({kMycophagy, kToken}), 1);
    QVERIFY(!alone.bridged);
    QCOMPARE(alone.text, std::string("mycophagy: kind of: eating, feeding.\n"));
    // A different second relation: "member" is left over, and the bridge sentence holds it.
    ExtractiveSummary member = extractiveSummary("Plant life is a member of something; what is that a member of?",
                                                 views({kPlant, kPlantae}), 1);
    QVERIFY(member.bridged);
    QCOMPARE(member.text, std::string("plant life, flora: member of: Plantae, kingdom Plantae. Plantae, kingdom Plantae: "
                                      "member of: Eukarya.\n"));
  }
};

QTEST_GUILESS_MAIN(TestExtractiveSummary)
#include "test_extractive_summary.moc"
