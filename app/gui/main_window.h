// The workbench's main window: menus, status bar with the engine's state, and the tool pages.
#pragma once

#include <QLabel>
#include <QMainWindow>
#include <filesystem>

namespace ragwb {

class OverviewPage;

class MainWindow : public QMainWindow {
  Q_OBJECT
public:
  explicit MainWindow(std::filesystem::path corpus, QWidget* parent = nullptr);

  OverviewPage* overview() { return m_overview; }

protected:
  void closeEvent(QCloseEvent* e) override;

private:
  void buildMenus();
  void openCorpus();
  void about();

  std::filesystem::path m_corpus;
  OverviewPage* m_overview;
  QLabel* m_engineState;
};

}  // namespace ragwb
