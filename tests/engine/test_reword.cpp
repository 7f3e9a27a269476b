// Questions reworded with WordNet synonyms (retrieval/reword.h) over the fixture corpus: content
// words swap for another lemma of their synset, function words and punctuation stay, the result is
// deterministic, and it shares fewer words with the passage.
#include <QtTest>

#include <filesystem>

#include "corpus_fixtures.h"
#include "retrieval/reword.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;
namespace fs = std::filesystem;

class TestReword : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path corpus() const { return fs::path(m_dir.path().toStdString()) / "corpus.db"; }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    corpus::CorpusBuildParams p;
    p.out = corpus();
    p.sources = fixtureSources();
    auto built = corpus::buildCorpus(p);
    QVERIFY2(built.isOk(), built.status().message().c_str());
  }

  void synonymsAreOtherLemmasOfTheSynset() {
    auto r = Rewording::open(corpus());
    QVERIFY2(r.isOk(), r.status().message().c_str());
    // "whole, unit: an assemblage of parts ..." and "inhale, inspire: draw in (air)" in the fixture.
    auto whole = r->synonym("whole");
    QVERIFY(whole.isOk());
    QCOMPARE(whole->value_or("?"), std::string("unit"));
    auto inhale = r->synonym("inhale");
    QCOMPARE(inhale->value_or("?"), std::string("inspire"));
    auto plural = r->synonym("wholes");  // a plural finds its singular's synonym
    QCOMPARE(plural->value_or("?"), std::string("unit"));
    auto none = r->synonym("zzzzq");
    QVERIFY(none.isOk());
    QVERIFY(!none->has_value());
  }

  void rewordingKeepsTheQuestionsShape() {
    auto r = Rewording::open(corpus());
    QVERIFY(r.isOk());
    auto q = r->reword("What is Whole a kind of?");
    QVERIFY(q.isOk());
    QVERIFY2(q->find("Unit") != std::string::npos, q->c_str());  // capital kept
    QVERIFY2(q->rfind("What is ", 0) == 0, q->c_str());           // function words stay
    QVERIFY2(q->size() > 2 && q->substr(q->size() - 4) == " of?", q->c_str());
    auto again = r->reword("What is Whole a kind of?");
    QCOMPARE(*again, *q);
    QCOMPARE(*r->reword("?!, ..."), std::string("?!, ..."));
    const std::string passage = "whole, unit: an assemblage of parts that is regarded as a single entity.";
    QVERIFY(Rewording::sharedWords("What is whole a kind of?", passage) >
            Rewording::sharedWords(*r->reword("What is whole a kind of?"), passage) - 1e-9);
    QCOMPARE(Rewording::sharedWords("whole unit", "whole"), 0.5);
    QCOMPARE(Rewording::sharedWords("of the", "the"), 0.0);  // no content words
  }

  void aMissingCorpusSaysHowToBuildIt() {
    auto r = Rewording::open(fs::path(m_dir.path().toStdString()) / "none.db");
    QVERIFY(!r.isOk());
    QVERIFY(QString::fromStdString(r.status().message()).contains("ragraph corpus build"));
  }
};

QTEST_GUILESS_MAIN(TestReword)
#include "test_reword.moc"
