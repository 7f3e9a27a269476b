#include "inspectors/kg_request_model.h"

#include <QBrush>
#include <QColor>

namespace ragwb {

namespace {

// internalId: 0 for request rows; for link rows 1 << 62 | request serial; for path rows
// 2 << 62 | request serial << 24 | link row. (Row numbers come from the index itself; serials,
// unlike request rows, do not move when the oldest request is dropped.)
constexpr quintptr kLinkTag = quintptr{1} << 62;
constexpr quintptr kPathTag = quintptr{2} << 62;
constexpr quintptr kTagMask = quintptr{3} << 62;
constexpr quintptr kLinkBits = (quintptr{1} << 24) - 1;

QString entityText(const rag::KgEntity& e) {
  return QStringLiteral("%1 · %2").arg(QString::fromStdString(e.name), QString::fromLatin1(rag::kgEntityKindName(e.kind)));
}

}  // namespace

QString kgPathText(const rag::KgPathUse& p) {
  QString s;
  for (size_t i = 0; i < p.entities.size(); ++i) {
    if (i > 0) s += QStringLiteral(" —%1→ ").arg(i - 1 < p.relations.size() ? QString::fromStdString(p.relations[i - 1]) : QString());
    s += QString::fromStdString(p.entities[i].name);
  }
  return s;
}

KgRequestModel::KgRequestModel(QObject* parent, int capacity) : QAbstractItemModel(parent), m_capacity(std::max(1, capacity)) {}

bool KgRequestModel::addRecord(const rag::RequestRecord& record) {
  Req r;
  r.serial = m_nextSerial;
  r.id = record.requestId;
  r.question = QString::fromStdString(record.question);
  for (const rag::StageTiming& s : record.stages)
    if (s.knowledge) r.uses.push_back(s.knowledge);
  if (r.uses.empty()) return false;
  for (const auto& use : r.uses) {
    for (const rag::KgLink& l : use->links) {
      LinkRow row{&l, nullptr};
      for (const rag::KgSubgraphUse& g : use->subgraphs)
        if (g.root.entity.id == l.entity.id) row.subgraph = &g;
      r.links.push_back(row);
    }
    r.kept += use->keptPaths();
    r.pruned += use->prunedPaths();
  }
  if (static_cast<int>(m_requests.size()) >= m_capacity) {
    beginRemoveRows({}, 0, 0);
    m_requests.pop_front();
    endRemoveRows();
  }
  ++m_nextSerial;
  const int row = static_cast<int>(m_requests.size());
  beginInsertRows({}, row, row);
  m_requests.push_back(std::move(r));
  endInsertRows();
  return true;
}

void KgRequestModel::clear() {
  beginResetModel();
  m_requests.clear();
  endResetModel();  // serials go on counting: old indexes never find a new request
}

QModelIndex KgRequestModel::indexOfRequest(uint32_t requestId) const {
  for (size_t i = m_requests.size(); i-- > 0;)
    if (m_requests[i].id == requestId) return index(static_cast<int>(i), 0);
  return {};
}

KgRequestModel::RowKind KgRequestModel::kind(const QModelIndex& index) const {
  const quintptr tag = index.internalId() & kTagMask;
  return tag == 0 ? RowKind::Request : tag == kLinkTag ? RowKind::Link : RowKind::Path;
}

const KgRequestModel::Req* KgRequestModel::requestOf(const QModelIndex& index) const {
  if (!index.isValid()) return nullptr;
  const quintptr id = index.internalId();
  switch (kind(index)) {
    case RowKind::Request:
      return static_cast<size_t>(index.row()) < m_requests.size() ? &m_requests[static_cast<size_t>(index.row())] : nullptr;
    case RowKind::Link: return bySerial(id & ~kTagMask);
    case RowKind::Path: return bySerial((id & ~kTagMask) >> 24);
  }
  return nullptr;
}

const KgRequestModel::Req* KgRequestModel::bySerial(quintptr serial) const {
  if (m_requests.empty() || serial < m_requests.front().serial) return nullptr;
  const auto row = static_cast<size_t>(serial - m_requests.front().serial);
  return row < m_requests.size() ? &m_requests[row] : nullptr;
}

// The request's link a link row is, or a path row is under.
const KgRequestModel::LinkRow* KgRequestModel::linkRowAt(const QModelIndex& index) const {
  const Req* r = requestOf(index);
  if (!r) return nullptr;
  size_t link = 0;
  if (kind(index) == RowKind::Link) link = static_cast<size_t>(index.row());
  else if (kind(index) == RowKind::Path) link = static_cast<size_t>(index.internalId() & kLinkBits);
  else return nullptr;
  return link < r->links.size() ? &r->links[link] : nullptr;
}

const rag::KgLink* KgRequestModel::linkAt(const QModelIndex& index) const {
  const LinkRow* row = linkRowAt(index);
  return row ? row->link : nullptr;
}

const rag::KgSubgraphUse* KgRequestModel::subgraphAt(const QModelIndex& index) const {
  const LinkRow* row = linkRowAt(index);
  return row ? row->subgraph : nullptr;
}

const rag::KgPathUse* KgRequestModel::pathAt(const QModelIndex& index) const {
  if (kind(index) != RowKind::Path) return nullptr;
  const rag::KgSubgraphUse* g = subgraphAt(index);
  return g && static_cast<size_t>(index.row()) < g->paths.size() ? &g->paths[static_cast<size_t>(index.row())] : nullptr;
}

QModelIndex KgRequestModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= ColumnCount || row >= rowCount(parent)) return {};
  if (!parent.isValid()) return createIndex(row, column, quintptr{0});
  if (kind(parent) == RowKind::Request) {
    const Req* r = requestOf(parent);
    return createIndex(row, column, kLinkTag | static_cast<quintptr>(r->serial));
  }
  if (kind(parent) == RowKind::Link) {
    const quintptr req = parent.internalId() & ~kTagMask;
    return createIndex(row, column, kPathTag | (req << 24) | static_cast<quintptr>(parent.row()));
  }
  return {};
}

QModelIndex KgRequestModel::parent(const QModelIndex& child) const {
  if (!child.isValid()) return {};
  const quintptr id = child.internalId();
  switch (kind(child)) {
    case RowKind::Request: return {};
    case RowKind::Link: {
      const Req* r = bySerial(id & ~kTagMask);
      if (!r) return {};
      return createIndex(static_cast<int>(r->serial - m_requests.front().serial), 0, quintptr{0});
    }
    case RowKind::Path: {
      const quintptr req = (id & ~kTagMask) >> 24;
      if (!bySerial(req)) return {};
      return createIndex(static_cast<int>(id & kLinkBits), 0, kLinkTag | req);
    }
  }
  return {};
}

int KgRequestModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return static_cast<int>(m_requests.size());
  if (parent.column() != 0) return 0;
  switch (kind(parent)) {
    case RowKind::Request: {
      const Req* r = requestOf(parent);
      return r ? static_cast<int>(r->links.size()) : 0;
    }
    case RowKind::Link: {
      const rag::KgSubgraphUse* g = subgraphAt(parent);
      return g ? static_cast<int>(g->paths.size()) : 0;
    }
    case RowKind::Path: return 0;
  }
  return 0;
}

int KgRequestModel::columnCount(const QModelIndex&) const { return ColumnCount; }

QVariant KgRequestModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid()) return {};
  const Req* r = requestOf(index);
  if (!r) return {};
  const RowKind k = kind(index);
  if (role == KindRole) return static_cast<int>(k);
  if (role == RequestIdRole) return r->id;
  if (k == RowKind::Request) {
    if (role == Qt::DisplayRole) {
      switch (index.column()) {
        case Item: return QStringLiteral("#%1 %2").arg(r->id).arg(r->question);
        case How: return tr("%n entities linked", nullptr, static_cast<int>(r->links.size()));
        case Paths: return tr("%1 kept / %2 pruned").arg(r->kept).arg(r->pruned);
      }
    }
    if (role == Qt::ToolTipRole) return r->question;
    return {};
  }
  const rag::KgLink* link = linkAt(index);
  if (!link) return {};
  if (k == RowKind::Link) {
    const rag::KgSubgraphUse* g = subgraphAt(index);
    switch (role) {
      case Qt::DisplayRole:
        switch (index.column()) {
          case Item: return entityText(link->entity);
          case How:
            return link->source == rag::KgLinkSource::Name ? tr("name “%1”").arg(QString::fromStdString(link->matched))
                                                           : tr("passage %1").arg(QString::fromStdString(link->matched));
          case Score: return QString::number(link->score, 'f', 3);
          case State: return link->chosen ? tr("expanded") : tr("candidate");
          case Paths: {
            if (!g) return {};
            int64_t kept = 0;
            for (const rag::KgPathUse& p : g->paths) kept += p.kept;
            return tr("%1 kept / %2 pruned").arg(kept).arg(static_cast<int64_t>(g->paths.size()) - kept);
          }
        }
        return {};
      case Qt::ForegroundRole: return link->chosen ? QVariant() : QBrush(QColor(0x80, 0x80, 0x80));
      case EntityIdRole: return link->entity.id;
      case ScoreRole: return link->score;
    }
    return {};
  }
  const rag::KgPathUse* p = pathAt(index);
  if (!p) return {};
  switch (role) {
    case Qt::DisplayRole:
      switch (index.column()) {
        case Item: return kgPathText(*p);
        case How: return tr("%n hops", nullptr, static_cast<int>(p->relations.size()));
        case Score: return QString::number(p->score, 'f', 3);
        case State: return p->kept ? tr("kept") : tr("pruned");
      }
      return {};
    case Qt::ToolTipRole:
      return tr("%1\nscore %2 (cosine with the question) · %3")
          .arg(kgPathText(*p))
          .arg(p->score, 0, 'f', 3)
          .arg(p->kept ? tr("kept: in the prompt") : tr("pruned: outside the top K"));
    case Qt::ForegroundRole: return p->kept ? QVariant() : QBrush(QColor(0x90, 0x90, 0x90));
    case EntityIdRole: return p->entities.empty() ? 0 : p->entities.back().id;
    case KeptRole: return p->kept;
    case ScoreRole: return p->score;
  }
  return {};
}

QVariant KgRequestModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Item: return tr("Request / entity / path");
    case How: return tr("Linked by");
    case Score: return tr("Score");
    case State: return tr("State");
    case Paths: return tr("Paths");
  }
  return {};
}

}  // namespace ragwb
