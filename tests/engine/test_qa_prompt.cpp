// The one QA prompt format (corpus/qa_prompt.h) on a tiny real-schema corpus: gold and closed-book
// context, the compact passage style, tokenization into blocks, the answer check and errors.
#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <set>

#include "../fixtures/workload/tiny_corpus.h"
#include "corpus/qa_prompt.h"
#include "corpus/qa_reader.h"
#include "model/bpe_trainer.h"
#include "model/prompt.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::corpus;
namespace fs = std::filesystem;

namespace {

rag::Passage wordnetPassage(int entity) {
  rag::Passage p;
  p.id = entity;
  p.text = testing::tinyPassage(entity);
  p.source = "wordnet";
  return p;
}

// The tiny corpus's train item of `entity` (the last item the fixture writes for it).
int64_t trainItemOf(QaPromptReader& r, int entity) {
  auto ids = r.splitIds("train");
  for (int64_t id : *ids) {
    auto item = r.item(id);
    if (item && item->question == "What is entity " + std::to_string(entity) + " a kind of?") return id;
  }
  return -1;
}

}  // namespace

class TestQaPrompt : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path path(const char* name) const { return fs::path(m_dir.path().toStdString()) / name; }
  fs::path corpus() const { return path("corpus.db"); }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    testing::TinyCorpusSpec spec;
    spec.entities = 40;
    spec.passages = true;
    Status s = testing::makeTinyCorpus(corpus(), spec);
    QVERIFY2(s.isOk(), s.message().c_str());
  }

  void goldModeHidesTheGoldPassageAmongFiveInAFixedOrder() {
    auto reader = QaPromptReader::open(corpus());
    QVERIFY2(reader.isOk(), reader.status().message().c_str());
    const QaPromptOptions opts;  // gold, 5 passages, compact
    std::set<size_t> slotsSeen;
    for (int entity = 1; entity <= 20; ++entity) {
      const int64_t id = trainItemOf(*reader, entity);
      QVERIFY(id > 0);
      auto p = reader->prompt(id, opts);
      QVERIFY2(p.isOk(), p.status().message().c_str());
      QCOMPARE(p->passageIds.size(), size_t{5});
      QCOMPARE(std::set<int64_t>(p->passageIds.begin(), p->passageIds.end()).size(), size_t{5});
      QCOMPARE(p->goldSlots.size(), size_t{1});
      QCOMPARE(p->passageIds[p->goldSlots[0]], int64_t{entity});
      QCOMPARE(std::count(p->passageIds.begin(), p->passageIds.end(), int64_t{entity}), 1);
      slotsSeen.insert(p->goldSlots[0]);
      // The gold passage's text is in the prompt, in the segment of its slot.
      const std::string gold = formatPassage(wordnetPassage(entity), opts.style) + "\n";
      QCOMPARE(std::string(p->segment(p->goldSlots[0])), gold);
      QCOMPARE(p->answer, "answer " + std::to_string(entity));
      QCOMPARE(p->completion, " answer " + std::to_string(entity));
      // The same item gives the same prompt; another salt draws other distractors or order.
      auto again = reader->prompt(id, opts);
      QCOMPARE(again->text, p->text);
      QCOMPARE(again->passageIds, p->passageIds);
      if (entity == 1) {
        auto salted = reader->prompt(id, opts, 99);
        QVERIFY(salted->passageIds != p->passageIds);
        QVERIFY(std::count(salted->passageIds.begin(), salted->passageIds.end(), int64_t{1}) == 1);
      }
    }
    QVERIFY2(slotsSeen.size() >= 3, "the gold passage should not sit in one fixed slot");
  }

  void segmentsArePassagesThenTheQuestion() {
    auto reader = QaPromptReader::open(corpus());
    const int64_t id = trainItemOf(*reader, 3);
    auto p = reader->prompt(id, QaPromptOptions{});
    QCOMPARE(p->segmentCount(), size_t{6});
    QCOMPARE(p->segmentStarts[0], size_t{0});
    std::string joined;
    for (size_t i = 0; i < p->segmentCount(); ++i) {
      joined += p->segment(i);
      if (i + 1 < p->segmentCount()) QVERIFY(p->segment(i).ends_with('\n'));
    }
    QCOMPARE(joined, p->text);
    QCOMPARE(std::string(p->segment(5)), std::string("Question: What is entity 3 a kind of?\nAnswer:"));
  }

  void noneModeIsTheQuestionAlone() {
    auto reader = QaPromptReader::open(corpus());
    QaPromptOptions opts;
    opts.context = QaContext::None;
    const int64_t id = trainItemOf(*reader, 5);
    auto p = reader->prompt(id, opts);
    QVERIFY(p->passageIds.empty());
    QVERIFY(p->goldSlots.empty());
    QCOMPARE(p->segmentCount(), size_t{1});
    QCOMPARE(p->text, std::string("Question: What is entity 5 a kind of?\nAnswer:"));
    QVERIFY(p->text.find("answer 5") == std::string::npos);
  }

  void fewerPassagesThanAskedForGivesWhatThereIs() {
    testing::TinyCorpusSpec spec;
    spec.entities = 3;
    spec.passages = true;
    QVERIFY(testing::makeTinyCorpus(path("three.db"), spec).isOk());
    auto reader = QaPromptReader::open(path("three.db"));
    auto p = reader->prompt(trainItemOf(*reader, 2), QaPromptOptions{});
    QVERIFY2(p.isOk(), p.status().message().c_str());
    QCOMPARE(std::set<int64_t>(p->passageIds.begin(), p->passageIds.end()),
             (std::set<int64_t>{1, 2, 3}));
  }

  void compactStyleKeepsWhatQuestionsAskAbout() {
    PassageStyle style;
    style.maxChars = 200;
    style.glossWords = 12;
    style.listItems = 3;
    QCOMPARE(formatPassage(wordnetPassage(7), style),
             std::string("entity 7, thing 7: the thing numbered 7 in the tiny corpus. kind of: "
                         "answer 7. has kinds: sub 7a, sub 7b."));
    style.glossWords = 3;
    style.listItems = 1;
    QCOMPARE(formatPassage(wordnetPassage(7), style),
             std::string("entity 7: the thing numbered. kind of: answer 7. has kinds: sub 7a."));
    // Whole clauses go from the end to fit the budget.
    style.glossWords = 12;
    style.listItems = 3;
    style.maxChars = 80;
    QCOMPARE(formatPassage(wordnetPassage(7), style),
             std::string("entity 7, thing 7: the thing numbered 7 in the tiny corpus. kind of: answer 7."));
    // The real corpus's shape with the default style: examples dropped, lists and the gloss
    // cut, the clauses that do not fit in 180 bytes left out.
    rag::Passage plant;
    plant.source = "wordnet";
    plant.text = "plant, flora, plant life (noun): (botany) a living organism lacking the power of "
                 "locomotion. Example: \"plants grow\". kind of: organism, being. member of: "
                 "Plantae, kingdom Plantae, plant kingdom. topic: botany, phytology. has kinds: "
                 "phytoplankton, microflora, crop, endemic and 22 more.";
    const std::string kept =
        "plant, flora: (botany) a living organism lacking the power of. kind of: organism, being. "
        "member of: Plantae, kingdom Plantae. topic: botany, phytology.";
    QCOMPARE(formatPassage(plant, PassageStyle{}), kept);
    style = PassageStyle{};
    style.maxChars = 1000;
    QCOMPARE(formatPassage(plant, style), kept + " has kinds: phytoplankton, microflora.");
  }

  void otherPassagesAreCutAtAWord() {
    rag::Passage foldoc;
    foldoc.source = "foldoc";
    foldoc.text = "Compact Disc Rewritable: an additional silver reflecting layer that a laser can melt";
    PassageStyle style;
    style.maxChars = 30;
    const std::string cut = formatPassage(foldoc, style);
    QCOMPARE(cut, std::string("Compact Disc Rewritable: an"));
    // Verbatim WordNet text is cut the same way, never inside a UTF-8 character.
    rag::Passage accents;
    accents.source = "wordnet";
    accents.text = "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9";  // no spaces, 2-byte characters
    style.compact = false;
    style.maxChars = 5;
    QCOMPARE(formatPassage(accents, style), std::string("\xC3\xA9\xC3\xA9"));
    style.maxChars = 1000;
    QCOMPARE(formatPassage(wordnetPassage(2), style), testing::tinyPassage(2));
  }

  void tokensFollowTheSegments() {
    std::vector<std::string> texts;
    for (int e = 1; e <= 40; ++e) {
      texts.push_back(testing::tinyPassage(e));
      texts.push_back("Question: What is entity " + std::to_string(e) + " a kind of?\nAnswer: answer");
    }
    model::BpeTrainParams params;
    params.vocabSize = 320;
    auto json = model::trainByteLevelBpe(model::textsFrom(texts), params);
    QVERIFY(json.isOk());
    auto tok = model::Tokenizer::fromJson(*json, "test");
    QVERIFY(tok.isOk());
    auto reader = QaPromptReader::open(corpus());
    auto p = reader->prompt(trainItemOf(*reader, 9), QaPromptOptions{});
    model::QaTokens t = model::tokenizeQaPrompt(*tok, *p);
    QCOMPARE(t.blockStarts.size(), p->segmentCount());
    for (size_t i = 0; i < t.blockStarts.size(); ++i) {
      const int32_t end = i + 1 < t.blockStarts.size() ? t.blockStarts[i + 1] : t.promptLength;
      QVERIFY(end > t.blockStarts[i]);
      auto text = tok->decode(std::span<const int32_t>(t.tokens).subspan(
          static_cast<size_t>(t.blockStarts[i]), static_cast<size_t>(end - t.blockStarts[i])));
      QCOMPARE(*text, std::string(p->segment(i)));
    }
    QCOMPARE(t.tokens.back(), *tok->eosId());
    auto completion = tok->decode(std::span<const int32_t>(t.tokens).subspan(
        static_cast<size_t>(t.promptLength), t.tokens.size() - 1 - static_cast<size_t>(t.promptLength)));
    QCOMPARE(*completion, std::string(" answer 9"));
  }

  void answerMatchesIgnoresCaseAndSpacing_data() {
    QTest::addColumn<QString>("output");
    QTest::addColumn<QStringList>("answers");
    QTest::addColumn<bool>("match");
    QTest::newRow("exact") << "plant kingdom" << QStringList{"plant kingdom"} << true;
    QTest::newRow("inside a sentence") << "It is the Plant Kingdom." << QStringList{"plant kingdom"} << true;
    QTest::newRow("white space") << " plant\n\t kingdom " << QStringList{"Plant  Kingdom"} << true;
    QTest::newRow("any answer") << "botany" << QStringList{"phytology", "botany"} << true;
    QTest::newRow("absent") << "a kind of organism" << QStringList{"plant kingdom"} << false;
    QTest::newRow("partial") << "plant" << QStringList{"plant kingdom"} << false;
    QTest::newRow("no answers") << "anything" << QStringList{} << false;
    QTest::newRow("empty answer") << "anything" << QStringList{"", "  "} << false;
    QTest::newRow("non-ASCII kept") << "caf\xC3\xA9 au lait" << QStringList{"CAF\xC3\xA9"} << true;
  }

  void answerMatchesIgnoresCaseAndSpacing() {
    QFETCH(QString, output);
    QFETCH(QStringList, answers);
    QFETCH(bool, match);
    std::vector<std::string> a;
    for (const QString& s : answers) a.push_back(s.toStdString());
    QCOMPARE(answerMatches(output.toStdString(), a), match);
  }

  void errorsNameTheProblemAndTheFix() {
    auto missing = QaPromptReader::open(path("absent.db"));
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(missing.status(), {"absent.db", "does not exist", "ragraph corpus build"}));

    {
      auto db = sql::Db::open(path("other.db"), sql::OpenMode::Create);
      QVERIFY(db->exec("CREATE TABLE runs(id INTEGER PRIMARY KEY)").isOk());
      QVERIFY(db->setUserVersion(1).isOk());
    }
    auto other = QaPromptReader::open(path("other.db"));
    QCOMPARE(other.status().code(), StatusCode::SchemaMismatch);
    QVERIFY(mentions(other.status(), {"not a RAGraph corpus", "ragraph corpus build"}));

    auto reader = QaPromptReader::open(corpus());
    auto dev = reader->splitIds("dev");
    QCOMPARE(dev.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(dev.status(), {"no QA items in split 'dev'", "it has: test, train"}));

    auto item = reader->item(999999);
    QCOMPARE(item.status().code(), StatusCode::NotFound);

    auto ctx = parseQaContext("both");
    QCOMPARE(ctx.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(ctx.status(), {"'both'", "gold", "none"}));
    QCOMPARE(*parseQaContext("none"), QaContext::None);
  }

  void aGoldPassageThatIsGoneIsCorrupt() {
    testing::TinyCorpusSpec spec;
    spec.entities = 4;
    spec.passages = true;
    QVERIFY(testing::makeTinyCorpus(path("broken.db"), spec).isOk());
    {
      auto db = sql::Db::open(path("broken.db"), sql::OpenMode::ReadWrite);
      QVERIFY(db->exec("DELETE FROM passages WHERE id = 2").isOk());
    }
    auto reader = QaPromptReader::open(path("broken.db"));
    auto p = reader->prompt(trainItemOf(*reader, 1), QaPromptOptions{});
    QVERIFY(p.isOk());  // distractor draws skip the hole
    auto ids = reader->splitIds("train");
    bool sawCorrupt = false;
    for (int64_t id : *ids) {
      auto it = reader->item(id);
      if (!it && it.status().code() == StatusCode::Corrupt) {
        sawCorrupt = true;
        QVERIFY(mentions(it.status(), {"names passage 2", "does not exist"}));
      }
    }
    QVERIFY(sawCorrupt);
  }
};

QTEST_GUILESS_MAIN(TestQaPrompt)
#include "test_qa_prompt.moc"
