#include <QtTest>

#include <filesystem>

#include "corpus/corpus_schema.h"
#include "rag/engine.h"
#include "storage/sqlite.h"

using namespace rag;
namespace fs = std::filesystem;

class TestEngine : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path m_corpus;

  // A two-passage corpus with two QA items, one of them pointing at a missing passage.
  static void makeCorpus(const fs::path& path) {
    auto db = sql::Db::open(path, sql::OpenMode::Create);
    QVERIFY(db.isOk());
    QVERIFY(sql::migrate(*db, corpus::kCorpusMigrations, "corpus").isOk());
    QVERIFY(db->exec(R"sql(
      INSERT INTO meta VALUES ('format', 'ragraph-corpus');
      INSERT INTO entities VALUES (1,'synset','dog','n',2084071,'wordnet','data.noun',10);
      INSERT INTO entities VALUES (2,'synset','canine','n',2083346,'wordnet','data.noun',20);
      INSERT INTO passages VALUES (1,1,0,'dog','dog, domestic dog (noun): a member of the genus Canis. kind of: canine.',14,'wordnet','data.noun',10);
      INSERT INTO passages VALUES (2,2,0,'canine','canine (noun): any of various fissiped mammals.',8,'wordnet','data.noun',20);
      INSERT INTO relations VALUES (1,1,'hypernym',2,'wordnet','data.noun',10);
      INSERT INTO qa VALUES (1,'test','single_hop','hypernym',1,'What is dog a kind of?','["canine","canid"]','[1]','[1,"hypernym",2]');
      INSERT INTO qa VALUES (2,'train','two_hop','hypernym',2,'broken item','["x"]','[1, 99]','[]');
    )sql").isOk());
  }

private Q_SLOTS:
  void initTestCase() {
    m_corpus = fs::path(m_dir.path().toStdString()) / "corpus.db";
    makeCorpus(m_corpus);
  }

  void missingCorpusSaysHowToBuildIt() {
    EngineParams p;
    p.corpus = fs::path(m_dir.path().toStdString()) / "none.db";
    auto e = Engine::create(p);
    QVERIFY(!e.isOk());
    QCOMPARE(e.status().code(), StatusCode::NotFound);
    QVERIFY(e.status().message().find("ragraph corpus build") != std::string::npos);
  }

  void looksUpQaWithGoldPassagesAndTracesIt() {
    EngineParams p;
    p.corpus = m_corpus;
    p.workerThreads = 2;
    auto e = Engine::create(p);
    QVERIFY2(e.isOk(), e.status().message().c_str());
    Engine& engine = **e;
    QCOMPARE(engine.corpusStats().passages, int64_t{2});
    QCOMPARE(engine.corpusStats().qaTotal("test"), int64_t{1});

    auto ids = engine.listQa("test").get();
    QVERIFY(ids.isOk());
    QCOMPARE(*ids, std::vector<int64_t>{1});
    QCOMPARE(engine.listQa("train", "single_hop").get()->size(), size_t{0});

    auto item = engine.lookupQa(1, /*requestId=*/7).get();
    QVERIFY2(item.isOk(), item.status().message().c_str());
    QCOMPARE(item->question, std::string("What is dog a kind of?"));
    QCOMPARE(item->answers, (std::vector<std::string>{"canine", "canid"}));
    QCOMPARE(item->goldPassages.size(), size_t{1});
    QVERIFY(item->goldPassages[0].text.find("kind of: canine") != std::string::npos);
    QCOMPARE(item->goldPassages[0].sourceFile, std::string("data.noun"));

    auto broken = engine.lookupQa(2).get();
    QVERIFY(!broken.isOk());
    QCOMPARE(broken.status().code(), StatusCode::Corrupt);
    QVERIFY(broken.status().message().find("99") != std::string::npos);
    QCOMPARE(engine.lookupQa(12345).get().status().code(), StatusCode::NotFound);

    std::vector<TraceEvent> spans;
    engine.drainTrace(spans);
    QCOMPARE(spans.size(), size_t{3});  // one span per lookup, failed ones included
    const std::vector<TraceLane> lanes = engine.traceLanes();
    bool found = false;
    for (const TraceEvent& s : spans) {
      QVERIFY(s.endNs >= s.beginNs);
      QVERIFY(lanes.at(s.lane).name.rfind("worker-", 0) == 0);
      QCOMPARE(lanes.at(s.lane).kind, LaneKind::Workers);
      if (s.requestId == 7) {
        found = true;
        QCOMPARE(s.arg0, 1u);  // gold passages read
        QCOMPARE(s.arg1, 1u);  // qa id
      }
    }
    QVERIFY(found);

    engine.shutdown();
    QCOMPARE(engine.lookupQa(1).get().status().code(), StatusCode::Cancelled);
  }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "test_engine.moc"
