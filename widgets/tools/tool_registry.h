// The main window's tools: each view lives in a dock that is registered once, by a stable id,
// instead of being hard-coded in the window. The registry creates the dock (its objectName is
// the id, which QMainWindow::saveState/restoreState key the saved layout on), places it (an area,
// or tabbed with / split beside a tool registered earlier) and lists the tools in registration
// order for the View menu. A new inspector is one add() call.
//
//   ragwb::ToolRegistry tools(&window);
//   tools.add("timelineDock", tr("Pipeline timeline"), timeline, ToolPlacement::inArea(Qt::BottomDockWidgetArea));
//   tools.add("heatmapDock", tr("Cluster heatmap"), heatmap, ToolPlacement::besideOf("timelineDock"));
//   tools.add("historyDock", tr("Run history"), history, ToolPlacement::tabbedWith("runDock"));
//   for (QAction* a : tools.toggleActions()) viewMenu->addAction(a);
//   window.restoreState(saved);   // after every tool is registered
//
// A GUI-thread object owned by (and living no longer than) its window.
#pragma once

#include <QList>
#include <QObject>
#include <QString>
#include <cstdint>
#include <utility>
#include <vector>

#include "rag/status.h"

class QAction;
class QDockWidget;
class QMainWindow;
class QWidget;

namespace ragwb {

// Where a new tool's dock goes: an area of the window, or with a tool registered earlier.
struct ToolPlacement {
  enum class Kind : uint8_t { Area, TabbedWith, BesideOf };
  Kind kind = Kind::Area;
  Qt::DockWidgetArea area = Qt::RightDockWidgetArea;  // Kind::Area
  QString other;                                      // the earlier tool's id (the other kinds)

  static ToolPlacement inArea(Qt::DockWidgetArea area) { return {Kind::Area, area, {}}; }
  // Shares the other tool's tab stack.
  static ToolPlacement tabbedWith(QString id) { return {Kind::TabbedWith, {}, std::move(id)}; }
  // Splits the other tool's space, side by side.
  static ToolPlacement besideOf(QString id) { return {Kind::BesideOf, {}, std::move(id)}; }
};

class ToolRegistry : public QObject {
  Q_OBJECT
public:
  explicit ToolRegistry(QMainWindow* window);

  // Creates and places the dock of tool `id` (unique and stable: saved layouts refer to it),
  // titled `title` (also its View menu entry); the dock takes `widget` when this succeeds, and
  // only then. InvalidArgument, naming the tool, for an empty id or title, no widget, an id taken
  // already, or a placement with a tool that was not registered before.
  rag::Result<QDockWidget*> add(const QString& id, const QString& title, QWidget* widget, const ToolPlacement& where);

  QDockWidget* dock(const QString& id) const;  // nullptr for an unknown id
  QStringList ids() const;                     // in registration order
  // Each tool's show/hide action (checked while visible), in registration order.
  QList<QAction*> toggleActions() const;
  // Shows the tool and brings its tab to the front; false for an unknown id.
  bool raise(const QString& id);

Q_SIGNALS:
  void toolAdded(const QString& id);

private:
  QMainWindow* m_window;
  std::vector<std::pair<QString, QDockWidget*>> m_tools;
};

}  // namespace ragwb
