#include "inspectors/kv_tree_model.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

namespace ragwb {

namespace {

constexpr int kShownTextChars = 160;

// The fold key of a parent: a node's id, or -1 - ns for a namespace's top level.
qint64 nodeKey(int32_t id) { return id; }
qint64 namespaceKey(uint64_t ns) { return -1 - static_cast<qint64>(ns); }

QString oneLine(const std::string& s) {
  QString t = QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
  t.replace(QLatin1Char('\n'), QChar(0x23CE));  // ⏎
  return t;
}

}  // namespace

KvTreePath matchPromptPath(const std::vector<rag::KvTreeNode>& nodes, uint64_t ns, std::span<const int32_t> prompt) {
  KvTreePath path;
  std::unordered_map<int32_t, const rag::KvTreeNode*> byId;
  for (const rag::KvTreeNode& n : nodes)
    if (n.ns == ns) byId.emplace(n.id, &n);
  // Children per parent id (-1: the namespace's top, and nodes whose parent is missing). The
  // cache keys children by whole KV blocks, so siblings may share their first tokens: each step
  // takes the child that continues the prompt furthest.
  std::unordered_map<int32_t, std::vector<const rag::KvTreeNode*>> children;
  for (const auto& [id, n] : byId)
    if (!n->tokens.empty()) children[byId.count(n->parent) ? n->parent : -1].push_back(n);
  int32_t at = -1;
  size_t pos = 0;
  while (pos < prompt.size()) {
    const rag::KvTreeNode* best = nullptr;
    size_t k = 0;
    for (const rag::KvTreeNode* c : children[at]) {
      size_t m = 0;
      while (m < c->tokens.size() && pos + m < prompt.size() && c->tokens[m] == prompt[pos + m]) ++m;
      if (m > k) best = c, k = m;
    }
    if (!best) break;
    const rag::KvTreeNode& n = *best;
    path.nodes.push_back(n.id);
    path.matchedTokens += static_cast<int64_t>(k);
    pos += k;
    if (k < n.tokens.size()) break;  // the prompt leaves this edge part-way
    at = n.id;
  }
  return path;
}

KvTreeModel::KvTreeModel(QObject* parent) : QAbstractItemModel(parent) {}

QSet<qint64> KvTreeModel::withPathParents(const std::vector<rag::KvTreeNode>& nodes, QSet<qint64> unfolded,
                                          std::span<const int32_t> prompt, uint64_t ns) {
  if (prompt.empty()) return unfolded;
  const KvTreePath path = matchPromptPath(nodes, ns, prompt);
  for (size_t i = 0; i < path.nodes.size(); ++i) unfolded.insert(i == 0 ? namespaceKey(ns) : nodeKey(path.nodes[i - 1]));
  return unfolded;
}

void KvTreeModel::setPromptPath(std::vector<int32_t> prompt, uint64_t ns) {
  m_pathPrompt = std::move(prompt);
  m_pathNs = ns;
  m_unfolded = withPathParents(m_layout.nodes, std::move(m_unfolded), m_pathPrompt, ns);
  relayOut();
}

void KvTreeModel::matchPath() {
  m_pathRows.clear();
  m_path = m_pathPrompt.empty() ? KvTreePath{} : matchPromptPath(m_layout.nodes, m_pathNs, m_pathPrompt);
  for (int32_t id : m_path.nodes)
    if (auto it = m_layout.rowOfNode.find(id); it != m_layout.rowOfNode.end()) m_pathRows.insert(it->second);
}

void KvTreeModel::setLayout(KvTreeLayout layout) {
  beginResetModel();
  const std::vector<rag::KvTreeNode> previous = std::exchange(m_layout.nodes, {});
  m_layout = std::move(layout);
  if (m_hadSnapshot) compareWith(previous);  // the first one is only shown
  m_hadSnapshot = true;
  matchPath();
  endResetModel();
}

void KvTreeModel::compareWith(const std::vector<rag::KvTreeNode>& previous) {
  m_changes = KvTreeChanges{};
  m_changes.first = false;
  m_changeOf.clear();
  const std::vector<rag::KvTreeNode>& nodes = m_layout.nodes;
  std::unordered_map<int32_t, size_t> now;  // id -> index in nodes
  now.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) now.emplace(nodes[i].id, i);
  std::vector<bool> matched(nodes.size(), false);
  for (const rag::KvTreeNode& old : previous) {
    const auto it = now.find(old.id);
    const rag::KvTreeNode* n = it == now.end() ? nullptr : &nodes[it->second];
    if (!n || n->parent != old.parent || n->ns != old.ns || n->tokens != old.tokens) {
      m_changes.evicted.push_back({old.id, old.text, static_cast<int64_t>(old.tokens.size()), old.hits, old.hostTier});
      m_changes.evictedTokens += static_cast<int64_t>(old.tokens.size());
      continue;
    }
    matched[it->second] = true;
    if (n->hostTier != old.hostTier) {
      m_changeOf[n->id] = n->hostTier ? KvTreeChange::ToHost : KvTreeChange::ToCompute;
      ++(n->hostTier ? m_changes.toHost : m_changes.toCompute);
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!matched[i]) {
      m_changeOf[nodes[i].id] = KvTreeChange::Added;
      ++m_changes.added;
    }
}

void KvTreeModel::relayOut() {
  beginResetModel();
  m_layout = layOut(std::move(m_layout.nodes), m_fold, m_unfolded);
  matchPath();
  endResetModel();
}

void KvTreeModel::setSnapshot(std::vector<rag::KvTreeNode> nodes) { setLayout(layOut(std::move(nodes), m_fold, m_unfolded)); }

void KvTreeModel::setFoldParams(FoldParams p) {
  m_fold = p;
  relayOut();
}

bool KvTreeModel::unfold(const QModelIndex& foldedRow) {
  if (!foldedRow.isValid() || foldedRow.model() != this) return false;
  const KvTreeLayout::Row& r = m_layout.rows[foldedRow.internalId()];
  if (r.kind != RowKind::Folded) return false;
  const KvTreeLayout::Row& parentRow = m_layout.rows[r.parentRow];
  m_unfolded.insert(parentRow.kind == RowKind::Namespace ? namespaceKey(parentRow.ns)
                                                         : nodeKey(m_layout.nodes[parentRow.node].id));
  relayOut();
  return true;
}

KvTreeLayout KvTreeModel::layOut(std::vector<rag::KvTreeNode> nodes, const FoldParams& fold, const QSet<qint64>& unfolded) {
  KvTreeLayout out;
  out.nodes = std::move(nodes);
  out.rows[0].kind = RowKind::Namespace;  // the invisible root
  const std::vector<rag::KvTreeNode>& all = out.nodes;
  std::vector<KvTreeLayout::Row>& rows = out.rows;

  const int n = static_cast<int>(all.size());
  std::unordered_map<int32_t, int> byId;
  byId.reserve(all.size());
  for (int i = 0; i < n; ++i) byId.emplace(all[i].id, i);
  // Children per node, tops per namespace (a missing parent counts as the namespace's root).
  std::vector<std::vector<int>> children(all.size());
  std::map<uint64_t, std::vector<int>> tops;
  std::vector<int> parentOf(all.size(), -1);
  for (int i = 0; i < n; ++i) {
    auto it = all[i].parent >= 0 ? byId.find(all[i].parent) : byId.end();
    if (it != byId.end() && it->second != i) {
      children[it->second].push_back(i);
      parentOf[i] = it->second;
    } else {
      tops[all[i].ns].push_back(i);
    }
  }
  // Subtree sizes, children before parents (a child ends deeper than its parent).
  std::vector<int64_t> subTokens(all.size()), subNodes(all.size(), 1);
  std::vector<int> order(all.size());
  for (int i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return all[a].depthTokens > all[b].depthTokens; });
  for (int i : order) {
    subTokens[i] += static_cast<int64_t>(all[i].tokens.size());
    out.cachedTokens += static_cast<int64_t>(all[i].tokens.size());
    if (parentOf[i] >= 0) {
      subTokens[parentOf[i]] += subTokens[i];
      subNodes[parentOf[i]] += subNodes[i];
    }
  }

  // Rows under `parentRow` for the nodes `kids`: the largest subtrees first, the small rest
  // folded into one row (unless the user unfolded this parent).
  std::vector<std::pair<int, std::vector<int>>> work;  // (row, its child nodes) still to lay out
  auto layOut = [&](int parentRow, std::vector<int> kids, int64_t parentTokens, qint64 key) {
    std::sort(kids.begin(), kids.end(), [&](int a, int b) {
      return subTokens[a] != subTokens[b] ? subTokens[a] > subTokens[b] : all[a].id < all[b].id;
    });
    size_t shown = kids.size();
    if (!unfolded.contains(key)) {
      shown = 0;
      while (shown < kids.size() && static_cast<int>(shown) < fold.maxChildren &&
             static_cast<double>(subTokens[kids[shown]]) >= fold.minShare * static_cast<double>(parentTokens))
        ++shown;
      if (kids.size() - shown == 1) shown = kids.size();  // one row folded into one row says nothing
    }
    for (size_t k = 0; k < shown; ++k) {
      KvTreeLayout::Row r;
      r.kind = RowKind::Node;
      r.parentRow = parentRow;
      r.rowInParent = static_cast<int>(rows[parentRow].children.size());
      r.node = kids[k];
      r.subtreeTokens = subTokens[kids[k]];
      const int row = static_cast<int>(rows.size());
      rows.push_back(r);
      rows[parentRow].children.push_back(row);
      out.rowOfNode[all[kids[k]].id] = row;
      if (!children[kids[k]].empty()) work.emplace_back(row, children[kids[k]]);
    }
    if (shown == kids.size()) return;
    KvTreeLayout::Row f;
    f.kind = RowKind::Folded;
    f.parentRow = parentRow;
    f.rowInParent = static_cast<int>(rows[parentRow].children.size());
    const int row = static_cast<int>(rows.size());
    std::vector<int> stack(kids.begin() + static_cast<std::ptrdiff_t>(shown), kids.end());
    for (int k : stack) {
      f.foldedNodes += static_cast<int>(subNodes[k]);
      f.subtreeTokens += subTokens[k];
    }
    while (!stack.empty()) {  // every folded node finds this row
      const int k = stack.back();
      stack.pop_back();
      f.hits += all[k].hits;
      out.rowOfNode[all[k].id] = row;
      stack.insert(stack.end(), children[k].begin(), children[k].end());
    }
    rows.push_back(f);
    rows[parentRow].children.push_back(row);
    ++out.foldedRows;
  };

  for (auto& [ns, topNodes] : tops) {
    KvTreeLayout::Row r;
    r.kind = RowKind::Namespace;
    r.parentRow = 0;
    r.rowInParent = static_cast<int>(rows[0].children.size());
    r.ns = ns;
    for (int i : topNodes) {
      r.subtreeTokens += subTokens[i];
      r.foldedNodes += static_cast<int>(subNodes[i]);
    }
    const int row = static_cast<int>(rows.size());
    rows.push_back(r);
    rows[0].children.push_back(row);
    layOut(row, topNodes, rows[row].subtreeTokens, namespaceKey(ns));
    while (!work.empty()) {
      auto [parentRow, kids] = std::move(work.back());
      work.pop_back();
      const rag::KvTreeNode& p = all[rows[parentRow].node];
      layOut(parentRow, std::move(kids), rows[parentRow].subtreeTokens, nodeKey(p.id));
    }
  }
  return out;
}

QModelIndex KvTreeModel::indexOfRow(int row, int column) const {
  if (row <= 0 || row >= static_cast<int>(m_layout.rows.size())) return {};
  return createIndex(m_layout.rows[row].rowInParent, column, static_cast<quintptr>(row));
}

QModelIndex KvTreeModel::indexOfNode(int32_t id) const {
  auto it = m_layout.rowOfNode.find(id);
  return it == m_layout.rowOfNode.end() ? QModelIndex() : indexOfRow(it->second);
}

const rag::KvTreeNode* KvTreeModel::node(const QModelIndex& index) const {
  if (!index.isValid() || index.model() != this) return nullptr;
  const KvTreeLayout::Row& r = m_layout.rows[index.internalId()];
  return r.kind == RowKind::Node ? &m_layout.nodes[r.node] : nullptr;
}

QModelIndex KvTreeModel::index(int row, int column, const QModelIndex& parent) const {
  if (column < 0 || column >= ColumnCount || row < 0 || (parent.isValid() && parent.column() != 0)) return {};
  const KvTreeLayout::Row& p = m_layout.rows[parent.isValid() ? parent.internalId() : 0];
  if (row >= static_cast<int>(p.children.size())) return {};
  return createIndex(row, column, static_cast<quintptr>(p.children[row]));
}

QModelIndex KvTreeModel::parent(const QModelIndex& child) const {
  if (!child.isValid()) return {};
  return indexOfRow(m_layout.rows[child.internalId()].parentRow);
}

int KvTreeModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() && parent.column() != 0) return 0;
  return static_cast<int>(m_layout.rows[parent.isValid() ? parent.internalId() : 0].children.size());
}

int KvTreeModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant KvTreeModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.model() != this) return {};
  const KvTreeLayout::Row& r = m_layout.rows[index.internalId()];
  const int col = index.column();
  if (role == KindRole) return static_cast<int>(r.kind);
  if (role == NodeIdRole) return r.kind == RowKind::Node ? m_layout.nodes[r.node].id : -1;
  if (role == FoldedCountRole) return r.kind == RowKind::Folded ? r.foldedNodes : 0;
  if (role == NamespaceRole) return r.kind == RowKind::Namespace ? static_cast<qulonglong>(r.ns) : QVariant();
  const bool onPath = m_pathRows.contains(static_cast<int>(index.internalId()));
  if (role == PathRole) return onPath;
  // The highlighted prompt's path wins over the change tints: it is what the user asked to see.
  if (role == Qt::BackgroundRole && onPath) return QBrush(QColor(0xff, 0xe8, 0x8c));
  if (r.kind == RowKind::Namespace) {
    if (role == Qt::DisplayRole) {
      if (col == Text) return tr("namespace %1 · %2 nodes").arg(r.ns).arg(r.foldedNodes);
      if (col == SubtreeTokens) return static_cast<qlonglong>(r.subtreeTokens);
    }
    if (role == Qt::FontRole && col == Text) {
      QFont f;
      f.setBold(true);
      return f;
    }
    return {};
  }
  if (r.kind == RowKind::Folded) {
    if (role == Qt::DisplayRole) {
      if (col == Text) return tr("… %1 more nodes in small subtrees").arg(r.foldedNodes);
      if (col == SubtreeTokens) return static_cast<qlonglong>(r.subtreeTokens);
      if (col == Hits) return static_cast<qlonglong>(r.hits);
    }
    if (role == Qt::FontRole) {
      QFont f;
      f.setItalic(true);
      return f;
    }
    if (role == Qt::ForegroundRole) return QBrush(QColor(0x70, 0x74, 0x7c));
    return {};
  }
  const rag::KvTreeNode& n = m_layout.nodes[r.node];
  const auto changed = m_changeOf.find(n.id);
  const KvTreeChange change = changed == m_changeOf.end() ? KvTreeChange::None : changed->second;
  switch (role) {
    case ChangeRole: return static_cast<int>(change);
    case Qt::BackgroundRole:
      switch (change) {
        case KvTreeChange::Added: return QBrush(QColor(0xd8, 0xf0, 0xd0));      // new since the last update
        case KvTreeChange::ToHost: return QBrush(QColor(0xfb, 0xe3, 0xc4));     // just moved to the host tier
        case KvTreeChange::ToCompute: return QBrush(QColor(0xd4, 0xe6, 0xf8));  // just brought back
        case KvTreeChange::None: return {};
      }
      return {};
    case Qt::DisplayRole:
      switch (col) {
        case Text: {
          QString t = oneLine(n.text);
          if (t.size() > kShownTextChars) t = t.left(kShownTextChars) + QChar(0x2026);
          return t;
        }
        case Tokens: return static_cast<qlonglong>(n.tokens.size());
        case SubtreeTokens: return static_cast<qlonglong>(r.subtreeTokens);
        case Tier: return n.hostTier ? tr("host") : tr("compute");
        case Locks: return n.locks;
        case Hits: return static_cast<qlonglong>(n.hits);
        case Priority: return QString::number(n.priority, 'g', 4);
        default: return {};
      }
    case Qt::ToolTipRole:
      return tr("node %1, %2 tokens (%3 from the root), %4 tier, %5 locks, %6 hits, priority %7\n\n%8")
          .arg(n.id)
          .arg(n.tokens.size())
          .arg(n.depthTokens)
          .arg(n.hostTier ? tr("host") : tr("compute"))
          .arg(n.locks)
          .arg(n.hits)
          .arg(n.priority, 0, 'g', 6)
          .arg(QString::fromUtf8(n.text.data(), static_cast<qsizetype>(n.text.size())));
    case Qt::ForegroundRole:
      if (n.hostTier) return QBrush(QColor(0xb0, 0x5a, 0x00));  // evicted to the host tier
      return {};
    case Qt::FontRole:
      if (n.locks > 0) {  // in use by a live sequence
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
    case Qt::TextAlignmentRole:
      return col == Text || col == Tier ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    default: return {};
  }
}

QVariant KvTreeModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Text: return tr("Tokens as text");
    case Tokens: return tr("Tokens");
    case SubtreeTokens: return tr("Subtree");
    case Tier: return tr("Tier");
    case Locks: return tr("Locks");
    case Hits: return tr("Hits");
    case Priority: return tr("Priority");
    default: return {};
  }
}

}  // namespace ragwb
