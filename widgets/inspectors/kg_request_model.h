// What the knowledge nodes of finished requests used, as a tree: one row per request (its
// question, kept and pruned path counts), under it one row per entity linked (how: an n-gram of
// the question or a retrieved passage; its score; whether it was expanded), and under each
// expanded entity one row per path of its subgraph, kept or pruned, with its score.
//
//   KgRequestModel requests;
//   connect(&bridge, &EngineBridge::requestFinished, &requests, &KgRequestModel::addRecord);
//   const rag::KgSubgraphUse* g = requests.subgraphAt(view->currentIndex());   // link or path rows
//
// Only requests with a knowledge stage are kept (the newest `capacity`). A GUI-thread object.
#pragma once

#include <QAbstractItemModel>
#include <deque>
#include <memory>
#include <vector>

#include "rag/knowledge.h"
#include "rag/run_store.h"

namespace ragwb {

class KgRequestModel : public QAbstractItemModel {
  Q_OBJECT
public:
  enum Column { Item, How, Score, State, Paths, ColumnCount };
  enum class RowKind : int { Request, Link, Path };
  enum Role { KindRole = Qt::UserRole + 1, RequestIdRole, EntityIdRole, KeptRole, ScoreRole };

  explicit KgRequestModel(QObject* parent = nullptr, int capacity = 500);

  // Adds the request when one of its stages carries a KnowledgeUse; false otherwise.
  bool addRecord(const rag::RequestRecord& record);
  void clear();
  int requestCount() const { return static_cast<int>(m_requests.size()); }
  QModelIndex indexOfRequest(uint32_t requestId) const;

  RowKind kind(const QModelIndex& index) const;
  // The subgraph a link row expanded or a path row belongs to; nullptr for other rows and for
  // links that were not expanded.
  const rag::KgSubgraphUse* subgraphAt(const QModelIndex& index) const;
  const rag::KgPathUse* pathAt(const QModelIndex& index) const;  // path rows
  const rag::KgLink* linkAt(const QModelIndex& index) const;     // link and path rows

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
  struct LinkRow {
    const rag::KgLink* link = nullptr;
    const rag::KgSubgraphUse* subgraph = nullptr;  // null: linked but not expanded
  };
  struct Req {
    uint64_t serial = 0;  // stable across removals of older requests (child indexes carry it)
    uint32_t id = 0;
    QString question;
    std::vector<std::shared_ptr<const rag::KnowledgeUse>> uses;  // owns what the rows point into
    std::vector<LinkRow> links;
    int64_t kept = 0, pruned = 0;
  };
  const Req* requestOf(const QModelIndex& index) const;  // the request a row is in
  const LinkRow* linkRowAt(const QModelIndex& index) const;

  std::deque<Req> m_requests;  // oldest first
  int m_capacity;
  uint64_t m_nextSerial = 0;
  const Req* bySerial(quintptr serial) const;
};

// "dog —hypernym→ canine —hypernym→ carnivore"
QString kgPathText(const rag::KgPathUse& p);

}  // namespace ragwb
