#include "nodegraph/graph_editor.h"

#include <QAction>
#include <QComboBox>
#include <QFileDialog>
#include <QGraphicsView>
#include <QLabel>
#include <QListView>
#include <QMessageBox>
#include <QSplitter>
#include <QToolBar>
#include <QVBoxLayout>

#include "nodegraph/graph_scene.h"
#include "nodegraph/issue_list_model.h"
#include "nodegraph/palette_model.h"
#include "nodegraph/property_panel.h"
#include "nodegraph/strings.h"

namespace ragwb {

namespace {

QString message(const rag::Status& s) { return QString::fromStdString(s.message()); }

const QString kFileFilter = QStringLiteral("RAGraph workflows (*.json);;All files (*)");

}  // namespace

GraphEditor::GraphEditor(QWidget* parent) : QWidget(parent), m_model(new GraphModel(this)) {
  m_scene = new GraphScene(m_model, this);
  m_view = new QGraphicsView(m_scene);
  m_view->setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
  m_view->setDragMode(QGraphicsView::RubberBandDrag);
  m_view->setAcceptDrops(true);
  m_view->setMinimumSize(360, 300);
  m_panel = new PropertyPanel(m_model);
  m_panel->setMinimumWidth(300);
  m_palette = new PaletteModel(this);
  m_issueModel = new IssueListModel(m_model, this);
  m_issueList = new QListView;
  m_issueList->setModel(m_issueModel);
  m_issueList->setWordWrap(true);
  m_issueList->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_status = new QLabel;
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

  m_templates = new QComboBox;
  m_templates->setPlaceholderText(tr("Built-in template…"));
  // The built-ins, then (after a separator) the variants compiled in beside them; each item's
  // data is its file's name and its tooltip the workflow's description.
  auto addTemplate = [this](std::string_view name) {
    m_templates->addItem(toQString(name), toQString(name));
    if (auto g = rag::builtinWorkflowFile(name))
      m_templates->setItemData(m_templates->count() - 1, toQString(g->description()), Qt::ToolTipRole);
  };
  for (rag::Workflow w : rag::kAllWorkflows) addTemplate(rag::workflowName(w));
  m_templates->insertSeparator(m_templates->count());
  for (std::string_view v : rag::kWorkflowVariants) addTemplate(v);
  m_templates->setCurrentIndex(-1);
  m_templates->setToolTip(tr("Start from a built-in workflow (HedraRAG §6.1) or one of their variants"));

  buildActions();
  auto* toolbar = new QToolBar;
  toolbar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  toolbar->addWidget(new QLabel(tr("Template ")));
  toolbar->addWidget(m_templates);
  toolbar->addSeparator();
  toolbar->addActions({m_undoAction, m_redoAction});
  toolbar->addSeparator();
  toolbar->addActions({m_openAction, m_saveAction, m_saveAsAction});
  toolbar->addSeparator();
  toolbar->addActions({m_validateAction, m_runAction});

  auto* centre = new QSplitter(Qt::Vertical);
  centre->addWidget(m_view);
  auto* issues = new QWidget;
  auto* issuesLayout = new QVBoxLayout(issues);
  issuesLayout->setContentsMargins(0, 0, 0, 0);
  m_issueTitle = new QLabel;
  issuesLayout->addWidget(m_issueTitle);
  issuesLayout->addWidget(m_issueList);
  centre->addWidget(issues);
  centre->setStretchFactor(0, 1);
  centre->setStretchFactor(1, 0);
  centre->setSizes({700, 110});

  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(buildPalette());
  split->addWidget(centre);
  split->addWidget(m_panel);
  split->setStretchFactor(0, 0);
  split->setStretchFactor(1, 1);
  split->setStretchFactor(2, 0);
  split->setSizes({150, 800, 340});

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(toolbar);
  layout->addWidget(split, 1);
  layout->addWidget(m_status);

  connect(m_scene, &QGraphicsScene::selectionChanged, this, &GraphEditor::onSelectionChanged);
  connect(m_scene, &GraphScene::editFailed, this, [this](const QString& m) { showStatus(m, true); });
  connect(m_panel, &PropertyPanel::editFailed, this, [this](const QString& m) { showStatus(m, true); });
  connect(m_panel, &PropertyPanel::nodeRenamed, m_scene, &GraphScene::selectNode);
  connect(m_panel, &PropertyPanel::edgeMoved, m_scene, &GraphScene::selectEdge);
  auto countIssues = [this] {
    const int n = m_issueModel->rowCount();
    m_issueTitle->setText(n == 0 ? tr("<b>Problems:</b> none, the workflow is valid")
                                 : tr("<b>Problems:</b> %1 (click one to select what it names)").arg(n));
  };
  connect(m_issueModel, &QAbstractItemModel::modelReset, this, countIssues);
  countIssues();
  connect(m_issueList, &QListView::clicked, this, &GraphEditor::onIssueActivated);
  connect(m_issueList, &QListView::activated, this, &GraphEditor::onIssueActivated);
  connect(m_templates, &QComboBox::activated, this, [this](int index) {
    if (confirmDiscard())
      loadTemplate(m_templates->itemData(index).toString().toStdString());
    else
      m_templates->setCurrentIndex(-1);
  });
  showStatus(tr("Pick a template or drag nodes from the palette."), false);
}

void GraphEditor::buildActions() {
  QUndoStack* stack = m_model->undoStack();
  m_undoAction = stack->createUndoAction(this, tr("Undo"));
  m_undoAction->setShortcut(QKeySequence::Undo);
  m_redoAction = stack->createRedoAction(this, tr("Redo"));
  m_redoAction->setShortcut(QKeySequence::Redo);
  m_openAction = new QAction(tr("Open…"), this);
  m_openAction->setShortcut(QKeySequence::Open);
  m_saveAction = new QAction(tr("Save"), this);
  m_saveAction->setShortcut(QKeySequence::Save);
  m_saveAsAction = new QAction(tr("Save As…"), this);
  m_saveAsAction->setShortcut(QKeySequence::SaveAs);
  m_validateAction = new QAction(tr("Validate"), this);
  m_validateAction->setToolTip(tr("Check the workflow and show what would fail at run time"));
  m_runAction = new QAction(tr("Run"), this);
  m_runAction->setToolTip(tr("Send the workflow to the engine"));
  for (QAction* a : {m_undoAction, m_redoAction, m_openAction, m_saveAction, m_saveAsAction,
                     m_validateAction, m_runAction}) {
    a->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    addAction(a);
  }
  connect(m_openAction, &QAction::triggered, this, &GraphEditor::open);
  connect(m_saveAction, &QAction::triggered, this, &GraphEditor::save);
  connect(m_saveAsAction, &QAction::triggered, this, &GraphEditor::saveAs);
  connect(m_validateAction, &QAction::triggered, this, &GraphEditor::validate);
  connect(m_runAction, &QAction::triggered, this, &GraphEditor::run);
}

QWidget* GraphEditor::buildPalette() {
  auto* box = new QWidget;
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(4, 4, 0, 4);
  auto* title = new QLabel(tr("<b>Palette</b><br><small>drag onto the canvas<br>"
                              "(conditions onto an edge)</small>"));
  auto* list = new QListView;
  list->setModel(m_palette);
  list->setDragEnabled(true);
  list->setDragDropMode(QAbstractItemView::DragOnly);
  list->setDefaultDropAction(Qt::CopyAction);
  list->setSelectionMode(QAbstractItemView::SingleSelection);
  list->setSpacing(2);
  layout->addWidget(title);
  layout->addWidget(list, 1);
  box->setMinimumWidth(130);
  return box;
}

void GraphEditor::onSelectionChanged() {
  const QString id = m_scene->selectedNodeId();
  const int edge = m_scene->selectedEdge();
  if (!id.isEmpty() && m_model->node(id))
    m_panel->showNode(id);
  else if (edge >= 0)
    m_panel->showEdge(edge);
  else
    m_panel->showNothing();
}

void GraphEditor::onIssueActivated(const QModelIndex& index) {
  const QString node = index.data(IssueListModel::NodeRole).toString();
  const int edge = index.data(IssueListModel::EdgeRole).toInt();
  if (edge >= 0)
    m_scene->selectEdge(edge);
  else if (!node.isEmpty())
    m_scene->selectNode(node);
}

void GraphEditor::showStatus(const QString& text, bool error) {
  m_status->setStyleSheet(error ? QStringLiteral("color: #b02020;") : QString());
  m_status->setText(text);
  Q_EMIT statusMessage(text);
}

void GraphEditor::setFilePath(const QString& path) {
  if (path == m_path) return;
  m_path = path;
  Q_EMIT filePathChanged(path);
}

bool GraphEditor::confirmDiscard() {
  if (m_model->undoStack()->isClean()) return true;
  return QMessageBox::question(this, tr("Discard changes?"),
                               tr("The workflow has unsaved changes. Discard them?"),
                               QMessageBox::Discard | QMessageBox::Cancel,
                               QMessageBox::Cancel) == QMessageBox::Discard;
}

void GraphEditor::fitGraph() {
  QRectF r = m_scene->itemsBoundingRect().adjusted(-30, -30, 30, 30);
  m_scene->setSceneRect(r.adjusted(-400, -300, 400, 300));  // room to drop new nodes
  m_view->resetTransform();
  const QSizeF v = m_view->viewport()->size();
  const double s = std::min({1.0, v.width() / r.width(), v.height() / r.height()});
  m_view->scale(s, s);
  m_view->centerOn(r.center());
}

void GraphEditor::loadTemplate(rag::Workflow workflow) { loadTemplate(rag::workflowName(workflow)); }

void GraphEditor::loadTemplate(std::string_view name) {
  rag::Status s = m_model->fromBuiltin(name);
  if (!s) {
    showStatus(message(s), true);
    return;
  }
  m_templates->setCurrentIndex(m_templates->findData(toQString(name)));
  m_templates->setToolTip(toQString(m_model->graph().description()));
  setFilePath({});
  fitGraph();
  showStatus(tr("Loaded the built-in workflow \"%1\".").arg(toQString(name)), false);
}

rag::Status GraphEditor::openFile(const QString& path) {
  rag::Status s = m_model->load(path.toStdString());
  if (!s) {
    showStatus(tr("Could not open %1: %2").arg(path, message(s)), true);
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot open workflow"),
                                tr("%1 could not be opened. The workflow you are editing is "
                                   "unchanged.").arg(path),
                                QMessageBox::Ok, this);
    box->setInformativeText(message(s));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
    return s;
  }
  m_templates->setCurrentIndex(-1);
  setFilePath(path);
  fitGraph();
  showStatus(tr("Opened %1").arg(path), false);
  return s;
}

rag::Status GraphEditor::saveFile(const QString& path) {
  rag::Status s = m_model->save(path.toStdString());
  if (!s) {
    showStatus(tr("Could not save %1: %2").arg(path, message(s)), true);
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot save workflow"), message(s),
                                QMessageBox::Ok, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
    return s;
  }
  setFilePath(path);
  showStatus(tr("Saved %1").arg(path), false);
  return s;
}

void GraphEditor::open() {
  if (!confirmDiscard()) return;
  const QString path = QFileDialog::getOpenFileName(this, tr("Open workflow"), m_path, kFileFilter);
  if (!path.isEmpty()) (void)openFile(path);
}

bool GraphEditor::save() {
  if (m_path.isEmpty()) return saveAs();
  return saveFile(m_path).isOk();
}

bool GraphEditor::saveAs() {
  const QString suggested =
      m_path.isEmpty() ? toQString(m_model->graph().name()) + QStringLiteral(".json") : m_path;
  const QString path = QFileDialog::getSaveFileName(this, tr("Save workflow"), suggested, kFileFilter);
  return !path.isEmpty() && saveFile(path).isOk();
}

bool GraphEditor::validate() {
  const auto& issues = m_model->issues();
  if (issues.empty()) {
    showStatus(tr("The workflow is valid."), false);
    return true;
  }
  const rag::WorkflowIssue& first = issues.front();
  showStatus(tr("%n problem(s); the first: %1", nullptr, int(issues.size()))
                 .arg(QString::fromStdString(first.message)),
             true);
  if (first.edge >= 0)
    m_scene->selectEdge(int(first.edge));
  else if (!first.node.empty())
    m_scene->selectNode(QString::fromStdString(first.node));
  return false;
}

void GraphEditor::run() {
  if (!validate()) return;
  showStatus(tr("Sent \"%1\" to the engine.").arg(toQString(m_model->graph().name())), false);
  Q_EMIT runRequested(m_model->graph());
}

}  // namespace ragwb
