// The knowledge-graph inspector's data half: the graph in view (entities and typed edges) as a
// table model, one row per entity, and the relation types in view as a checkable list with one
// colour each (the filter). The graph comes from an entity's neighbourhood (expanded node by
// node) or from the subgraph a request's knowledge node used, whose edges are marked kept or
// pruned with the best score of a path through them. The scene (kg_graph_view.h) mirrors it.
//
//   KgGraphModel graph;  KgRelationModel relations;
//   graph.showNeighbourhood(*explorer->neighbourhood(id, {}));   // a reset; graphChanged()
//   graph.expand(*explorer->neighbourhood(other, {}));           // rows appended; graphChanged()
//   relations.setCounts(graph.relationCounts());                 // keeps the user's check marks
//   if (relations.isShown("hypernym")) ...
//
// GUI-thread objects.
#pragma once

#include <QAbstractListModel>
#include <QAbstractTableModel>
#include <QColor>
#include <QHash>
#include <QSet>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "rag/knowledge.h"

namespace ragwb {

// How a request used an edge: not at all (an explored neighbourhood), on a kept path, or only
// on pruned paths.
enum class KgEdgeUse : int { Plain, Kept, Pruned };

struct KgViewEdge {
  rag::KgRelationEdge edge;
  KgEdgeUse use = KgEdgeUse::Plain;
  double score = 0;  // Kept / Pruned: the best score of a path through it
};

class KgGraphModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Name, Kind, Id, Edges, State, ColumnCount };
  enum Role { EntityIdRole = Qt::UserRole + 1, ExpandedRole, CentreRole };

  explicit KgGraphModel(QObject* parent = nullptr);

  void clear();
  // The entity and its neighbourhood, alone (a model reset); the centre counts as expanded.
  void showNeighbourhood(const rag::KgNeighbourhood& n);
  // Adds the neighbourhood's new entities (rows appended) and edges; marks its centre expanded.
  // False (nothing changes) when its centre is not in view.
  bool expand(const rag::KgNeighbourhood& n);
  // The entities and edges of every path of a request's subgraph (a model reset); its root is
  // the centre and nothing is expanded.
  void showSubgraph(const rag::KgSubgraphUse& g);

  const std::vector<rag::KgEntity>& entities() const { return m_entities; }
  const std::vector<KgViewEdge>& edges() const { return m_edges; }
  int32_t centre() const { return m_centre; }
  bool contains(int32_t id) const { return m_row.count(id) != 0; }
  bool isExpanded(int32_t id) const { return m_expanded.contains(id); }
  int rowOf(int32_t id) const;  // -1 when absent
  const rag::KgEntity* entity(int32_t id) const;
  int64_t cutEdges() const { return m_cutEdges; }  // edges left out by the edge limit so far
  bool fromRequest() const { return m_fromRequest; }
  // Edges per relation type.
  std::map<std::string, int> relationCounts() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

Q_SIGNALS:
  // Entities or edges changed: the view lays the graph out again.
  void graphChanged();

private:
  void addEdge(const KgViewEdge& e);
  int degree(int32_t id) const;

  // Empties the graph and sets what the next one is of (inside a model reset).
  void startGraph(int32_t centre, int64_t cutEdges, bool fromRequest);
  void addEntity(const rag::KgEntity& e);  // once per id, in the order first seen

  std::vector<rag::KgEntity> m_entities;
  std::unordered_map<int32_t, int> m_row;  // entity id -> row
  std::vector<KgViewEdge> m_edges;
  std::unordered_map<std::string, size_t> m_edgeIndex;  // "src relation dst" -> index into m_edges
  QSet<int32_t> m_expanded;
  int32_t m_centre = 0;
  int64_t m_cutEdges = 0;
  bool m_fromRequest = false;
};

// Relation types with their edge counts, colours and check marks (unchecked: hidden).
class KgRelationModel : public QAbstractListModel {
  Q_OBJECT
public:
  enum Role { RelationRole = Qt::UserRole + 1, CountRole, ColourRole };
  explicit KgRelationModel(QObject* parent = nullptr);

  // The relation types in view (a model reset); a type the user hid stays hidden.
  void setCounts(const std::map<std::string, int>& counts);
  bool isShown(const std::string& relation) const { return !m_hidden.contains(QString::fromStdString(relation)); }
  void setShown(const std::string& relation, bool shown);
  void showAll();
  // A relation's colour: fixed for the common WordNet and FOLDOC types, a stable hue otherwise.
  static QColor colour(const std::string& relation);
  const QSet<QString>& hidden() const { return m_hidden; }

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

Q_SIGNALS:
  void filterChanged();

private:
  std::vector<std::pair<std::string, int>> m_rows;
  QSet<QString> m_hidden;
};

}  // namespace ragwb
