// QA generation on the fixture corpus: question forms, answers, gold passages, paths, the
// two-hop property and the split guarantee.
#include <QtTest>

#include <filesystem>
#include <set>

#include "corpus/corpus_builder.h"
#include "corpus/qa_builder.h"
#include "corpus_fixtures.h"

using namespace rag;
using namespace rag::corpus;
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const QaItem* findQuestion(const std::vector<QaItem>& qa, std::string_view question) {
  for (const QaItem& q : qa)
    if (q.question == question) return &q;
  return nullptr;
}

}  // namespace

class TestQa : public QObject {
  Q_OBJECT
  CorpusModel m_model;
  std::vector<QaItem> m_qa;
  QaParams m_params;

  std::vector<std::string> lemmasOfEntity(int64_t id) const {
    for (const SynsetView& s : m_model.synsets)
      if (s.entityId == id) return s.lemmas;
    return {m_model.entity(id).name};
  }

private Q_SLOTS:
  void initTestCase() {
    Result<CorpusModel> m = buildCorpusModel(fixtureSources());
    QVERIFY2(m.isOk(), m.status().message().c_str());
    m_model = std::move(*m);
    // Large held-out shares so that the small fixture has items in every split.
    m_params.testFraction = 0.3;
    m_params.devFraction = 0.2;
    m_qa = buildQa(m_model, m_params);
    QVERIFY(m_qa.size() > 100);
  }

  void everyTypeAndSplitIsPresent() {
    std::set<std::string> types, splits;
    for (const QaItem& q : m_qa) {
      types.insert(std::string(q.type));
      splits.insert(q.split);
    }
    QCOMPARE(types, (std::set<std::string>{"definition", "foldoc", "single_hop", "two_hop"}));
    QCOMPARE(splits, (std::set<std::string>{"dev", "test", "train"}));
  }

  void itemsAreWellFormed() {
    for (const QaItem& q : m_qa) {
      QVERIFY(!q.answers.empty());
      QVERIFY(!q.goldPassages.empty());
      for (int64_t p : q.goldPassages)
        QVERIFY(p >= 1 && p <= static_cast<int64_t>(m_model.passages.size()));
      QCOMPARE(q.pathEntities.size(), q.pathRelations.size() + 1);
      QCOMPARE(q.pathEntities.front(), q.topicEntity);
      QVERIFY(!q.topicName.empty());
      QVERIFY(q.question.back() == '?');
      // The topic's own passage comes first.
      const Passage& first = m_model.passage(q.goldPassages.front());
      const Entity& topic = m_model.entity(q.topicEntity);
      if (topic.kind != EntityKind::Lemma) QCOMPARE(first.entityId, q.topicEntity);
    }
  }

  void singleHopAnswersAreInTheGoldPassage() {
    int n = 0;
    for (const QaItem& q : m_qa) {
      if (q.type != "single_hop") continue;
      ++n;
      QCOMPARE(q.goldPassages.size(), size_t{1});
      QCOMPARE(q.pathRelations.size(), size_t{1});
      QCOMPARE(std::string(q.pathRelations[0]), q.relation);
      const std::string& text = m_model.passage(q.goldPassages[0]).text;
      bool found = false;
      for (const std::string& a : q.answers) {
        found |= containsPhrase(text, a);
        QVERIFY2(!containsPhrase(q.question, a), q.question.c_str());
      }
      QVERIFY2(found, (q.question + " / " + text).c_str());
      // Every lemma of the answer synset is accepted.
      for (const std::string& l : lemmasOfEntity(q.pathEntities.back())) {
        if (m_model.entity(q.pathEntities.back()).kind != EntityKind::Synset) break;
        QVERIFY(std::find(q.answers.begin(), q.answers.end(), l) != q.answers.end());
      }
    }
    QVERIFY(n > 20);
  }

  void knownSingleHopQuestions() {
    // Everything in train: no item is held out or dropped, so every candidate is listed.
    QaParams all = m_params;
    all.testFraction = 0;
    all.devFraction = 0;
    const std::vector<QaItem> qa = buildQa(m_model, all);
    for (const QaItem& q : qa) QCOMPARE(q.split, std::string("train"));

    const QaItem* paris = findQuestion(qa, "What is Paris a part of?");
    QVERIFY(paris);
    QCOMPARE(paris->answers.front(), std::string("France"));
    QCOMPARE(paris->relation, std::string("part_holonym"));
    std::string path = "[";
    path += std::to_string(paris->topicEntity);
    path += ",\"part_holonym\",";
    path += std::to_string(paris->pathEntities[1]);
    path += ']';
    QCOMPARE(kgPathJson(*paris), path);

    // The fixture has one noun "dog", so it names its synset; but dog is a member of Canis and
    // of pack, and a kind of canine and of domestic animal: two targets each, both skipped.
    QVERIFY(std::any_of(qa.begin(), qa.end(), [](const QaItem& q) { return q.topicName == "dog"; }));
    QVERIFY(!findQuestion(qa, "What is dog a member of?"));
    QVERIFY(!findQuestion(qa, "What is dog a kind of?"));

    const QaItem* snore = findQuestion(qa, "What does snore entail?");
    QVERIFY(snore);
    QVERIFY(std::find(snore->answers.begin(), snore->answers.end(), "sleep") != snore->answers.end());

    // A lexical pointer: the antonym lemma first, then the rest of its synset.
    const QaItem* heavy = findQuestion(qa, "What is the opposite of heavy?");
    QVERIFY(heavy);
    QCOMPARE(heavy->answers.front(), std::string("light"));
    QCOMPARE(m_model.entity(heavy->topicEntity).kind, EntityKind::Lemma);
    QCOMPARE(m_model.entity(heavy->pathEntities[1]).name, std::string("light"));

    const QaItem* quickly = findQuestion(qa, "Which adjective is quickly derived from?");
    QVERIFY(quickly);
    QCOMPARE(quickly->answers.front(), std::string("quick"));
  }

  void topicNamesAreUnambiguous() {
    // A topic name of a relation question names one synset of its part of speech.
    std::map<std::pair<std::string, char>, int> senses;
    for (const SynsetView& s : m_model.synsets) {
      std::set<std::string> seen;
      for (const std::string& l : s.lemmas)
        if (seen.insert(lower(l)).second) ++senses[{lower(l), s.pos == 's' ? 'a' : s.pos}];
    }
    for (const QaItem& q : m_qa) {
      if (q.type != "single_hop" && q.type != "two_hop") continue;
      const Entity& t = m_model.entity(q.topicEntity);
      char pos = t.pos == 's' ? 'a' : t.pos;
      const int n = senses[std::make_pair(lower(q.topicName), pos)];
      QVERIFY2(n == 1, q.question.c_str());
    }
  }

  void twoHopNeedsTwoRetrievals() {
    int n = 0;
    for (const QaItem& q : m_qa) {
      if (q.type != "two_hop") continue;
      ++n;
      QCOMPARE(q.goldPassages.size(), size_t{2});
      QCOMPARE(q.pathEntities.size(), size_t{3});
      QCOMPARE(q.intermediates, std::vector<int64_t>{q.pathEntities[1]});
      const std::string& first = m_model.passage(q.goldPassages[0]).text;
      const std::string& second = m_model.passage(q.goldPassages[1]).text;
      QCOMPARE(m_model.passage(q.goldPassages[1]).entityId, q.pathEntities[1]);
      for (const std::string& l : lemmasOfEntity(q.pathEntities[1]))
        QVERIFY2(!containsPhrase(q.question, l), (q.question + " names " + l).c_str());
      bool inSecond = false;
      for (const std::string& a : q.answers) {
        QVERIFY2(!containsPhrase(first, a), (q.question + ": " + a + " in " + first).c_str());
        inSecond |= containsPhrase(second, a);
      }
      QVERIFY2(inSecond, q.question.c_str());
      QCOMPARE(q.relation, std::string(q.pathRelations[0]) + "+" + std::string(q.pathRelations[1]));
    }
    QVERIFY(n >= 5);
  }

  void definitionsAndFoldocDoNotLeakTheAnswer() {
    std::map<std::string, int> glossUse;
    for (const QaItem& q : m_qa)
      if (q.type == "definition" || q.type == "foldoc") {
        for (const std::string& a : q.answers) QVERIFY2(!containsPhrase(q.question, a), q.question.c_str());
        QVERIFY2(++glossUse[q.question] == 1, q.question.c_str());
      }
    const QaItem* ada = nullptr;
    for (const QaItem& q : m_qa)
      if (q.type == "foldoc" && q.topicName == "Ada") ada = &q;
    QVERIFY(ada);
    QVERIFY2(ada->question.starts_with("Which computing term means: A Pascal-descended language"),
             ada->question.c_str());
  }

  void splitGuarantee() {
    std::set<int64_t> trainTopics;
    std::set<std::string> trainNames;
    for (const QaItem& q : m_qa)
      if (q.split == "train") {
        trainTopics.insert(q.topicEntity);
        trainNames.insert(lower(q.topicName));
      }
    size_t heldOut = 0;
    for (const QaItem& q : m_qa) {
      if (q.split == "train") continue;
      ++heldOut;
      QVERIFY2(!trainTopics.count(q.topicEntity), q.question.c_str());
      QVERIFY2(!trainNames.count(lower(q.topicName)), q.question.c_str());
      for (int64_t e : q.pathEntities) QVERIFY2(!trainTopics.count(e), q.question.c_str());
      for (const std::string& a : q.answers) QVERIFY2(!trainNames.count(lower(a)), q.question.c_str());
      for (int64_t e : q.intermediates)
        for (const std::string& l : lemmasOfEntity(e))
          QVERIFY2(!trainNames.count(lower(l)), q.question.c_str());
    }
    QVERIFY(heldOut > 20);
  }

  void deterministicForASeed() {
    std::vector<QaItem> again = buildQa(m_model, m_params);
    QCOMPARE(again.size(), m_qa.size());
    for (size_t i = 0; i < again.size(); ++i) {
      QCOMPARE(again[i].question, m_qa[i].question);
      QCOMPARE(again[i].split, m_qa[i].split);
    }
    QaParams other = m_params;
    other.seed = m_params.seed + 1;
    std::vector<QaItem> diff = buildQa(m_model, other);
    std::map<std::string, std::string> a, b;
    for (const QaItem& q : m_qa) a[q.question] = q.split;
    for (const QaItem& q : diff) b[q.question] = q.split;
    int changed = 0;
    for (const auto& [question, split] : a)
      if (b.count(question) && b[question] != split) ++changed;
    QVERIFY(changed > 0);  // the seed drives the split
  }

  void capsBoundEachRelation() {
    QaParams capped = m_params;
    capped.maxPerSingleHopRelation = 3;
    capped.maxPerTwoHopRelation = 2;
    capped.maxDefinition = 5;
    capped.maxFoldoc = 1;
    std::map<std::string, int> perRelation;
    int defs = 0, foldoc = 0;
    std::vector<QaItem> qa = buildQa(m_model, capped);
    for (const QaItem& q : qa) {
      if (q.type == "single_hop" || q.type == "two_hop") ++perRelation[std::string(q.type) + q.relation];
      defs += q.type == "definition";
      foldoc += q.type == "foldoc";
    }
    for (const auto& [rel, n] : perRelation) QVERIFY2(n <= 3, rel.c_str());
    QVERIFY(defs <= 5 && defs > 0);
    QVERIFY(foldoc <= 1);
  }

  void containsPhraseMatchesWholeWords() {
    QVERIFY(containsPhrase("a hot dog stand", "dog"));
    QVERIFY(containsPhrase("Kind of: Canine, canid.", "canine"));
    QVERIFY(!containsPhrase("dogma", "dog"));
    QVERIFY(!containsPhrase("underdog", "dog"));
    QVERIFY(containsPhrase("uses C++ daily", "C++"));
    QVERIFY(!containsPhrase("short", ""));
    QVERIFY(containsPhrase("genus Canis.", "genus Canis"));
  }
};

QTEST_GUILESS_MAIN(TestQa)
#include "test_qa.moc"
