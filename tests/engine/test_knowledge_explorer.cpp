// rag::KnowledgeExplorer (rag/knowledge.h), what the knowledge-graph inspector asks of the graph:
// name completion, senses of a name, an entity's typed neighbourhood (in-edges mirrored by an
// out-edge left out, the edge cap counted), its passages and gloss, clear errors for unknown
// names and ids; and the record a knowledge stage carries (every path, kept or pruned, with
// its score and names).
#include <QtTest>

#include <QTemporaryDir>
#include <filesystem>

#include "../fixtures/workload/tiny_corpus.h"
#include "knowledge/knowledge_use.h"
#include "rag/knowledge.h"
#include "status_checks.h"
#include "storage/sqlite.h"

using namespace rag;
namespace fs = std::filesystem;

class TestKnowledgeExplorer : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::shared_ptr<const KnowledgeExplorer> m_kg;

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    const fs::path corpus = fs::path(m_dir.path().toStdString()) / "corpus.db";
    testing::TinyCorpusSpec spec;
    spec.entities = 20;
    spec.passages = true;
    QVERIFY(testing::makeTinyCorpus(corpus, spec).isOk());
    {
      // Entity E: hypernym E -> E % 20 + 1, part_holonym E -> (E + 1) % 20 + 1. Add the inverse of
      // 5 -> 6, as WordNet stores most relations both ways.
      auto db = sql::Db::open(corpus, sql::OpenMode::ReadWrite);
      QVERIFY(db.isOk());
      QVERIFY(db->exec("INSERT INTO relations(src, type, dst, source, source_file, source_offset) "
                       "VALUES (6, 'hyponym', 5, 'wordnet', 'data.noun', 1)")
                  .isOk());
    }
    auto kg = KnowledgeExplorer::open(corpus);
    QVERIFY2(kg.isOk(), kg.status().message().c_str());
    m_kg = *kg;
  }

  void countsTheGraph() {
    QCOMPARE(m_kg->entityCount(), int64_t{20});
    QCOMPARE(m_kg->edgeCount(), int64_t{41});
    const std::vector<std::string> rel = m_kg->relationNames();
    QVERIFY(std::find(rel.begin(), rel.end(), "hypernym") != rel.end());
    QVERIFY(std::find(rel.begin(), rel.end(), "hyponym") != rel.end());
  }

  void completesNamesInOrder() {
    const std::vector<KgNameMatch> m = m_kg->complete("ENTITY 1", 50);
    QCOMPARE(m.size(), size_t{11});  // entity 1, entity 10 .. entity 19
    QCOMPARE(m.front().name, std::string("entity 1"));
    QCOMPARE(m[1].name, std::string("entity 10"));
    QCOMPARE(m.back().name, std::string("entity 19"));
    for (const KgNameMatch& x : m) QCOMPARE(x.entities, 1);
    QCOMPARE(m_kg->complete("entity 1", 3).size(), size_t{3});
    QCOMPARE(m_kg->complete("  entity   2", 50).size(), size_t{2});  // entity 2, entity 20
    QVERIFY(m_kg->complete("", 50).empty());
    QVERIFY(m_kg->complete("zebra", 50).empty());
  }

  void findsSensesAndSaysWhenNoneExists() {
    auto found = m_kg->find("Entity 3");
    QVERIFY(found.isOk());
    QCOMPARE(found->size(), size_t{1});
    QCOMPARE(found->front().id, 3);
    QCOMPARE(found->front().kind, KgEntityKind::Synset);
    auto none = m_kg->find("no such thing");
    QVERIFY(!none.isOk());
    QCOMPARE(none.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(none.status(), {"no such thing"}));
    QVERIFY(!m_kg->entity(0).isOk());
    QVERIFY(mentions(m_kg->entity(999).status(), {"999", "20"}));
  }

  void neighbourhoodHasTypedEdgesBothWays() {
    auto n = m_kg->neighbourhood(5, {});
    QVERIFY2(n.isOk(), n.status().message().c_str());
    QCOMPARE(n->centre.id, 5);
    QCOMPARE(n->entities.front().id, 5);
    // Out: 5 -hypernym-> 6, 5 -part_holonym-> 7. In: 4 -hypernym-> 5, 3 -part_holonym-> 5; the
    // in-edge 6 -hyponym-> 5 is mirrored by 5 -> 6 and left out.
    const std::vector<KgRelationEdge> want = {
        {5, 6, "hypernym"}, {5, 7, "part_holonym"}, {3, 5, "part_holonym"}, {4, 5, "hypernym"}};
    QCOMPARE(n->edges.size(), want.size());
    for (const KgRelationEdge& e : want) QVERIFY(std::find(n->edges.begin(), n->edges.end(), e) != n->edges.end());
    QCOMPARE(n->entities.size(), size_t{5});
    QCOMPARE(n->totalEdges, int64_t{4});
    QCOMPARE(n->cutEdges, int64_t{0});
    // Out-edges only.
    auto out = m_kg->neighbourhood(5, {.maxEdges = 60, .incoming = false});
    QVERIFY(out.isOk());
    QCOMPARE(out->edges.size(), size_t{2});
    // The cap: the rest are counted.
    auto capped = m_kg->neighbourhood(5, {.maxEdges = 1});
    QVERIFY(capped.isOk());
    QCOMPARE(capped->edges.size(), size_t{1});
    QCOMPARE(capped->cutEdges, int64_t{3});
    QCOMPARE(capped->entities.size(), size_t{2});
  }

  void neighbourhoodRefusesBadInput() {
    auto unknown = m_kg->neighbourhood(999, {});
    QVERIFY(!unknown.isOk());
    QCOMPARE(unknown.status().code(), StatusCode::NotFound);
    auto bad = m_kg->neighbourhood(5, {.maxEdges = 0});
    QVERIFY(!bad.isOk());
    QVERIFY(mentions(bad.status(), {"maxEdges"}));
  }

  void readsPassagesAndGlosses() {
    auto ps = m_kg->passages(5);
    QVERIFY(ps.isOk());
    QCOMPARE(ps->size(), size_t{1});
    QCOMPARE(ps->front().text, testing::tinyPassage(5));
    QCOMPARE(ps->front().id, int64_t{5});
    auto g = m_kg->gloss(5, 20);
    QVERIFY(g.isOk());
    QVERIFY(g->size() <= 20 + 3);  // 19 characters and the ellipsis
    QVERIFY(g->find("entity 5") == 0);
    QVERIFY(g->ends_with("…"));
    QVERIFY(!m_kg->passages(999).isOk());
  }

  void aMissingCorpusSaysHowToBuildOne() {
    auto kg = KnowledgeExplorer::open(fs::path(m_dir.path().toStdString()) / "none.db");
    QVERIFY(!kg.isOk());
    QVERIFY(mentions(kg.status(), {"ragraph corpus build"}));
  }

  // What a knowledge stage records: names resolved, kept and pruned paths with their scores,
  // every linked entity with whether it was expanded.
  void aRetrievalBecomesItsPublicRecord() {
    using namespace rag::knowledge;
    const std::vector<KnowledgeGraph::EdgeSpec> edges = {{1, "hypernym", 2}, {2, "part_holonym", 3}};
    auto g = KnowledgeGraph::fromParts({"dog", "canine", "pack", "cat"},
                                       {EntityKind::Synset, EntityKind::Synset, EntityKind::Synset, EntityKind::Lemma},
                                       edges);
    KgResult r;
    r.nameCandidates = {{.entity = 1, .source = LinkSource::Name, .matched = "dog", .score = 0.8},
                        {.entity = 4, .source = LinkSource::Name, .matched = "cat", .score = 0.2}};
    Subgraph s{.link = r.nameCandidates[0], .paths = {}, .cutEdges = 2};
    s.paths.push_back({.entities = {1, 2}, .relations = {0}, .score = 0.9, .kept = true});
    s.paths.push_back({.entities = {1, 2, 3}, .relations = {0, 1}, .score = 0.4, .kept = false});
    r.subgraphs.push_back(s);
    r.subgraphs.push_back({.link = {.entity = 3, .source = LinkSource::Passage, .matched = "17", .score = 0.5},
                           .paths = {},
                           .cutEdges = 0});
    auto use = knowledgeUse(*g, "what is a dog?", r);
    QCOMPARE(use->query, std::string("what is a dog?"));
    QCOMPARE(use->keptPaths(), int64_t{1});
    QCOMPARE(use->prunedPaths(), int64_t{1});
    QCOMPARE(use->links.size(), size_t{3});  // two name candidates, then the passage-linked root
    QCOMPARE(use->links[0].entity.name, std::string("dog"));
    QVERIFY(use->links[0].chosen);
    QCOMPARE(use->links[1].entity.kind, KgEntityKind::Lemma);
    QVERIFY(!use->links[1].chosen);
    QCOMPARE(use->links[2].source, KgLinkSource::Passage);
    QVERIFY(use->links[2].chosen);
    QCOMPARE(use->subgraphs.size(), size_t{2});
    const KgPathUse& pruned = use->subgraphs[0].paths[1];
    QCOMPARE(pruned.entities.back().name, std::string("pack"));
    QCOMPARE(pruned.relations, (std::vector<std::string>{"hypernym", "part_holonym"}));
    QCOMPARE(pruned.score, 0.4);
    QVERIFY(!pruned.kept);
    QCOMPARE(use->subgraphs[0].cutEdges, int64_t{2});
  }
};

QTEST_GUILESS_MAIN(TestKnowledgeExplorer)
#include "test_knowledge_explorer.moc"
