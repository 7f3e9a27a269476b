#include "main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QFileDialog>
#include <QKeySequence>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStatusBar>

#include "overview/overview_page.h"

namespace ragwb {

MainWindow::MainWindow(std::filesystem::path corpus, QWidget* parent)
    : QMainWindow(parent), m_corpus(std::move(corpus)) {
  setWindowTitle(tr("RAGraph Workbench"));
  m_overview = new OverviewPage(this);
  setCentralWidget(m_overview);
  m_engineState = new QLabel(tr("Engine: idle"));
  statusBar()->addPermanentWidget(m_engineState);
  buildMenus();

  connect(m_overview, &OverviewPage::loaded, this, [this](const QString& summary) {
    statusBar()->showMessage(tr("Corpus loaded: %1").arg(summary));
  });
  connect(m_overview, &OverviewPage::failed, this, [this](const QString& message) {
    statusBar()->showMessage(tr("No corpus: %1").arg(message));
  });

  QSettings settings;
  if (!restoreGeometry(settings.value("mainWindow/geometry").toByteArray())) resize(1100, 720);
  restoreState(settings.value("mainWindow/state").toByteArray());
  m_overview->loadCorpus(m_corpus);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open Corpus…"), this, &MainWindow::openCorpus);
  open->setShortcut(QKeySequence::Open);
  QAction* reload = file->addAction(tr("&Reload"), this, [this] { m_overview->loadCorpus(m_corpus); });
  reload->setShortcut(QKeySequence::Refresh);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About RAGraph Workbench"), this, &MainWindow::about);
  help->addAction(tr("About &Qt"), qApp, &QApplication::aboutQt);
}

void MainWindow::openCorpus() {
  QString file = QFileDialog::getOpenFileName(this, tr("Open Corpus"),
                                              QString::fromStdString(m_corpus.parent_path().string()),
                                              tr("Corpus databases (*.db);;All files (*)"));
  if (file.isEmpty()) return;
  m_corpus = file.toStdString();
  m_overview->loadCorpus(m_corpus);
}

void MainWindow::about() {
  QMessageBox::about(this, tr("About RAGraph Workbench"),
                     tr("<h3>RAGraph Workbench %1</h3>"
                        "<p>A workbench for designing, serving and understanding heterogeneous "
                        "RAG workflows, with an embedded serving engine (HedraRAG, WindVE, "
                        "DepCache, DRAGON, Block-Attention).</p>")
                         .arg(QApplication::applicationVersion()));
}

void MainWindow::closeEvent(QCloseEvent* e) {
  QSettings settings;
  settings.setValue("mainWindow/geometry", saveGeometry());
  settings.setValue("mainWindow/state", saveState());
  e->accept();
}

}  // namespace ragwb
