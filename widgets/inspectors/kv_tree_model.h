// The KV-tree inspector's data half: the engine's prefix KV tree (rag::KvTreeNode snapshots) as
// a Qt item model, one top-level row per namespace, one row per cached prefix node beneath its
// parent. It stays readable at thousands of nodes the way the timeline folds narrow spans: under
// each parent the largest subtrees (by cached tokens) get their own rows, and the small rest fold
// into one "… N more" row (unfold() opens it).
//
//   ragwb::KvTreeModel model;
//   model.setSnapshot(engine->kvTreeSnapshot());   // on the GUI thread; resets the model
//   view->setModel(&model);
//   QModelIndex n = model.indexOfNode(42);         // for a request's matched path
//
// Columns: text (the node's tokens decoded), tokens (its edge), subtree tokens, tier, locks,
// hits, priority. A GUI-thread object.
#pragma once

#include <QAbstractItemModel>
#include <QSet>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "rag/engine.h"

namespace ragwb {

enum class KvTreeRowKind : int { Namespace, Node, Folded };

struct KvTreeFoldParams {
  int maxChildren = 12;     // at most this many rows of children per parent, the rest fold
  double minShare = 0.01;   // a child under this share of its parent's subtree tokens folds
};

// A snapshot laid out in rows: what the model shows. Made by KvTreeModel::layOut, a pure
// function that may run on any thread (it is the expensive part at thousands of nodes).
struct KvTreeLayout {
  struct Row {
    KvTreeRowKind kind = KvTreeRowKind::Node;
    int parentRow = -1;       // index into rows; -1 for the invisible root
    int rowInParent = 0;
    std::vector<int> children;
    int node = -1;            // index into nodes (Node rows)
    uint64_t ns = 0;          // Namespace rows
    int foldedNodes = 0;      // Folded rows: nodes in the folded subtrees; Namespace: all nodes
    int64_t subtreeTokens = 0;
    int64_t hits = 0;         // Folded rows: summed
  };
  std::vector<rag::KvTreeNode> nodes;
  std::vector<Row> rows = std::vector<Row>(1);  // rows[0]: the invisible root
  std::unordered_map<int32_t, int> rowOfNode;     // node id -> its row (or its folded row)
  int64_t cachedTokens = 0;
  int foldedRows = 0;
};

// What the tree holds of one prompt now: the nodes its tokens run through from its namespace's
// top, each continuing the prompt (the last one possibly only in part), and the prompt tokens
// found along them.
struct KvTreePath {
  std::vector<int32_t> nodes;  // ids, top first
  int64_t matchedTokens = 0;
};
KvTreePath matchPromptPath(const std::vector<rag::KvTreeNode>& nodes, uint64_t ns, std::span<const int32_t> prompt);

// How a node differs from the snapshot before (a node is the same when its id, parent and tokens
// are; an id the tree reused for other tokens is an eviction and an addition).
enum class KvTreeChange : int { None, Added, ToHost, ToCompute };

// What changed between the previous snapshot and the one shown (setLayout compares them).
struct KvTreeChanges {
  struct Evicted {
    int32_t id = -1;
    std::string text;
    int64_t tokens = 0;
    int64_t hits = 0;
    bool hostTier = false;  // it was in the host tier when it went
  };
  bool first = true;  // the first snapshot: nothing to compare with, nothing marked
  int added = 0;
  int toHost = 0;
  int toCompute = 0;
  std::vector<Evicted> evicted;
  int64_t evictedTokens = 0;
  bool any() const { return added + toHost + toCompute > 0 || !evicted.empty(); }
};

class KvTreeModel : public QAbstractItemModel {
  Q_OBJECT
public:
  enum Column { Text, Tokens, SubtreeTokens, Tier, Locks, Hits, Priority, ColumnCount };
  enum Role {
    NodeIdRole = Qt::UserRole + 1,  // the node's id; -1 for namespace and folded rows
    KindRole,                       // RowKind as int
    FoldedCountRole,                // a folded row: the nodes in its subtrees
    NamespaceRole,                  // a namespace row: its ns
    ChangeRole,                     // a node row: KvTreeChange as int, since the last snapshot
    PathRole,                       // bool: the row holds a node of the highlighted prompt's path
  };
  using RowKind = KvTreeRowKind;
  using FoldParams = KvTreeFoldParams;

  explicit KvTreeModel(QObject* parent = nullptr);

  // `nodes` in rows, folded by `fold` except under the parents in `unfolded` (unfoldedKeys()).
  // Nodes whose parent is missing from the snapshot hang under their namespace. Pure: callable
  // on any thread.
  static KvTreeLayout layOut(std::vector<rag::KvTreeNode> nodes, const FoldParams& fold, const QSet<qint64>& unfolded);
  // Shows `layout`, a new snapshot (a model reset), and compares it with the one before:
  // changes() and the rows' ChangeRole (added rows tinted green, tier moves orange / blue). It
  // should come from layOut with this model's foldParams() and unfoldedKeys().
  void setLayout(KvTreeLayout layout);
  const KvTreeChanges& changes() const { return m_changes; }
  // Lays out and shows `nodes` here, on the calling thread.
  void setSnapshot(std::vector<rag::KvTreeNode> nodes);
  void setFoldParams(FoldParams p);
  const FoldParams& foldParams() const { return m_fold; }
  const QSet<qint64>& unfoldedKeys() const { return m_unfolded; }
  // Shows every child of the folded row's parent (a model reset); false for another row.
  bool unfold(const QModelIndex& foldedRow);
  // Highlights where `prompt` (namespace `ns`; 0 holds plain causal prompts) runs in the tree, in
  // this snapshot and the ones after it: the parents along the path are unfolded so that each of
  // its nodes has a row (a node folded later marks its folded row). An empty prompt clears it.
  void setPromptPath(std::vector<int32_t> prompt, uint64_t ns = 0);
  const KvTreePath& promptPath() const { return m_path; }
  const std::vector<int32_t>& pathPrompt() const { return m_pathPrompt; }
  uint64_t pathNamespace() const { return m_pathNs; }
  // `unfolded` plus the parents along `prompt`'s path in `nodes`: what a later snapshot is laid
  // out with so the path's new nodes get rows too. Pure: callable on any thread.
  static QSet<qint64> withPathParents(const std::vector<rag::KvTreeNode>& nodes, QSet<qint64> unfolded,
                                      std::span<const int32_t> prompt, uint64_t ns);
  int64_t promptTokens() const { return static_cast<int64_t>(m_pathPrompt.size()); }

  int nodeCount() const { return static_cast<int>(m_layout.nodes.size()); }
  int64_t cachedTokens() const { return m_layout.cachedTokens; }
  int foldedRows() const { return m_layout.foldedRows; }
  // The row of node `id`, or of the folded row that holds it; invalid when absent.
  QModelIndex indexOfNode(int32_t id) const;
  const rag::KvTreeNode* node(const QModelIndex& index) const;  // nullptr for other rows

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
  QModelIndex indexOfRow(int row, int column = 0) const;
  void relayOut();  // the same snapshot in other rows (fold settings): its changes stay marked
  void compareWith(const std::vector<rag::KvTreeNode>& previous);
  void matchPath();  // m_path and m_pathRows for the layout shown

  KvTreeLayout m_layout;
  QSet<qint64> m_unfolded;  // parent node ids (namespace tops: -1 - ns) shown unfolded
  FoldParams m_fold;
  KvTreeChanges m_changes;
  bool m_hadSnapshot = false;
  std::unordered_map<int32_t, KvTreeChange> m_changeOf;  // node id -> its change (None absent)
  std::vector<int32_t> m_pathPrompt;
  uint64_t m_pathNs = 0;
  KvTreePath m_path;
  QSet<int> m_pathRows;
};

}  // namespace ragwb
