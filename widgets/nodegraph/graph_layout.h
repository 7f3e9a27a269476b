// Where a workflow's nodes go on the canvas when nobody has placed them: a layered layout,
// top to bottom, and the "<file>.layout.json" sidecar that keeps positions a user chose.
#pragma once

#include <QHash>
#include <QPointF>
#include <QString>
#include <filesystem>

#include "rag/status.h"
#include "rag/workflow.h"

namespace ragwb {

// Vertical distance between layers and horizontal distance between nodes of one layer.
inline constexpr double kLayerSpacing = 130.0;
inline constexpr double kColumnSpacing = 240.0;

// Centres for START, every node and END. START is layer 0; edges that close a loop (found by a
// depth-first walk from START in edge order) are set aside, and every other edge points at a
// later layer (longest path), so a chain reads top to bottom and loops run back up; END is below
// every node. Nodes of one layer sit side by side, centred, in graph order.
QHash<QString, QPointF> layeredLayout(const rag::WorkflowGraph& graph);

// "<workflow file>.layout.json".
std::filesystem::path layoutPathFor(const std::filesystem::path& workflowPath);
// The positions in a sidecar: {"format": "ragraph-layout", "version": 1,
// "positions": {"<id>": [x, y], ...}}. NotFound when there is none, Corrupt when unreadable.
rag::Result<QHash<QString, QPointF>> readLayout(const std::filesystem::path& layoutPath);
rag::Status writeLayout(const std::filesystem::path& layoutPath,
                        const QHash<QString, QPointF>& positions);

}  // namespace ragwb
