// The knowledge-graph inspector: its Graphviz layout (boxes apart, edges routed, bad input
// refused), its three models (QAbstractItemModelTester on each: the graph in view with
// expansion and a request's kept/pruned edges, the relation filter, the request tree), the
// inspector itself on a tiny corpus (completion, an unknown name, a neighbourhood laid out,
// passages, double-click expansion, the relation filter), and end to end: GraphRAG requests
// served through the bridge are found in the inspector's request model with the entities they
// linked and their kept and pruned paths.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLineEdit>
#include <QSignalSpy>
#include <QStringListModel>
#include <QTreeView>
#include <filesystem>

#include "../fixtures/workload/tiny_corpus.h"
#include "bridge/engine_bridge.h"
#include "inspectors/kg_graph_model.h"
#include "inspectors/kg_graph_view.h"
#include "inspectors/kg_inspector.h"
#include "inspectors/kg_layout.h"
#include "inspectors/kg_request_model.h"
#include "tiny_bridge_config.h"

using namespace ragwb;
namespace fs = std::filesystem;

namespace {

rag::KgEntity ent(int32_t id, std::string name) { return {.id = id, .name = std::move(name), .kind = rag::KgEntityKind::Synset}; }

// dog -hypernym-> canine, dog -part_meronym-> tail, pack -member_meronym-> dog.
rag::KgNeighbourhood dogNeighbourhood() {
  rag::KgNeighbourhood n;
  n.centre = ent(1, "dog");
  n.entities = {ent(1, "dog"), ent(2, "canine"), ent(3, "tail"), ent(4, "pack")};
  n.edges = {{1, 2, "hypernym"}, {1, 3, "part_meronym"}, {4, 1, "member_meronym"}};
  n.totalEdges = 3;
  return n;
}

rag::KgNeighbourhood canineNeighbourhood() {
  rag::KgNeighbourhood n;
  n.centre = ent(2, "canine");
  n.entities = {ent(2, "canine"), ent(5, "carnivore"), ent(1, "dog")};
  n.edges = {{2, 5, "hypernym"}, {2, 1, "hyponym"}};
  n.cutEdges = 7;
  return n;
}

std::shared_ptr<rag::KnowledgeUse> dogUse() {
  auto use = std::make_shared<rag::KnowledgeUse>();
  use->query = "What is a dog a kind of?";
  rag::KgLink dog{.entity = ent(1, "dog"), .source = rag::KgLinkSource::Name, .matched = "dog", .score = 0.8, .chosen = true};
  rag::KgLink cat{.entity = ent(9, "cat"), .source = rag::KgLinkSource::Passage, .matched = "12", .score = 0.3, .chosen = false};
  use->links = {dog, cat};
  rag::KgSubgraphUse g{.root = dog, .paths = {}, .cutEdges = 0};
  g.paths.push_back({.entities = {ent(1, "dog"), ent(2, "canine")}, .relations = {"hypernym"}, .score = 0.9, .kept = true});
  g.paths.push_back({.entities = {ent(1, "dog"), ent(2, "canine"), ent(5, "carnivore")},
                     .relations = {"hypernym", "hypernym"}, .score = 0.7, .kept = true});
  g.paths.push_back({.entities = {ent(1, "dog"), ent(3, "tail")}, .relations = {"part_meronym"}, .score = 0.2, .kept = false});
  g.paths.push_back({.entities = {ent(1, "dog"), ent(2, "canine"), ent(6, "wolf")},
                     .relations = {"hypernym", "hyponym"}, .score = 0.1, .kept = false});
  use->subgraphs = {g};
  return use;
}

rag::RequestRecord record(uint32_t id, std::shared_ptr<const rag::KnowledgeUse> use) {
  rag::RequestRecord r;
  r.requestId = id;
  r.question = "question " + std::to_string(id);
  rag::StageTiming k;
  k.node = "graph";
  k.kind = rag::NodeKind::Knowledge;
  k.knowledge = std::move(use);
  rag::StageTiming g;
  g.node = "generate";
  r.stages = {k, g};
  return r;
}

}  // namespace

class TestKgInspector : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::shared_ptr<const rag::KnowledgeExplorer> m_kg;

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    const fs::path corpus = fs::path(m_dir.path().toStdString()) / "kg.db";
    rag::testing::TinyCorpusSpec spec;
    spec.entities = 20;
    spec.passages = true;
    QVERIFY(rag::testing::makeTinyCorpus(corpus, spec).isOk());
    auto kg = rag::KnowledgeExplorer::open(corpus);
    QVERIFY2(kg.isOk(), kg.status().message().c_str());
    m_kg = *kg;
  }

  void layoutKeepsBoxesApartAndRoutesEdges() {
    KgLayoutInput in;
    for (int32_t i = 1; i <= 12; ++i) in.nodes.push_back({.id = i, .width = 70, .height = 22});
    for (int32_t i = 2; i <= 12; ++i) in.edges.push_back({1, i});
    in.edges.push_back({2, 3});
    in.edges.push_back({3, 2});  // both ways between one pair
    auto l = layOutKnowledgeGraph(in);
    QVERIFY2(l.isOk(), l.status().message().c_str());
    QCOMPARE(l->nodes.size(), in.nodes.size());
    QCOMPARE(l->edges.size(), in.edges.size());
    for (size_t a = 0; a < l->nodes.size(); ++a) {
      QCOMPARE(l->nodes[a].id, in.nodes[a].id);
      const QRectF ra(l->nodes[a].centre - QPointF(35, 11), QSizeF(70, 22));
      QVERIFY(l->bounds.adjusted(-1, -1, 1, 1).contains(ra.center()));
      for (size_t b = a + 1; b < l->nodes.size(); ++b) {
        const QRectF rb(l->nodes[b].centre - QPointF(35, 11), QSizeF(70, 22));
        QVERIFY2(!ra.intersects(rb), qPrintable(QStringLiteral("nodes %1 and %2 overlap").arg(a + 1).arg(b + 1)));
      }
    }
    for (const KgLayout::Edge& e : l->edges) {
      QVERIFY(!e.path.isEmpty());
      QVERIFY(e.path.length() > 1);
    }
    QVERIFY(l->engine == "neato");
    // A crowded neighbourhood of wide labels (a centre, 60 leaves, a ring through them): still
    // no two boxes overlap.
    KgLayoutInput crowd;
    crowd.nodes.push_back({.id = 1, .width = 160, .height = 22});
    for (int32_t i = 2; i <= 61; ++i) {
      crowd.nodes.push_back({.id = i, .width = 60.0 + (i * 37) % 120, .height = 22});
      crowd.edges.push_back({1, i});
      crowd.edges.push_back({i, i == 61 ? 2 : i + 1});
    }
    auto c = layOutKnowledgeGraph(crowd);
    QVERIFY2(c.isOk(), c.status().message().c_str());
    for (size_t a = 0; a < c->nodes.size(); ++a)
      for (size_t b = a + 1; b < c->nodes.size(); ++b) {
        const QPointF d = c->nodes[a].centre - c->nodes[b].centre;
        const bool overlap = std::abs(d.x()) * 2 < crowd.nodes[a].width + crowd.nodes[b].width &&
                             std::abs(d.y()) * 2 < crowd.nodes[a].height + crowd.nodes[b].height;
        QVERIFY2(!overlap, qPrintable(QStringLiteral("nodes %1 and %2 overlap").arg(a + 1).arg(b + 1)));
      }
  }

  void layoutRefusesBadInput() {
    KgLayoutInput in;
    in.nodes.push_back({.id = 1});
    in.edges.push_back({1, 2});
    auto l = layOutKnowledgeGraph(in);
    QVERIFY(!l.isOk());
    QVERIFY(QString::fromStdString(l.status().message()).contains("lacks"));
    in.edges.clear();
    in.nodes.push_back({.id = 1});
    QVERIFY(!layOutKnowledgeGraph(in).isOk());
    QVERIFY(layOutKnowledgeGraph({}).isOk());  // nothing to draw is no error
  }

  void graphModelExpandsAndMarksRequestEdges() {
    KgGraphModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy changed(&m, &KgGraphModel::graphChanged);
    m.showNeighbourhood(dogNeighbourhood());
    QCOMPARE(changed.count(), 1);
    QCOMPARE(m.rowCount(), 4);
    QCOMPARE(m.centre(), 1);
    QVERIFY(m.isExpanded(1));
    QVERIFY(!m.isExpanded(2));
    QCOMPARE(m.index(0, KgGraphModel::Name).data().toString(), QString("dog"));
    QCOMPARE(m.index(0, KgGraphModel::Edges).data().toInt(), 3);
    QCOMPARE(m.index(0, KgGraphModel::State).data().toString(), QString("centre"));
    // Expanding canine appends carnivore only; the hyponym edge back to dog is a new typed edge.
    QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
    QVERIFY(m.expand(canineNeighbourhood()));
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(m.rowCount(), 5);
    QCOMPARE(m.rowOf(5), 4);
    QVERIFY(m.isExpanded(2));
    QCOMPARE(m.edges().size(), size_t{5});
    QCOMPARE(m.cutEdges(), int64_t{7});
    QCOMPARE(m.relationCounts().at("hypernym"), 2);
    // The same neighbourhood again adds nothing.
    QVERIFY(m.expand(canineNeighbourhood()));
    QCOMPARE(m.rowCount(), 5);
    QCOMPARE(m.edges().size(), size_t{5});
    // A neighbourhood whose centre is not in view is refused.
    rag::KgNeighbourhood far;
    far.centre = ent(77, "far");
    far.entities = {far.centre};
    QVERIFY(!m.expand(far));
    QCOMPARE(m.rowCount(), 5);
    // A request's subgraph: edges on a kept path are kept even if a pruned path uses them too.
    m.showSubgraph(dogUse()->subgraphs[0]);
    QVERIFY(m.fromRequest());
    QCOMPARE(m.rowCount(), 5);  // dog, canine, carnivore, tail, wolf
    auto use = [&](int32_t s, int32_t d) {
      for (const KgViewEdge& e : m.edges())
        if (e.edge.src == s && e.edge.dst == d) return e.use;
      return KgEdgeUse::Plain;
    };
    QCOMPARE(use(1, 2), KgEdgeUse::Kept);
    QCOMPARE(use(2, 5), KgEdgeUse::Kept);
    QCOMPARE(use(1, 3), KgEdgeUse::Pruned);
    QCOMPARE(use(2, 6), KgEdgeUse::Pruned);
    m.clear();
    QCOMPARE(m.rowCount(), 0);
  }

  void relationFilterKeepsTheUsersChoice() {
    KgRelationModel r;
    QAbstractItemModelTester tester(&r, QAbstractItemModelTester::FailureReportingMode::QtTest);
    r.setCounts({{"hypernym", 2}, {"xref", 5}, {"part_meronym", 1}});
    QCOMPARE(r.rowCount(), 3);
    QCOMPARE(r.index(0).data(KgRelationModel::RelationRole).toString(), QString("xref"));  // most edges first
    QCOMPARE(r.index(0).data(Qt::CheckStateRole).toInt(), static_cast<int>(Qt::Checked));
    QSignalSpy filter(&r, &KgRelationModel::filterChanged);
    QVERIFY(r.setData(r.index(1), static_cast<int>(Qt::Unchecked), Qt::CheckStateRole));
    QCOMPARE(filter.count(), 1);
    QVERIFY(!r.isShown("hypernym"));
    r.setCounts({{"hypernym", 3}, {"antonym", 1}});  // still hidden after the graph changed
    QVERIFY(!r.isShown("hypernym"));
    QVERIFY(r.isShown("antonym"));
    QCOMPARE(KgRelationModel::colour("hypernym"), KgRelationModel::colour("hypernym"));
    QVERIFY(KgRelationModel::colour("hypernym") != KgRelationModel::colour("xref"));
    r.showAll();
    QCOMPARE(filter.count(), 2);
    QVERIFY(r.isShown("hypernym"));
  }

  void requestModelShowsLinksAndScoredPaths() {
    KgRequestModel m(nullptr, 2);
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    rag::RequestRecord plain;
    plain.requestId = 1;
    plain.stages.resize(1);
    QVERIFY(!m.addRecord(plain));  // no knowledge stage: not this view's business
    QVERIFY(m.addRecord(record(2, dogUse())));
    QCOMPARE(m.rowCount(), 1);
    const QModelIndex req = m.index(0, 0);
    QCOMPARE(m.kind(req), KgRequestModel::RowKind::Request);
    QVERIFY(m.index(0, KgRequestModel::Paths).data().toString().contains("2 kept / 2 pruned"));
    QCOMPARE(m.rowCount(req), 2);  // dog (expanded), cat (a candidate)
    const QModelIndex dog = m.index(0, 0, req);
    const QModelIndex cat = m.index(1, 0, req);
    QCOMPARE(m.kind(dog), KgRequestModel::RowKind::Link);
    QVERIFY(m.subgraphAt(dog));
    QVERIFY(!m.subgraphAt(cat));
    QCOMPARE(m.rowCount(cat), 0);
    QCOMPARE(m.index(1, KgRequestModel::State, req).data().toString(), QString("candidate"));
    QVERIFY(m.index(1, KgRequestModel::How, req).data().toString().contains("passage 12"));
    QCOMPARE(m.rowCount(dog), 4);
    const QModelIndex pruned = m.index(2, 0, dog);
    QCOMPARE(m.kind(pruned), KgRequestModel::RowKind::Path);
    QCOMPARE(m.parent(pruned), dog);
    QCOMPARE(pruned.data().toString(), QString("dog —part_meronym→ tail"));
    QCOMPARE(m.index(2, KgRequestModel::State, dog).data().toString(), QString("pruned"));
    QCOMPARE(m.index(2, KgRequestModel::Score, dog).data().toString(), QString("0.200"));
    QCOMPARE(m.index(0, KgRequestModel::State, dog).data().toString(), QString("kept"));
    QCOMPARE(m.pathAt(pruned)->entities.back().name, std::string("tail"));
    // Capacity 2: the oldest request goes; indexes of the others still resolve.
    QVERIFY(m.addRecord(record(3, dogUse())));
    QVERIFY(m.addRecord(record(4, dogUse())));
    QCOMPARE(m.rowCount(), 2);
    QVERIFY(!m.indexOfRequest(2).isValid());
    const QModelIndex r4 = m.indexOfRequest(4);
    QCOMPARE(r4.row(), 1);
    const QModelIndex path = m.index(1, 0, m.index(0, 0, r4));
    QCOMPARE(m.parent(m.parent(path)), r4);
    QCOMPARE(m.pathAt(path)->score, 0.7);
  }

  void inspectorSearchesCompletesAndExpands() {
    KgInspector inspector(nullptr);
    QSignalSpy ready(&inspector, &KgInspector::explorerReady);
    inspector.setExplorer(m_kg);
    QCOMPARE(ready.count(), 1);
    inspector.resize(1200, 800);
    inspector.show();
    QVERIFY(QTest::qWaitForWindowExposed(&inspector));
    // Completion over the entity names.
    QTest::keyClicks(inspector.searchBox(), "entity 1");
    const QStringList names = inspector.completions()->stringList();
    QVERIFY2(names.contains("entity 1") && names.contains("entity 19"), qPrintable(names.join(", ")));
    QCOMPARE(names.size(), 11);
    // An unknown name: a message, nothing shown.
    QSignalSpy failed(&inspector, &KgInspector::failed);
    inspector.search("no such entity");
    QCOMPARE(failed.count(), 1);
    QVERIFY(failed.first().first().toString().contains("no such entity"));
    QCOMPARE(inspector.graph()->rowCount(), 0);
    // A neighbourhood, laid out, with its passages.
    QSignalSpy shown(&inspector, &KgInspector::neighbourhoodShown);
    QSignalSpy laidOut(inspector.view(), &KgGraphView::layoutApplied);
    QSignalSpy passages(&inspector, &KgInspector::passagesShown);
    inspector.search("Entity 5");
    QVERIFY(shown.wait(10000));
    QCOMPARE(inspector.graph()->centre(), 5);
    QCOMPARE(inspector.graph()->rowCount(), 5);  // 5, its targets 6 and 7, its sources 4 and 3
    QCOMPARE(inspector.senses()->count(), 1);
    QTRY_VERIFY_WITH_TIMEOUT(laidOut.count() >= 1 && !inspector.view()->layingOut(), 10000);
    QCOMPARE(inspector.view()->drawnNodes(), 5);
    QCOMPARE(inspector.view()->drawnEdges(), 4);
    QTRY_VERIFY_WITH_TIMEOUT(passages.count() >= 1, 10000);
    QVERIFY(inspector.passagesText().contains("the thing numbered 5"));
    QCOMPARE(inspector.relations()->rowCount(), 2);  // hypernym, part_holonym
    // Double-click entity 7 in the view: its neighbourhood joins (8 and 9 appear).
    const QPoint at = inspector.view()->mapFromScene(inspector.view()->nodeCentre(7));
    QVERIFY(!inspector.view()->nodeCentre(7).isNull());
    laidOut.clear();
    QTest::mouseDClick(inspector.view()->viewport(), Qt::LeftButton, {}, at);
    QTRY_VERIFY_WITH_TIMEOUT(inspector.graph()->contains(8) && inspector.graph()->contains(9), 10000);
    QVERIFY(inspector.graph()->isExpanded(7));
    QCOMPARE(inspector.graph()->centre(), 5);
    QTRY_VERIFY_WITH_TIMEOUT(inspector.view()->drawnNodes() == inspector.graph()->rowCount() && !inspector.view()->layingOut(), 10000);
    // The relation filter: hide part_holonym, only hypernym edges are drawn.
    inspector.relations()->setShown("part_holonym", false);
    QTRY_VERIFY_WITH_TIMEOUT(!inspector.view()->layingOut() &&
                                 inspector.view()->drawnEdges() == inspector.graph()->relationCounts().at("hypernym"),
                             10000);
    QVERIFY(inspector.view()->drawnNodes() < inspector.graph()->rowCount());
    // Clicking an entity shows its passages.
    passages.clear();
    inspector.showPassages(9);
    QVERIFY(passages.wait(10000));
    QVERIFY(inspector.passagesText().contains("the thing numbered 9"));
    // An id outside the graph: a message.
    failed.clear();
    inspector.showEntity(999);
    QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 10000);
    QCOMPARE(inspector.graph()->centre(), 5);
  }

  void inspectorDrawsARequestsSubgraph() {
    KgInspector inspector(nullptr);
    inspector.setExplorer(m_kg);
    inspector.resize(1000, 700);
    inspector.show();
    QVERIFY(QTest::qWaitForWindowExposed(&inspector));
    QSignalSpy laidOut(inspector.view(), &KgGraphView::layoutApplied);
    inspector.addRequest(record(7, dogUse()));  // Follow is on: the request's first subgraph is drawn
    QCOMPARE(inspector.requests()->requestCount(), 1);
    QVERIFY(inspector.graph()->fromRequest());
    QCOMPARE(inspector.graph()->centre(), 1);
    QTRY_VERIFY_WITH_TIMEOUT(laidOut.count() >= 1 && !inspector.view()->layingOut(), 10000);
    QCOMPARE(inspector.view()->drawnNodes(), 5);
    QCOMPARE(inspector.view()->drawnEdges(), 4);
    // A path row: the same subgraph, that path highlighted.
    const QModelIndex dog = inspector.requests()->index(0, 0, inspector.requests()->index(0, 0));
    inspector.requestView()->setCurrentIndex(inspector.requests()->index(1, 0, dog));
    QCOMPARE(inspector.graph()->rowCount(), 5);
  }

  // Following a new request closes what following the previous one opened, and nothing the user
  // opened.
  void followingARequestClosesOnlyWhatFollowingOpened() {
    KgInspector inspector(nullptr);
    inspector.setExplorer(m_kg);
    inspector.resize(1000, 700);
    inspector.show();
    QVERIFY(QTest::qWaitForWindowExposed(&inspector));
    KgRequestModel* requests = inspector.requests();
    QTreeView* view = inspector.requestView();
    inspector.addRequest(record(7, dogUse()));
    const QModelIndex seven = requests->indexOfRequest(7);
    QVERIFY(view->isExpanded(seven));
    QVERIFY(view->isExpanded(requests->index(0, 0, seven)));  // its first subgraph
    inspector.addRequest(record(8, dogUse()));
    const QModelIndex eight = requests->indexOfRequest(8);
    QVERIFY(!view->isExpanded(seven));
    QVERIFY(!view->isExpanded(requests->index(0, 0, seven)));
    QVERIFY(view->isExpanded(eight));
    QCOMPARE(view->currentIndex(), requests->index(0, 0, eight));
    view->expand(seven);  // the user opens an earlier request
    inspector.addRequest(record(9, dogUse()));
    QVERIFY(view->isExpanded(seven));
    QVERIFY(!view->isExpanded(eight));
    QVERIFY(view->isExpanded(requests->indexOfRequest(9)));
  }

  // End to end: GraphRAG requests served through the bridge show up in the inspector's request
  // model with the entities they linked and their paths, kept and pruned, with scores.
  void graphRagRequestsAppearInTheView() {
    const fs::path dir = fs::path(m_dir.path().toStdString()) / "serving";
    fs::create_directories(dir);
    auto t = rag::testing::makeTinyServing(dir);
    QVERIFY2(t.isOk(), t.status().message().c_str());
    EngineBridge bridge;
    KgInspector inspector(&bridge);
    inspector.setCorpus(t->corpus);
    QSignalSpy kgReady(&inspector, &KgInspector::explorerReady);
    inspector.openExplorer();
    QVERIFY(kgReady.wait(30000));
    QSignalSpy ready(&bridge, &EngineBridge::engineReady);
    bridge.startEngine(tinyBridgeConfig(*t));
    QVERIFY(ready.wait(60000));
    QSignalSpy finished(&bridge, &EngineBridge::requestFinished);
    QSignalSpy done(&bridge, &EngineBridge::runFinished);
    RunRequest run;
    run.graph = *rag::builtinWorkflow(rag::Workflow::GraphRag);
    run.split = "test";
    run.count = 6;
    run.rps = 0;
    QVERIFY(bridge.startRun(run));
    QVERIFY(done.wait(180000));
    QCOMPARE(finished.count(), 6);
    QCOMPARE(inspector.requests()->requestCount(), 6);
    KgRequestModel* m = inspector.requests();
    int withPaths = 0;
    for (const QList<QVariant>& args : finished) {
      const auto rec = args.first().value<rag::RequestRecord>();
      QVERIFY(rec.ok);
      QCOMPARE(rec.stages.front().kind, rag::NodeKind::Knowledge);
      QVERIFY(rec.stages.front().knowledge);
      const QModelIndex req = m->indexOfRequest(rec.requestId);
      QVERIFY(req.isValid());
      QCOMPARE(m->rowCount(req), static_cast<int>(rec.stages.front().knowledge->links.size()));
      for (int l = 0; l < m->rowCount(req); ++l) {
        const QModelIndex link = m->index(l, 0, req);
        const rag::KgSubgraphUse* g = m->subgraphAt(link);
        if (!g || g->paths.empty()) continue;
        ++withPaths;
        QCOMPARE(m->rowCount(link), static_cast<int>(g->paths.size()));
        bool kept = false;
        for (int p = 0; p < m->rowCount(link); ++p) {
          const rag::KgPathUse* path = m->pathAt(m->index(p, 0, link));
          QVERIFY(path->score >= -1.0001 && path->score <= 1.0001);
          QCOMPARE(path->relations.size() + 1, path->entities.size());
          kept = kept || path->kept;
        }
        QVERIFY(kept);
      }
    }
    QVERIFY2(withPaths > 0, "no GraphRAG request of the tiny corpus expanded an entity with edges");
    // Follow is on: the last request's subgraph is what the view holds.
    QVERIFY(inspector.graph()->fromRequest() || inspector.graph()->rowCount() == 0);
  }
};

QTEST_MAIN(TestKgInspector)
#include "test_kg_inspector.moc"
