// The full corpus from Debian's wordnet-base and dict-foldoc: required sizes, QA split
// guarantee and two-hop property on the real database.
#include <QtTest>

#include <filesystem>

#include "corpus/corpus_builder.h"
#include "corpus/corpus_db.h"
#include "test_qa_checks.h"

using namespace rag;
using namespace rag::corpus;
namespace fs = std::filesystem;

class TestCorpusSlow : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  fs::path m_path;

private Q_SLOTS:
  void initTestCase() {
    CorpusSources src;
    if (!checkCorpusSources(src).isOk())
      QSKIP("Debian's wordnet-base and dict-foldoc are not installed");
    m_path = fs::path(m_tmp.path().toStdString()) / "corpus.db";
    CorpusBuildParams p;
    p.out = m_path;
    p.sources = src;
    Result<CorpusBuildReport> r = buildCorpus(p);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    qInfo("built in %.1f s: %lld passages, %lld entities, %lld relations, %lld QA", r->seconds,
          static_cast<long long>(r->passages), static_cast<long long>(r->entities),
          static_cast<long long>(r->relations), static_cast<long long>(r->qa));
  }

  void requiredSizes() {
    Result<sql::Db> db = openCorpus(m_path);
    QVERIFY2(db.isOk(), db.status().message().c_str());
    Result<CorpusCounts> c = readCorpusCounts(*db);
    QVERIFY(c.isOk());
    QVERIFY(c->passages >= 130000);
    QVERIFY(c->entities >= 100000);
    QVERIFY(c->relations >= 300000);
    QCOMPARE(c->entitiesByKind["synset"], int64_t{117659});  // WordNet 3.0
    QVERIFY(c->entitiesByKind["term"] > 12000);
    QVERIFY(c->relationsByType["xref"] > 30000);
    QVERIFY(c->qa["test"]["total"] >= 2000);
    for (const char* split : {"train", "dev", "test"})
      for (const char* type : {"single_hop", "definition", "two_hop", "foldoc"})
        QVERIFY2(c->qa[split][type] > 0, (std::string(split) + " " + type).c_str());
    QVERIFY(c->qa["train"]["total"] > 5 * c->qa["test"]["total"]);
    QCOMPARE(*db->queryInt64("SELECT max(n_tokens) FROM passages WHERE source = 'foldoc'") <= 128,
             true);
  }

  void qaGuaranteesHoldOnTheRealCorpus() {
    Result<sql::Db> db = openCorpus(m_path);
    QVERIFY(db.isOk());
    QString err;
    auto rows = qa_checks::load(*db, &err);
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QStringList bad = qa_checks::splitViolations(*db, rows);
    QVERIFY2(bad.isEmpty(), qPrintable(bad.join('\n')));
    bad = qa_checks::twoHopViolations(*db, rows);
    QVERIFY2(bad.isEmpty(), qPrintable(bad.join('\n')));
    bad = qa_checks::singleHopViolations(*db, rows);
    QVERIFY2(bad.isEmpty(), qPrintable(bad.join('\n')));
  }
};

QTEST_GUILESS_MAIN(TestCorpusSlow)
#include "test_corpus_slow.moc"
