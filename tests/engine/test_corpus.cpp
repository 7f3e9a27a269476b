// Corpus model, SQLite output, openCorpus and the build's failure behaviour, on the small
// real-format fixtures in tests/fixtures/corpus.
#include <QtTest>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "corpus/corpus_builder.h"
#include "corpus/corpus_db.h"
#include "corpus/corpus_schema.h"
#include "corpus_fixtures.h"
#include "test_qa_checks.h"

using namespace rag;
using namespace rag::corpus;
namespace fs = std::filesystem;

namespace {

const SynsetView* synsetNamed(const CorpusModel& m, std::string_view lemma, char pos) {
  for (const SynsetView& s : m.synsets)
    if (s.pos == pos && s.lemmas.front() == lemma) return &s;
  return nullptr;
}

const Passage* termPassage(const CorpusModel& m, std::string_view term, int chunk = 0) {
  for (const Passage& p : m.passages)
    if (m.entity(p.entityId).kind == EntityKind::Term && p.title == term && p.chunk == chunk)
      return &p;
  return nullptr;
}

std::vector<fs::path> filesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

void makeDbWithVersion(const fs::path& p, int version, bool asCorpus) {
  auto db = sql::Db::open(p, sql::OpenMode::Create);
  QVERIFY(db.isOk());
  if (asCorpus) {
    QVERIFY(db->exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                     "INSERT INTO meta VALUES ('format', 'ragraph-corpus');").isOk());
  } else {
    QVERIFY(db->exec("CREATE TABLE runs(id INTEGER PRIMARY KEY)").isOk());
  }
  QVERIFY(db->setUserVersion(version).isOk());
}

}  // namespace

class TestCorpus : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  CorpusModel m_model;

  fs::path tmp(const std::string& name) {
    fs::path d = fs::path(m_tmp.path().toStdString()) / name;
    fs::create_directories(d);
    return d;
  }
  Result<CorpusBuildReport> build(const fs::path& out, CorpusSources src = fixtureSources()) {
    CorpusBuildParams p;
    p.out = out;
    p.sources = std::move(src);
    p.qa.testFraction = 0.3;
    p.qa.devFraction = 0.2;
    return buildCorpus(p);
  }

private Q_SLOTS:
  void initTestCase() {
    Result<CorpusModel> m = buildCorpusModel(fixtureSources());
    QVERIFY2(m.isOk(), m.status().message().c_str());
    m_model = std::move(*m);
  }

  void modelHasEveryKindOfRow() {
    const CorpusModel& m = m_model;
    QCOMPARE(m.synsets.size(), size_t{322});  // wordnet fixture lines
    QCOMPARE(m.terms.size(), size_t{10});
    size_t synsets = 0, lemmas = 0, terms = 0;
    for (const Entity& e : m.entities) {
      synsets += e.kind == EntityKind::Synset;
      lemmas += e.kind == EntityKind::Lemma;
      terms += e.kind == EntityKind::Term;
    }
    QCOMPARE(synsets, size_t{322});
    QCOMPARE(terms, size_t{10});
    QVERIFY(lemmas > 322);
    QCOMPARE(m.danglingPointers, uint64_t{0});  // the fixture keeps only internal pointers
    // One passage per synset, with the synset's entity id; then FOLDOC chunks.
    for (size_t i = 0; i < m.synsets.size(); ++i) {
      QCOMPARE(m.passage(m.synsets[i].passageId).entityId, m.synsets[i].entityId);
      QCOMPARE(m.passage(m.synsets[i].passageId).prov.offset, m.entity(m.synsets[i].entityId).prov.offset);
    }
    QVERIFY(m.passages.size() > m.synsets.size() + m.terms.size());  // long entries chunked
  }

  void lemmaEntitiesAreDeduplicatedPerPartOfSpeech() {
    std::map<std::pair<std::string, char>, int> seen;
    for (const Entity& e : m_model.entities) {
      if (e.kind != EntityKind::Lemma) continue;
      std::string key = e.name;
      for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const int n = ++seen[std::make_pair(key, e.pos)];
      QVERIFY2(n == 1, e.name.c_str());
      QVERIFY(e.pos != 's');  // satellites share the adjective lemmas
    }
  }

  void passagesSpellOutRelations() {
    const SynsetView* dog = synsetNamed(m_model, "dog", 'n');
    QVERIFY(dog);
    const std::string& t = m_model.passage(dog->passageId).text;
    QVERIFY2(t.starts_with("dog, domestic dog, Canis familiaris (noun): a member of the genus"),
             t.c_str());
    QVERIFY2(t.find("kind of: canine, canid; domestic animal, domesticated animal.") !=
                 std::string::npos, t.c_str());
    QVERIFY2(t.find("member of: Canis, genus Canis; pack.") != std::string::npos, t.c_str());
    QVERIFY2(t.find("Example: \"the dog barked all night\"") != std::string::npos, t.c_str());

    const SynsetView* paris = synsetNamed(m_model, "Paris", 'n');
    QVERIFY(paris);
    const std::string& p = m_model.passage(paris->passageId).text;
    QVERIFY2(p.find("instance of: national capital.") != std::string::npos, p.c_str());
    QVERIFY2(p.find("part of: France") != std::string::npos, p.c_str());

    const SynsetView* france = synsetNamed(m_model, "France", 'n');
    QVERIFY(france);
    const std::string& f = m_model.passage(france->passageId).text;
    QVERIFY2(f.find("has parts: ") != std::string::npos && f.find("Paris") != std::string::npos,
             f.c_str());

    const SynsetView* heavy = synsetNamed(m_model, "heavy", 'a');
    QVERIFY(heavy);
    const std::string& h = m_model.passage(heavy->passageId).text;
    QVERIFY2(h.find("opposite: light.") != std::string::npos, h.c_str());
    QVERIFY2(h.find("attribute: weight.") != std::string::npos, h.c_str());
  }

  void relationsCoverPointersLemmasAndXrefs() {
    std::map<std::string_view, int> byType;
    for (const Relation& r : m_model.relations) ++byType[r.type];
    for (std::string_view t : {"hypernym", "hyponym", "instance_hypernym", "member_holonym",
                               "part_holonym", "part_meronym", "antonym", "similar_to",
                               "attribute", "pertainym", "derived_from_adjective", "entailment",
                               "lemma_of", "xref"})
      QVERIFY2(byType[t] > 0, std::string(t).c_str());
    for (const Relation& r : m_model.relations) {
      const Entity& s = m_model.entity(r.src);
      const Entity& d = m_model.entity(r.dst);
      if (r.type == "lemma_of") {
        QCOMPARE(s.kind, EntityKind::Lemma);
        QCOMPARE(d.kind, EntityKind::Synset);
      } else if (r.type == "antonym" || r.type == "pertainym") {
        // Lexical pointers join lemmas, not synsets.
        QCOMPARE(s.kind, EntityKind::Lemma);
        QCOMPARE(d.kind, EntityKind::Lemma);
      } else if (r.type == "xref") {
        QCOMPARE(s.kind, EntityKind::Term);
        QCOMPARE(d.kind, EntityKind::Term);
        QVERIFY(r.src != r.dst);
      } else if (r.type == "hypernym") {
        QCOMPARE(s.kind, EntityKind::Synset);
        QCOMPARE(d.kind, EntityKind::Synset);
      }
    }
    // Unix's body links {Multics} and {C}.
    int64_t unix = 0, multics = 0, c = 0;
    for (const TermView& t : m_model.terms) {
      if (t.term == "Unix") unix = t.entityId;
      if (t.term == "Multics") multics = t.entityId;
      if (t.term == "C") c = t.entityId;
    }
    QVERIFY(unix && multics && c);
    int found = 0;
    for (const Relation& r : m_model.relations)
      if (r.type == "xref" && r.src == unix && (r.dst == multics || r.dst == c)) ++found;
    QCOMPARE(found, 2);
  }

  void foldocPassagesAreChunked() {
    size_t chunked = 0;
    for (const TermView& t : m_model.terms) {
      int expect = 0;
      for (const Passage& p : m_model.passages) {
        if (p.entityId != t.entityId) continue;
        QCOMPARE(p.chunk, expect++);  // chunk order kept, consecutive ids
        QVERIFY2(p.nTokens <= 128, p.text.c_str());
        QVERIFY(p.text.starts_with(t.term));  // every chunk names its term
        QCOMPARE(p.prov.offset, m_model.entity(t.entityId).prov.offset);
      }
      QVERIFY(expect >= 1);
      chunked += expect > 1;
    }
    QVERIFY(chunked >= 3);
    const Passage* ada = termPassage(m_model, "Ada");
    QVERIFY(ada);
    QVERIFY2(ada->text.starts_with("Ada (language): (After Ada Lovelace) A Pascal-descended"),
             ada->text.c_str());
    QVERIFY(ada->text.find('{') == std::string::npos);
  }

  void buildWritesAnOpenableCorpus() {
    fs::path out = tmp("ok") / "corpus.db";
    Result<CorpusBuildReport> r = build(out);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(filesIn(out.parent_path()), std::vector<fs::path>{"corpus.db"});  // no temp left
    Result<sql::Db> db = openCorpus(out);
    QVERIFY2(db.isOk(), db.status().message().c_str());
    Result<CorpusCounts> c = readCorpusCounts(*db);
    QVERIFY2(c.isOk(), c.status().message().c_str());
    QCOMPARE(c->passages, r->passages);
    QCOMPARE(c->entities, r->entities);
    QCOMPARE(c->relations, r->relations);
    QCOMPARE(c->qaTotal, r->qa);
    QCOMPARE(c->schemaVersion, kCorpusSchemaVersion);
    QCOMPARE(c->entitiesByKind["term"], int64_t{10});
    QCOMPARE(c->passagesBySource["wordnet"], int64_t{322});
    QVERIFY(c->qa["test"]["total"] > 0);
    QVERIFY(c->qa["train"]["total"] > 0);
    QCOMPARE(c->meta["format"], std::string(kCorpusFormat));
    // Provenance columns filled on every table.
    QCOMPARE(*db->queryInt64("SELECT count(*) FROM relations WHERE source NOT IN ('wordnet','foldoc') "
                             "OR source_file = ''"), int64_t{0});
    QCOMPARE(*db->queryInt64("SELECT count(*) FROM passages WHERE source = 'foldoc' AND "
                             "source_file <> 'foldoc.dict.dz'"), int64_t{0});
    QCOMPARE(*db->queryInt64("SELECT count(*) FROM entities e JOIN passages p ON p.entity_id = e.id "
                             "WHERE e.kind = 'synset' AND p.source_offset <> e.synset_offset"),
             int64_t{0});
    // Indexes exist and were analysed.
    QVERIFY(*db->queryInt64("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                            "name = 'relations_src'") == 1);
    QVERIFY(*db->queryInt64("SELECT count(*) FROM sqlite_stat1") > 0);
    // The QA rows satisfy the documented guarantees.
    QString err;
    auto rows = qa_checks::load(*db, &err);
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QCOMPARE(int64_t(rows.size()), r->qa);
    QStringList bad = qa_checks::splitViolations(*db, rows) + qa_checks::twoHopViolations(*db, rows) +
                      qa_checks::singleHopViolations(*db, rows);
    QVERIFY2(bad.isEmpty(), qPrintable(bad.join('\n')));
  }

  void failedBuildLeavesTheOldCorpus() {
    fs::path out = tmp("atomic") / "corpus.db";
    QVERIFY(build(out).isOk());
    Result<std::string> before = readFile(out);
    QVERIFY(before.isOk());

    // A truncated dictionary fails the second build after the WordNet work is done.
    fs::path bad = tmp("atomic-src");
    for (const char* f : {"foldoc.index", "foldoc.dict.dz"})
      fs::copy_file(fixtureSources().foldocDir / f, bad / f);
    fs::resize_file(bad / "foldoc.dict.dz", fs::file_size(bad / "foldoc.dict.dz") / 3);
    CorpusSources src = fixtureSources();
    src.foldocDir = bad;
    Result<CorpusBuildReport> r = build(out, src);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    QVERIFY2(r.status().message().find("dict-foldoc") != std::string::npos,
             r.status().message().c_str());
    QCOMPARE(*readFile(out), *before);
    QCOMPARE(filesIn(out.parent_path()), std::vector<fs::path>{"corpus.db"});
    QVERIFY(openCorpus(out).isOk());
  }

  void failedWriteLeavesTheOldCorpus() {
    fs::path out = tmp("atomic-write") / "corpus.db";
    QVERIFY(build(out).isOk());
    Result<std::string> before = readFile(out);
    QVERIFY(before.isOk());
    // The build stages into "<target>.tmp-<pid>"; a non-empty directory there makes SQLite fail
    // after parsing and QA generation, at the write stage.
    fs::path blocker = out;
    blocker += ".tmp-" + std::to_string(::getpid());
    fs::create_directories(blocker / "occupied");
    Result<CorpusBuildReport> r = build(out);
    QVERIFY(!r.isOk());
    QCOMPARE(*readFile(out), *before);
    QVERIFY(openCorpus(out).isOk());
    fs::remove_all(blocker);
    QCOMPARE(filesIn(out.parent_path()), std::vector<fs::path>{"corpus.db"});
  }

  void missingSourcesNameTheirPackages() {
    fs::path out = tmp("missing") / "corpus.db";
    CorpusSources src = fixtureSources();
    src.wordnetDir = tmp("no-wordnet");
    Result<CorpusBuildReport> r = build(out, src);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::NotFound);
    QVERIFY2(r.status().message().find("apt-get install wordnet-base") != std::string::npos,
             r.status().message().c_str());

    src = fixtureSources();
    src.foldocDir = tmp("no-foldoc");
    r = build(out, src);
    QVERIFY(!r.isOk());
    QVERIFY2(r.status().message().find("apt-get install dict-foldoc") != std::string::npos,
             r.status().message().c_str());
    QVERIFY(!fs::exists(out));
    QVERIFY(filesIn(out.parent_path()).empty());
  }

  void corruptWordNetIsNamed() {
    fs::path wn = tmp("bad-wordnet");
    for (const char* f : {"data.noun", "data.verb", "data.adj", "data.adv"})
      fs::copy_file(fixtureSources().wordnetDir / f, wn / f);
    {
      std::ofstream out(wn / "data.verb", std::ios::app);
      out << "00999999 29 v 01 broken\n";
    }
    CorpusSources src = fixtureSources();
    src.wordnetDir = wn;
    fs::path out = tmp("bad-wordnet-out") / "corpus.db";
    Result<CorpusBuildReport> r = build(out, src);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    QVERIFY2(r.status().message().find("data.verb line") != std::string::npos,
             r.status().message().c_str());
    QVERIFY(!fs::exists(out));
  }

  void unwritableOutputIsAClearError() {
    // Below a regular file: no directory can be created there, whoever runs the test.
    fs::path file = tmp("unwritable") / "plain";
    { std::ofstream(file) << "x"; }
    Result<CorpusBuildReport> r = build(file / "corpus.db");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::IoError);
    QVERIFY2(r.status().message().find("plain") != std::string::npos, r.status().message().c_str());
    // A directory as the output file.
    r = build(tmp("unwritable"));
    QVERIFY(!r.isOk());
    QVERIFY2(r.status().message().find("is a directory") != std::string::npos,
             r.status().message().c_str());
  }

  void openCorpusRefusesOtherSchemas() {
    fs::path dir = tmp("schemas");
    Result<sql::Db> r = openCorpus(dir / "none.db");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::NotFound);
    QVERIFY(r.status().message().find("`ragraph corpus build`") != std::string::npos);

    makeDbWithVersion(dir / "old.db", 0, true);
    r = openCorpus(dir / "old.db");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::SchemaMismatch);
    QVERIFY2(r.status().message().find("older") != std::string::npos, r.status().message().c_str());
    QVERIFY(r.status().message().find("rebuild it with `ragraph corpus build`") != std::string::npos);

    makeDbWithVersion(dir / "new.db", kCorpusSchemaVersion + 1, true);
    r = openCorpus(dir / "new.db");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::SchemaMismatch);
    QVERIFY2(r.status().message().find("newer") != std::string::npos, r.status().message().c_str());

    makeDbWithVersion(dir / "other.db", kCorpusSchemaVersion, false);
    r = openCorpus(dir / "other.db");
    QVERIFY(!r.isOk());
    QVERIFY2(r.status().message().find("not a RAGraph corpus") != std::string::npos,
             r.status().message().c_str());

    { std::ofstream(dir / "junk.db") << "this is not sqlite at all, not even close........"; }
    r = openCorpus(dir / "junk.db");
    QVERIFY(!r.isOk());
    QVERIFY(r.status().message().find("rebuild it") != std::string::npos);
  }

  void buildReplacesANewerSchemaCorpus() {
    fs::path out = tmp("replace") / "corpus.db";
    makeDbWithVersion(out, kCorpusSchemaVersion + 3, true);
    QVERIFY(!openCorpus(out).isOk());
    Result<CorpusBuildReport> r = build(out);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QVERIFY(openCorpus(out).isOk());
    QCOMPARE(filesIn(out.parent_path()), std::vector<fs::path>{"corpus.db"});
  }

  void buildIsDeterministic() {
    fs::path a = tmp("det") / "a.db";
    fs::path b = tmp("det") / "b.db";
    QVERIFY(build(a).isOk());
    QVERIFY(build(b).isOk());
    auto dump = [](const fs::path& p) {
      auto db = openCorpus(p);
      std::string s;
      auto st = db->prepare("SELECT id, split, question, answers, kg_path FROM qa ORDER BY id");
      while (*st->step())
        for (int c = 0; c < 5; ++c) s += st->columnText(c) + "|";
      auto ps = db->prepare("SELECT id, text FROM passages ORDER BY id");
      while (*ps->step()) s += ps->columnText(1) + "|";
      return s;
    };
    QCOMPARE(dump(a), dump(b));
  }
};

QTEST_GUILESS_MAIN(TestCorpus)
#include "test_corpus.moc"
