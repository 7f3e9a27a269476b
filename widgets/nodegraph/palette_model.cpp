#include "nodegraph/palette_model.h"

#include <QColor>
#include <QMimeData>

#include "nodegraph/node_item.h"

namespace ragwb {

namespace {

QByteArray bytes(std::string_view s) { return QByteArray(s.data(), qsizetype(s.size())); }

template <typename Kind, size_t N>
std::optional<Kind> fromName(const QByteArray& name, const std::array<Kind, N>& kinds,
                             std::string_view (*nameOf)(Kind)) {
  for (Kind k : kinds)
    if (name == bytes(nameOf(k))) return k;
  return std::nullopt;
}

struct Entry {
  const char* mime;
  QByteArray kind;
  QString label;
  QString help;
  QColor color;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = [] {
    const QColor condition(0x60, 0x64, 0x70);
    auto cond = [&](rag::ConditionKind k, const QString& label, const QString& help) {
      return Entry{kConditionMime, bytes(rag::conditionKindName(k)), label, help, condition};
    };
    return std::vector<Entry>{
        {kNodeKindMime, bytes(rag::nodeKindName(rag::NodeKind::Generation)),
         PaletteModel::tr("Generation"),
         PaletteModel::tr("Drop on the canvas: a node that renders a prompt template and "
                          "generates text into its output variable"),
         NodeItem::kindColor(rag::NodeKind::Generation)},
        {kNodeKindMime, bytes(rag::nodeKindName(rag::NodeKind::Retrieval)),
         PaletteModel::tr("Retrieval"),
         PaletteModel::tr("Drop on the canvas: a node that searches the corpus with its query "
                          "variable and stores the top-k passages"),
         NodeItem::kindColor(rag::NodeKind::Retrieval)},
        {kNodeKindMime, bytes(rag::nodeKindName(rag::NodeKind::Knowledge)),
         PaletteModel::tr("Knowledge graph"),
         PaletteModel::tr("Drop on the canvas: a knowledge-graph retrieval node that links the "
                          "entities of its query, takes each one's subgraph and keeps its paths "
                          "most similar to the query (GraphRAG, DepCache)"),
         NodeItem::kindColor(rag::NodeKind::Knowledge)},
        {kNodeKindMime, bytes(rag::nodeKindName(rag::NodeKind::Compression)),
         PaletteModel::tr("Compression"),
         PaletteModel::tr("Drop on the canvas: RECOMP's extractive compressor, which keeps the sentences "
                          "of a passages variable that best match its query as a short summary"),
         NodeItem::kindColor(rag::NodeKind::Compression)},
        cond(rag::ConditionKind::Always, PaletteModel::tr("always"),
             PaletteModel::tr("Drop on an edge: taken unconditionally")),
        cond(rag::ConditionKind::Empty, PaletteModel::tr("if empty"),
             PaletteModel::tr("Drop on an edge: taken when a variable is unset or blank")),
        cond(rag::ConditionKind::NonEmpty, PaletteModel::tr("if not empty"),
             PaletteModel::tr("Drop on an edge: taken when a variable has text")),
        cond(rag::ConditionKind::Contains, PaletteModel::tr("if contains"),
             PaletteModel::tr("Drop on an edge: taken when a variable contains a text")),
        cond(rag::ConditionKind::RunsBelow, PaletteModel::tr("while runs below"),
             PaletteModel::tr("Drop on an edge: taken while a node has run fewer than N times")),
    };
  }();
  return all;
}

}  // namespace

std::optional<rag::NodeKind> nodeKindFromName(const QByteArray& name) {
  return fromName(name, rag::kAllNodeKinds, &rag::nodeKindName);
}

std::optional<rag::ConditionKind> conditionKindFromName(const QByteArray& name) {
  return fromName(name, kConditionKinds, &rag::conditionKindName);
}

PaletteModel::PaletteModel(QObject* parent) : QAbstractListModel(parent) {}

int PaletteModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(entries().size());
}

QVariant PaletteModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const Entry& e = entries()[size_t(index.row())];
  switch (role) {
    case Qt::DisplayRole: return e.label;
    case Qt::ToolTipRole: return e.help;
    case Qt::DecorationRole: return e.color;
    case MimeTypeRole: return QString::fromLatin1(e.mime);
    case KindNameRole: return QString::fromLatin1(e.kind);
    default: return {};
  }
}

Qt::ItemFlags PaletteModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsDragEnabled |
         Qt::ItemNeverHasChildren;
}

QStringList PaletteModel::mimeTypes() const {
  return {QString::fromLatin1(kNodeKindMime), QString::fromLatin1(kConditionMime)};
}

QMimeData* PaletteModel::mimeData(const QModelIndexList& indexes) const {
  if (indexes.isEmpty() || !indexes.front().isValid()) return nullptr;
  const Entry& e = entries()[size_t(indexes.front().row())];
  auto* mime = new QMimeData;
  mime->setData(QString::fromLatin1(e.mime), e.kind);
  mime->setText(e.label);
  return mime;
}

}  // namespace ragwb
