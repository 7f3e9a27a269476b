#include "tools/tool_registry.h"

#include <QAction>
#include <QDockWidget>
#include <QMainWindow>

namespace ragwb {

ToolRegistry::ToolRegistry(QMainWindow* window) : QObject(window), m_window(window) {}

rag::Result<QDockWidget*> ToolRegistry::add(const QString& id, const QString& title, QWidget* widget,
                                             const ToolPlacement& where) {
  auto refuse = [&id](const QString& why) {
    return rag::Status::invalidArgument(QStringLiteral("tool '%1' not added: %2").arg(id, why).toStdString());
  };
  if (id.isEmpty()) return refuse(QStringLiteral("it has no id (saved layouts need one)"));
  if (title.isEmpty()) return refuse(QStringLiteral("it has no title"));
  if (!widget) return refuse(QStringLiteral("it has no widget"));
  if (dock(id)) return refuse(QStringLiteral("another tool has this id"));
  QDockWidget* other = nullptr;
  if (where.kind != ToolPlacement::Kind::Area && !(other = dock(where.other)))
    return refuse(QStringLiteral("it is to go with '%1', which is not registered before it").arg(where.other));

  auto* d = new QDockWidget(title, m_window);
  d->setObjectName(id);
  d->setWidget(widget);
  m_window->addDockWidget(other ? m_window->dockWidgetArea(other) : where.area, d);
  if (where.kind == ToolPlacement::Kind::TabbedWith) m_window->tabifyDockWidget(other, d);
  else if (where.kind == ToolPlacement::Kind::BesideOf) m_window->splitDockWidget(other, d, Qt::Horizontal);
  m_tools.emplace_back(id, d);
  Q_EMIT toolAdded(id);
  return d;
}

QDockWidget* ToolRegistry::dock(const QString& id) const {
  for (const auto& [toolId, d] : m_tools)
    if (toolId == id) return d;
  return nullptr;
}

QStringList ToolRegistry::ids() const {
  QStringList out;
  for (const auto& tool : m_tools) out << tool.first;
  return out;
}

QList<QAction*> ToolRegistry::toggleActions() const {
  QList<QAction*> out;
  for (const auto& tool : m_tools) out << tool.second->toggleViewAction();
  return out;
}

bool ToolRegistry::raise(const QString& id) {
  QDockWidget* d = dock(id);
  if (!d) return false;
  d->show();
  d->raise();
  return true;
}

}  // namespace ragwb
