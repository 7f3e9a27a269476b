// The RAGraph editor's palette: the node kinds and edge condition kinds, as a list model whose
// rows drag onto the canvas (a node kind adds a node, a condition kind sets an edge's condition).
#pragma once

#include <QAbstractListModel>
#include <array>
#include <optional>

#include "rag/workflow.h"

namespace ragwb {

// MIME types of palette drags; the payload is the kind's name as the engine writes it
// ("generation", "non_empty").
inline constexpr const char* kNodeKindMime = "application/x-ragraph-node-kind";
inline constexpr const char* kConditionMime = "application/x-ragraph-edge-condition";

inline constexpr std::array<rag::ConditionKind, 5> kConditionKinds = {
    rag::ConditionKind::Always, rag::ConditionKind::Empty, rag::ConditionKind::NonEmpty,
    rag::ConditionKind::Contains, rag::ConditionKind::RunsBelow};

std::optional<rag::NodeKind> nodeKindFromName(const QByteArray& name);
std::optional<rag::ConditionKind> conditionKindFromName(const QByteArray& name);

class PaletteModel : public QAbstractListModel {
  Q_OBJECT
public:
  // Qt::UserRole: the MIME type of the row's drag; KindNameRole: its payload.
  enum Role { MimeTypeRole = Qt::UserRole, KindNameRole };

  explicit PaletteModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  QStringList mimeTypes() const override;
  QMimeData* mimeData(const QModelIndexList& indexes) const override;
  Qt::DropActions supportedDragActions() const override { return Qt::CopyAction; }
};

}  // namespace ragwb
