// The KV-tree inspector: its model (QAbstractItemModelTester; folding small subtrees, unfolding,
// namespaces, what each column says), the inspector keeping open rows across snapshots, the
// benchmark's shape, and end to end: requests served with the prefix cache on are found as nodes
// (decoded prompt text) in the model.
#include <QtTest>

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLabel>
#include <QFont>
#include <QSignalSpy>
#include <QPlainTextEdit>
#include <QTreeView>
#include <filesystem>

#include "tiny_bridge_config.h"
#include "bridge/engine_bridge.h"
#include "inspectors/kv_tree_bench.h"
#include "inspectors/kv_tree_inspector.h"
#include "inspectors/kv_tree_model.h"

using ragwb::KvTreeModel;
namespace fs = std::filesystem;

namespace {

rag::KvTreeNode node(int32_t id, int32_t parent, int tokens, uint64_t ns = 0) {
  rag::KvTreeNode n;
  n.id = id;
  n.parent = parent;
  n.ns = ns;
  n.tokens.assign(static_cast<size_t>(tokens), 7);
  n.text = "node " + std::to_string(id);
  n.depthTokens = tokens;  // fixed up by the callers that need it
  return n;
}

// Node 0 (8 tokens) with three big children (100 tokens) and seventeen small ones (4 tokens).
std::vector<rag::KvTreeNode> wideTree() {
  std::vector<rag::KvTreeNode> t = {node(0, -1, 8)};
  for (int i = 1; i <= 20; ++i) {
    t.push_back(node(i, 0, i <= 3 ? 100 : 4));
    t.back().depthTokens = 8 + static_cast<int64_t>(t.back().tokens.size());
  }
  return t;
}

int childRowWithId(const KvTreeModel& m, const QModelIndex& parent, int32_t id) {
  for (int r = 0; r < m.rowCount(parent); ++r)
    if (m.index(r, 0, parent).data(KvTreeModel::NodeIdRole).toInt() == id) return r;
  return -1;
}

}  // namespace

class TestKvTree : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

private Q_SLOTS:
  void modelPassesTheTester() {
    KvTreeModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setSnapshot(ragwb::syntheticKvTree(3000));
    QVERIFY(m.rowCount() == 2);  // two namespaces
    QVERIFY(m.foldedRows() > 0);
    // Unfold the first folded row found, under the tester's eye.
    std::vector<QModelIndex> stack = {m.index(0, 0), m.index(1, 0)};
    while (!stack.empty()) {
      const QModelIndex i = stack.back();
      stack.pop_back();
      if (i.data(KvTreeModel::KindRole).toInt() == int(KvTreeModel::RowKind::Folded)) {
        QVERIFY(m.unfold(i));
        break;
      }
      for (int r = 0; r < m.rowCount(i); ++r) stack.push_back(m.index(r, 0, i));
    }
    m.setSnapshot({});
    QCOMPARE(m.rowCount(), 0);
  }

  void smallSubtreesFoldIntoOneRow() {
    KvTreeModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setFoldParams({.maxChildren = 12, .minShare = 0.05});
    m.setSnapshot(wideTree());
    QCOMPARE(m.nodeCount(), 21);
    QCOMPARE(m.cachedTokens(), 8 + 3 * 100 + 17 * 4);
    const QModelIndex ns = m.index(0, 0);
    QCOMPARE(m.rowCount(ns), 1);
    const QModelIndex root = m.index(0, 0, ns);
    QCOMPARE(root.data(KvTreeModel::NodeIdRole).toInt(), 0);
    QCOMPARE(m.index(0, KvTreeModel::SubtreeTokens, ns).data().toLongLong(), 8 + 300 + 68);
    // The three big children, then one folded row for the seventeen small ones (each under 5 %).
    QCOMPARE(m.rowCount(root), 4);
    for (int r = 0; r < 3; ++r) QCOMPARE(m.index(r, KvTreeModel::Tokens, root).data().toInt(), 100);
    const QModelIndex folded = m.index(3, 0, root);
    QCOMPARE(folded.data(KvTreeModel::KindRole).toInt(), int(KvTreeModel::RowKind::Folded));
    QCOMPARE(folded.data(KvTreeModel::FoldedCountRole).toInt(), 17);
    QCOMPARE(m.index(3, KvTreeModel::SubtreeTokens, root).data().toLongLong(), 68);
    QVERIFY(folded.data().toString().contains("17 more"));
    QCOMPARE(m.indexOfNode(12), folded);  // a folded node is found at its folded row
    QCOMPARE(m.foldedRows(), 1);
    // Unfolding shows every child; the node now has its own row.
    QVERIFY(m.unfold(folded));
    const QModelIndex root2 = m.index(0, 0, m.index(0, 0));
    QCOMPARE(m.rowCount(root2), 20);
    QVERIFY(childRowWithId(m, root2, 12) >= 0);
    QCOMPARE(m.indexOfNode(12).data(KvTreeModel::NodeIdRole).toInt(), 12);
    QVERIFY(!m.unfold(root2));  // not a folded row
    // The unfolded parent stays unfolded in the next snapshot.
    m.setSnapshot(wideTree());
    QCOMPARE(m.rowCount(m.index(0, 0, m.index(0, 0))), 20);
  }

  void promptPathFollowsTheTokensDownTheTree() {
    // Node 0 [1 2 3] with twenty children [10+i, 50] and node 22 [25 51 52], which shares its
    // first token with child 15 (the cache keys children by whole blocks); child 15 has a child
    // [60 61 62]; the same tokens in namespace 1 must not be matched for namespace 0.
    auto withTokens = [](int32_t id, int32_t parent, std::vector<int32_t> tokens, uint64_t ns = 0) {
      rag::KvTreeNode n = node(id, parent, 0, ns);
      n.tokens = std::move(tokens);
      return n;
    };
    std::vector<rag::KvTreeNode> t = {withTokens(0, -1, {1, 2, 3}), withTokens(100, -1, {1, 2, 3}, 1)};
    for (int i = 1; i <= 20; ++i) t.push_back(withTokens(i, 0, {10 + i, 50}));
    t[2].tokens.insert(t[2].tokens.end(), 90, 50);  // child 1 is big: the small ones fold
    t.push_back(withTokens(22, 0, {25, 51, 52}));
    t.push_back(withTokens(21, 15, {60, 61, 62}));
    using ragwb::matchPromptPath;
    ragwb::KvTreePath p = matchPromptPath(t, 0, std::vector<int32_t>{1, 2, 3, 25, 50, 60, 61, 99});
    QCOMPARE(p.nodes, (std::vector<int32_t>{0, 15, 21}));
    QCOMPARE(p.matchedTokens, int64_t{7});  // 3 + 2 + 2 of node 21's 3
    p = matchPromptPath(t, 0, std::vector<int32_t>{1, 2, 3, 25, 51, 52, 7});
    QCOMPARE(p.nodes, (std::vector<int32_t>{0, 22}));
    QCOMPARE(p.matchedTokens, int64_t{6});
    p = matchPromptPath(t, 0, std::vector<int32_t>{1, 2, 9});
    QCOMPARE(p.nodes, (std::vector<int32_t>{0}));  // left part-way through the first edge
    QCOMPARE(p.matchedTokens, int64_t{2});
    QVERIFY(matchPromptPath(t, 0, std::vector<int32_t>{5, 1, 2}).nodes.empty());
    QCOMPARE(matchPromptPath(t, 1, std::vector<int32_t>{1, 2, 3, 25}).nodes, (std::vector<int32_t>{100}));

    // In the model: node 15 was folded; choosing the path unfolds its parent and marks its rows.
    KvTreeModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setFoldParams({.maxChildren = 4, .minShare = 0.05});
    m.setSnapshot(t);
    QCOMPARE(m.indexOfNode(15).data(KvTreeModel::KindRole).toInt(), int(KvTreeModel::RowKind::Folded));
    m.setPromptPath({1, 2, 3, 25, 50, 60, 61, 99});
    QCOMPARE(m.promptPath().matchedTokens, int64_t{7});
    for (int32_t id : {0, 15, 21}) {
      const QModelIndex i = m.indexOfNode(id);
      QCOMPARE(i.data(KvTreeModel::NodeIdRole).toInt(), id);  // a row of its own now
      QVERIFY(i.data(KvTreeModel::PathRole).toBool());
      QVERIFY(i.data(Qt::BackgroundRole).isValid());
    }
    QVERIFY(!m.indexOfNode(1).data(KvTreeModel::PathRole).toBool());
    QVERIFY(!m.indexOfNode(100).data(KvTreeModel::PathRole).toBool());
    // The next snapshot keeps the path: here node 21 was evicted.
    t.pop_back();
    m.setSnapshot(t);
    QCOMPARE(m.promptPath().nodes, (std::vector<int32_t>{0, 15}));
    QCOMPARE(m.promptPath().matchedTokens, int64_t{5});
    m.setPromptPath({});
    QVERIFY(m.promptPath().nodes.empty());
    QVERIFY(!m.indexOfNode(0).data(KvTreeModel::PathRole).toBool());
  }

  void columnsSayWhatANodeIs() {
    std::vector<rag::KvTreeNode> t = {node(5, -1, 16), node(6, 5, 4, 0), node(9, 77, 8, 3)};  // 77: not in the snapshot
    t[0].text = "Question: what\nis a dog?";
    t[0].hostTier = true;
    t[0].hits = 12;
    t[0].priority = 0.25;
    t[1].locks = 2;
    t[1].depthTokens = 20;
    KvTreeModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setSnapshot(t);
    QCOMPARE(m.rowCount(), 2);  // namespaces 0 and 3; node 9 hangs under its namespace
    QCOMPARE(m.index(1, 0).data(KvTreeModel::NamespaceRole).toULongLong(), 3ull);
    QCOMPARE(m.index(0, 0, m.index(1, 0)).data(KvTreeModel::NodeIdRole).toInt(), 9);
    const QModelIndex n5 = m.indexOfNode(5);
    auto cell = [&](const QModelIndex& i, int c) { return m.index(i.row(), c, i.parent()); };
    QCOMPARE(n5.data().toString(), QString("Question: what\u23CEis a dog?"));  // one line
    QVERIFY(n5.data(Qt::ToolTipRole).toString().contains("Question: what\nis a dog?"));
    QCOMPARE(cell(n5, KvTreeModel::Tokens).data().toInt(), 16);
    QCOMPARE(cell(n5, KvTreeModel::SubtreeTokens).data().toInt(), 20);
    QCOMPARE(cell(n5, KvTreeModel::Tier).data().toString(), QString("host"));
    QCOMPARE(cell(n5, KvTreeModel::Hits).data().toInt(), 12);
    QCOMPARE(cell(n5, KvTreeModel::Priority).data().toString(), QString("0.25"));
    const QModelIndex n6 = m.indexOfNode(6);
    QCOMPARE(n6.parent(), n5);
    QCOMPARE(cell(n6, KvTreeModel::Tier).data().toString(), QString("compute"));
    QCOMPARE(cell(n6, KvTreeModel::Locks).data().toInt(), 2);
    QVERIFY(n6.data(Qt::FontRole).value<QFont>().bold());  // locked by a live sequence
    QCOMPARE(m.node(n6)->id, 6);
    QCOMPARE(m.node(m.index(0, 0)), nullptr);  // a namespace row
  }

  void inspectorKeepsOpenRowsAcrossSnapshots() {
    ragwb::KvTreeInspector inspector(nullptr);
    const std::vector<rag::KvTreeNode> tree = ragwb::syntheticKvTree(500);
    inspector.showSnapshot(tree);
    QTreeView* view = inspector.view();
    KvTreeModel* m = inspector.model();
    const QModelIndex ns = m->index(0, 0);
    QVERIFY(view->isExpanded(ns));  // namespaces open at first
    const QModelIndex first = m->index(0, 0, ns);
    const int id = first.data(KvTreeModel::NodeIdRole).toInt();
    view->expand(first);
    inspector.showSnapshot(tree);
    QVERIFY(view->isExpanded(m->indexOfNode(id)));
    QVERIFY(view->isExpanded(m->index(0, 0)));
  }

  void changesBetweenSnapshotsAreMarkedAndLogged() {
    ragwb::KvTreeInspector inspector(nullptr);
    std::vector<rag::KvTreeNode> before = wideTree();
    inspector.showSnapshot(before);
    KvTreeModel* m = inspector.model();
    QVERIFY(m->changes().first);  // nothing to compare the first snapshot with
    QCOMPARE(m->indexOfNode(1).data(KvTreeModel::ChangeRole).toInt(), static_cast<int>(ragwb::KvTreeChange::None));

    std::vector<rag::KvTreeNode> after;
    for (rag::KvTreeNode n : before) {
      if (n.id == 5) continue;                   // evicted
      if (n.id == 2) n.hostTier = true;          // moved to the host tier
      if (n.id == 7) n.tokens.assign(4, 9);      // id reused for other tokens: evicted and added
      after.push_back(n);
    }
    after.push_back(node(21, 0, 100));           // new
    inspector.showSnapshot(after);
    const ragwb::KvTreeChanges& c = m->changes();
    QVERIFY(!c.first);
    QCOMPARE(c.evicted.size(), size_t{2});
    QCOMPARE(c.evictedTokens, int64_t{8});
    QCOMPARE(c.added, 2);
    QCOMPARE(c.toHost, 1);
    QCOMPARE(c.toCompute, 0);
    auto change = [&](int32_t id) { return m->indexOfNode(id).data(KvTreeModel::ChangeRole).toInt(); };
    QCOMPARE(change(2), static_cast<int>(ragwb::KvTreeChange::ToHost));
    QCOMPARE(change(21), static_cast<int>(ragwb::KvTreeChange::Added));
    QCOMPARE(change(1), static_cast<int>(ragwb::KvTreeChange::None));
    QVERIFY(m->indexOfNode(2).data(Qt::BackgroundRole).isValid());
    const QString log = inspector.changeLog()->toPlainText();
    QVERIFY2(log.contains("evicted «node 5» (4 tokens"), qPrintable(log));
    QVERIFY2(log.contains("1 moved to the host tier"), qPrintable(log));
    QCOMPARE(inspector.evictedSinceOpened(), int64_t{2});

    // Unfolding lays the same snapshot out again: its marks stay, nothing is compared.
    const QModelIndex root = m->index(0, 0, m->index(0, 0));
    int folded = -1;
    for (int r = 0; r < m->rowCount(root); ++r)
      if (m->index(r, 0, root).data(KvTreeModel::KindRole).toInt() == static_cast<int>(KvTreeModel::RowKind::Folded)) folded = r;
    QVERIFY(folded >= 0);
    QVERIFY(m->unfold(m->index(folded, 0, root)));
    QCOMPARE(change(2), static_cast<int>(ragwb::KvTreeChange::ToHost));
    QCOMPARE(m->changes().evicted.size(), size_t{2});

    inspector.showSnapshot(after);  // nothing changed since
    QVERIFY(!m->changes().any());
    QCOMPARE(change(2), static_cast<int>(ragwb::KvTreeChange::None));
  }

  void benchmarkReportsItsShape() {
    const ragwb::KvTreeBenchResult r = ragwb::benchmarkKvTree(2000, 4, {600, 400});
    QCOMPARE(r.nodes, 2000);
    QCOMPARE(r.frames, 4);
    QVERIFY(r.framesPerSecond > 0);
    QVERIFY(r.rows > 0 && r.rows < 2000 + 2);  // folding: fewer rows than nodes
    QVERIFY(r.foldedRows > 0);
    const QJsonObject j = r.toJson();
    QVERIFY(j.contains("frames_per_s"));
    QCOMPARE(j["nodes"].toInt(), 2000);
  }

  // End to end: one-shot requests on the tiny engine with the prefix cache on leave their
  // prompts in the tree; the inspector's model shows them, decoded.
  void servedPromptsAppearInTheTree() {
    QVERIFY(m_dir.isValid());
    auto t = rag::testing::makeTinyServing(fs::path(m_dir.path().toStdString()));
    QVERIFY2(t.isOk(), t.status().message().c_str());
    ragwb::EngineBridge bridge;
    ragwb::KvTreeInspector inspector(&bridge);
    QSignalSpy ready(&bridge, &ragwb::EngineBridge::engineReady);
    bridge.startEngine(tinyBridgeConfig(*t));
    QVERIFY(ready.wait(60000));
    QSignalSpy done(&bridge, &ragwb::EngineBridge::runFinished);
    ragwb::RunRequest run;
    run.graph = *rag::builtinWorkflow(rag::Workflow::OneShot);
    run.split = "test";
    run.count = 6;
    run.rps = 0;
    QVERIFY(bridge.startRun(run));
    QVERIFY(done.wait(120000));
    QVERIFY(bridge.stats().prefixCacheOn);
    // The worker snapshots the tree only once asked: ask until an answer has nodes.
    QSignalSpy trees(&bridge, &ragwb::EngineBridge::kvTree);
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          bridge.requestKvTree();
          return inspector.model()->nodeCount() > 0;
        }(),
        10000);
    QVERIFY(trees.count() >= 1);
    KvTreeModel* m = inspector.model();
    QVERIFY(m->cachedTokens() > 0);
    // The one-shot template's text is in the tree: every prompt shares "Question:".
    bool foundQuestion = false, allDecoded = true;
    m->setFoldParams({.maxChildren = 1 << 20, .minShare = 0});  // every node a row
    std::vector<QModelIndex> stack;
    for (int r = 0; r < m->rowCount(); ++r) stack.push_back(m->index(r, 0));
    int rows = 0;
    while (!stack.empty()) {
      const QModelIndex i = stack.back();
      stack.pop_back();
      if (const rag::KvTreeNode* n = m->node(i)) {
        ++rows;
        allDecoded = allDecoded && !n->text.empty() && !n->tokens.empty();
        foundQuestion = foundQuestion || n->text.find("Question:") != std::string::npos;
        QVERIFY(n->depthTokens >= static_cast<int64_t>(n->tokens.size()));
        QCOMPARE(m->indexOfNode(n->id), i);
      }
      for (int r = 0; r < m->rowCount(i); ++r) stack.push_back(m->index(r, 0, i));
    }
    QCOMPARE(rows, m->nodeCount());
    QVERIFY(allDecoded);
    QVERIFY(foundQuestion);
    // Each finished request's generation stage is offered; choosing one shows where its prompt
    // runs in the tree (its template text at least: the prefix cache keeps whole prompts).
    QCOMPARE(inspector.promptChoice()->count(), 1 + 6);  // "none" + one generation stage each
    inspector.showPromptPath(1);
    QVERIFY(!m->promptPath().nodes.empty());
    // Six short requests evict nothing: the tree holds at least the prompt's first KV block
    // (16 tokens; a match that stopped at the first differing token of a block-keyed sibling
    // found 3 of 245 in the demo).
    QVERIFY2(m->promptPath().matchedTokens >= 16, qPrintable(inspector.pathLabel()->text()));
    QVERIFY(m->indexOfNode(m->promptPath().nodes.back()).data(KvTreeModel::PathRole).toBool());
    QVERIFY2(inspector.pathLabel()->text().contains("prompt tokens in the tree now"), qPrintable(inspector.pathLabel()->text()));
    inspector.showPromptPath(0);
    QVERIFY(m->promptPath().nodes.empty());
  }
};

QTEST_MAIN(TestKvTree)
#include "test_kv_tree.moc"
