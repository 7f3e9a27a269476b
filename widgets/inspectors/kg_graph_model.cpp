#include "inspectors/kg_graph_model.h"

#include <QFont>
#include <algorithm>

namespace ragwb {

namespace {

std::string edgeKey(const rag::KgRelationEdge& e) {
  return std::to_string(e.src) + ' ' + e.relation + ' ' + std::to_string(e.dst);
}

}  // namespace

// ---- KgGraphModel ------------------------------------------------------------------------------

KgGraphModel::KgGraphModel(QObject* parent) : QAbstractTableModel(parent) {}

void KgGraphModel::clear() {
  beginResetModel();
  startGraph(0, 0, false);
  endResetModel();
  Q_EMIT graphChanged();
}

void KgGraphModel::startGraph(int32_t centre, int64_t cutEdges, bool fromRequest) {
  m_entities.clear();
  m_row.clear();
  m_edges.clear();
  m_edgeIndex.clear();
  m_expanded.clear();
  m_centre = centre;
  m_cutEdges = cutEdges;
  m_fromRequest = fromRequest;
}

void KgGraphModel::addEntity(const rag::KgEntity& e) {
  if (m_row.emplace(e.id, static_cast<int>(m_entities.size())).second) m_entities.push_back(e);
}

void KgGraphModel::addEdge(const KgViewEdge& e) {
  const std::string key = edgeKey(e.edge);
  auto it = m_edgeIndex.find(key);
  if (it == m_edgeIndex.end()) {
    m_edgeIndex.emplace(key, m_edges.size());
    m_edges.push_back(e);
    return;
  }
  KgViewEdge& have = m_edges[it->second];  // a kept path through an edge outranks pruned ones
  if (e.use == KgEdgeUse::Kept && have.use != KgEdgeUse::Kept) have.use = KgEdgeUse::Kept;
  have.score = std::max(have.score, e.score);
}

void KgGraphModel::showNeighbourhood(const rag::KgNeighbourhood& n) {
  beginResetModel();
  startGraph(n.centre.id, n.cutEdges, false);
  for (const rag::KgEntity& e : n.entities) addEntity(e);
  for (const rag::KgRelationEdge& e : n.edges) addEdge({e, KgEdgeUse::Plain, 0});
  m_expanded.insert(n.centre.id);
  endResetModel();
  Q_EMIT graphChanged();
}

bool KgGraphModel::expand(const rag::KgNeighbourhood& n) {
  if (!contains(n.centre.id)) return false;
  std::vector<rag::KgEntity> fresh;
  for (const rag::KgEntity& e : n.entities)
    if (!contains(e.id) && std::none_of(fresh.begin(), fresh.end(), [&](const rag::KgEntity& f) { return f.id == e.id; }))
      fresh.push_back(e);
  if (!fresh.empty()) {
    const int first = static_cast<int>(m_entities.size());
    beginInsertRows({}, first, first + static_cast<int>(fresh.size()) - 1);
    for (rag::KgEntity& e : fresh) {
      m_row.emplace(e.id, static_cast<int>(m_entities.size()));
      m_entities.push_back(std::move(e));
    }
    endInsertRows();
  }
  for (const rag::KgRelationEdge& e : n.edges) addEdge({e, KgEdgeUse::Plain, 0});
  m_expanded.insert(n.centre.id);
  m_cutEdges += n.cutEdges;
  if (!m_entities.empty())  // edge counts and states of rows already there
    Q_EMIT dataChanged(index(0, 0), index(static_cast<int>(m_entities.size()) - 1, ColumnCount - 1));
  Q_EMIT graphChanged();
  return true;
}

void KgGraphModel::showSubgraph(const rag::KgSubgraphUse& g) {
  beginResetModel();
  startGraph(g.root.entity.id, g.cutEdges, true);
  addEntity(g.root.entity);
  for (const rag::KgPathUse& p : g.paths) {
    for (const rag::KgEntity& e : p.entities) addEntity(e);
    for (size_t i = 0; i < p.relations.size() && i + 1 < p.entities.size(); ++i)
      addEdge({{p.entities[i].id, p.entities[i + 1].id, p.relations[i]},
               p.kept ? KgEdgeUse::Kept : KgEdgeUse::Pruned,
               p.score});
  }
  endResetModel();
  Q_EMIT graphChanged();
}

int KgGraphModel::rowOf(int32_t id) const {
  auto it = m_row.find(id);
  return it == m_row.end() ? -1 : it->second;
}

const rag::KgEntity* KgGraphModel::entity(int32_t id) const {
  const int r = rowOf(id);
  return r < 0 ? nullptr : &m_entities[static_cast<size_t>(r)];
}

std::map<std::string, int> KgGraphModel::relationCounts() const {
  std::map<std::string, int> counts;
  for (const KgViewEdge& e : m_edges) ++counts[e.edge.relation];
  return counts;
}

int KgGraphModel::degree(int32_t id) const {
  return static_cast<int>(std::count_if(m_edges.begin(), m_edges.end(), [&](const KgViewEdge& e) {
    return e.edge.src == id || e.edge.dst == id;
  }));
}

int KgGraphModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_entities.size());
}

int KgGraphModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant KgGraphModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const rag::KgEntity& e = m_entities[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      switch (index.column()) {
        case Name: return QString::fromStdString(e.name);
        case Kind: return QString::fromLatin1(rag::kgEntityKindName(e.kind));
        case Id: return e.id;
        case Edges: return degree(e.id);
        case State:
          return e.id == m_centre ? tr("centre") : m_expanded.contains(e.id) ? tr("expanded") : QString();
      }
      return {};
    case Qt::FontRole:
      if (e.id == m_centre) {
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
    case EntityIdRole: return e.id;
    case ExpandedRole: return m_expanded.contains(e.id);
    case CentreRole: return e.id == m_centre;
  }
  return {};
}

QVariant KgGraphModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Name: return tr("Entity");
    case Kind: return tr("Kind");
    case Id: return tr("Id");
    case Edges: return tr("Edges");
    case State: return tr("State");
  }
  return {};
}

// ---- KgRelationModel ---------------------------------------------------------------------------

KgRelationModel::KgRelationModel(QObject* parent) : QAbstractListModel(parent) {}

void KgRelationModel::setCounts(const std::map<std::string, int>& counts) {
  beginResetModel();
  m_rows.assign(counts.begin(), counts.end());
  std::stable_sort(m_rows.begin(), m_rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  endResetModel();
}

void KgRelationModel::setShown(const std::string& relation, bool shown) {
  const QString r = QString::fromStdString(relation);
  if (shown == !m_hidden.contains(r)) return;
  if (shown) m_hidden.remove(r);
  else m_hidden.insert(r);
  for (size_t i = 0; i < m_rows.size(); ++i)
    if (m_rows[i].first == relation) Q_EMIT dataChanged(index(static_cast<int>(i)), index(static_cast<int>(i)), {Qt::CheckStateRole});
  Q_EMIT filterChanged();
}

void KgRelationModel::showAll() {
  if (m_hidden.isEmpty()) return;
  m_hidden.clear();
  if (!m_rows.empty()) Q_EMIT dataChanged(index(0), index(static_cast<int>(m_rows.size()) - 1), {Qt::CheckStateRole});
  Q_EMIT filterChanged();
}

QColor KgRelationModel::colour(const std::string& relation) {
  static const std::unordered_map<std::string, QColor> fixed = {
      {"hypernym", QColor(0x1f, 0x77, 0xb4)},         {"hyponym", QColor(0x6b, 0xae, 0xd6)},
      {"instance_hypernym", QColor(0x17, 0xbe, 0xcf)}, {"instance_hyponym", QColor(0x9e, 0xda, 0xe5)},
      {"part_holonym", QColor(0x2c, 0xa0, 0x2c)},      {"part_meronym", QColor(0x98, 0xdf, 0x8a)},
      {"member_holonym", QColor(0x8c, 0x56, 0x4b)},    {"member_meronym", QColor(0xc4, 0x9c, 0x94)},
      {"substance_holonym", QColor(0x7f, 0x7f, 0x00)}, {"substance_meronym", QColor(0xbc, 0xbd, 0x22)},
      {"lemma_of", QColor(0x7f, 0x7f, 0x7f)},          {"derivation", QColor(0x94, 0x67, 0xbd)},
      {"xref", QColor(0xff, 0x7f, 0x0e)},              {"antonym", QColor(0xd6, 0x27, 0x28)},
      {"similar_to", QColor(0xe3, 0x77, 0xc2)},        {"also_see", QColor(0xf7, 0xb6, 0xd2)},
  };
  auto it = fixed.find(relation);
  if (it != fixed.end()) return it->second;
  uint32_t h = 2166136261u;  // FNV-1a: the same hue in every run
  for (unsigned char c : relation) h = (h ^ c) * 16777619u;
  return QColor::fromHsv(static_cast<int>(h % 360), 160, 190);
}

int KgRelationModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

QVariant KgRelationModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const auto& [name, count] = m_rows[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole: return QStringLiteral("%1 (%2)").arg(QString::fromStdString(name)).arg(count);
    case Qt::DecorationRole:
    case ColourRole: return colour(name);
    case Qt::CheckStateRole: return static_cast<int>(isShown(name) ? Qt::Checked : Qt::Unchecked);
    case RelationRole: return QString::fromStdString(name);
    case CountRole: return count;
  }
  return {};
}

bool KgRelationModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (!index.isValid() || index.row() >= rowCount() || role != Qt::CheckStateRole) return false;
  setShown(m_rows[static_cast<size_t>(index.row())].first, value.toInt() == Qt::Checked);
  return true;
}

Qt::ItemFlags KgRelationModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable | Qt::ItemNeverHasChildren;
}

}  // namespace ragwb
