// The RAGraph editor: palette | canvas (with the list of problems under it) | property panel,
// a templates combo with the built-in workflows and their compiled-in variants, and the actions a main window puts in its
// menus and tool bars. The editor only describes a workflow: Run hands the graph to whoever
// listens to runRequested (the main window submits it to the engine off the GUI thread).
//
//   auto* editor = new ragwb::GraphEditor;
//   editMenu->addAction(editor->undoAction());
//   fileMenu->addActions({editor->openAction(), editor->saveAction(), editor->saveAsAction()});
//   connect(editor, &ragwb::GraphEditor::runRequested, this, &MainWindow::submitWorkflow);
//   editor->loadTemplate(rag::Workflow::Multistep);
#pragma once

#include <QWidget>

#include "nodegraph/graph_model.h"

class QAction;
class QComboBox;
class QGraphicsView;
class QLabel;
class QListView;

namespace ragwb {

class GraphScene;
class IssueListModel;
class PaletteModel;
class PropertyPanel;

class GraphEditor : public QWidget {
  Q_OBJECT
public:
  explicit GraphEditor(QWidget* parent = nullptr);

  GraphModel* model() const { return m_model; }
  GraphScene* scene() const { return m_scene; }
  QGraphicsView* view() const { return m_view; }
  PropertyPanel* propertyPanel() const { return m_panel; }
  PaletteModel* paletteModel() const { return m_palette; }
  IssueListModel* issueModel() const { return m_issueModel; }
  QComboBox* templatesBox() const { return m_templates; }

  // Undo/Redo follow the model's stack (their text names the command). Open and Save As ask
  // for a file; Save saves to the current file (or asks). Validate reports the problems and
  // selects the first offending node. Run emits runRequested when the graph is valid.
  QAction* undoAction() const { return m_undoAction; }
  QAction* redoAction() const { return m_redoAction; }
  QAction* openAction() const { return m_openAction; }
  QAction* saveAction() const { return m_saveAction; }
  QAction* saveAsAction() const { return m_saveAsAction; }
  QAction* validateAction() const { return m_validateAction; }
  QAction* runAction() const { return m_runAction; }

  // The file the document was opened from or saved to; empty for a template or a new graph.
  const QString& filePath() const { return m_path; }
  // Opens a workflow file. On failure a (window-modal) message box says why and the current
  // document stays as it was.
  rag::Status openFile(const QString& path);
  rag::Status saveFile(const QString& path);
  void loadTemplate(rag::Workflow workflow);
  // A built-in's or a variant's compiled-in file by name ("irg-bridge"); an unknown name shows
  // the error in the status line and keeps the document.
  void loadTemplate(std::string_view name);
  // Refits the canvas to the graph.
  void fitGraph();
  // True when the graph is valid; otherwise shows the problems and selects the first node or
  // edge one names.
  bool validate();

Q_SIGNALS:
  void runRequested(const rag::WorkflowGraph& graph);
  void filePathChanged(const QString& path);
  void statusMessage(const QString& message);

private:
  void buildActions();
  QWidget* buildPalette();
  void onSelectionChanged();
  void onIssueActivated(const QModelIndex& index);
  void showStatus(const QString& message, bool error);
  void setFilePath(const QString& path);
  // Asks before a load throws away unsaved edits; true to go on.
  bool confirmDiscard();
  void open();
  bool save();
  bool saveAs();
  void run();

  GraphModel* m_model;
  GraphScene* m_scene;
  QGraphicsView* m_view;
  PropertyPanel* m_panel;
  PaletteModel* m_palette;
  IssueListModel* m_issueModel;
  QListView* m_issueList;
  QLabel* m_issueTitle;
  QComboBox* m_templates;
  QLabel* m_status;
  QString m_path;
  QAction* m_undoAction;
  QAction* m_redoAction;
  QAction* m_openAction;
  QAction* m_saveAction;
  QAction* m_saveAsAction;
  QAction* m_validateAction;
  QAction* m_runAction;
};

}  // namespace ragwb
