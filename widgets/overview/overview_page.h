// The workbench's start page: what corpus is loaded and what it holds. Statistics are read on
// a worker thread (the GUI thread never waits on SQLite); loaded()/failed() report the end.
#pragma once

#include <QFutureWatcher>
#include <QLabel>
#include <QTableView>
#include <QWidget>
#include <filesystem>

#include "overview/corpus_stats_model.h"
#include "rag/corpus.h"

namespace ragwb {

class OverviewPage : public QWidget {
  Q_OBJECT
public:
  explicit OverviewPage(QWidget* parent = nullptr);

  // Starts reading `path` in the background; loaded() or failed() follows.
  void loadCorpus(const std::filesystem::path& path);
  CorpusStatsModel* model() { return &m_model; }
  bool isLoading() const { return m_watcher.isRunning(); }

Q_SIGNALS:
  void loaded(const QString& summary);
  void failed(const QString& message);

private:
  void onFinished();

  QLabel* m_title;
  QLabel* m_path;
  QLabel* m_message;
  QTableView* m_table;
  CorpusStatsModel m_model;
  QFutureWatcher<rag::Result<rag::CorpusStats>> m_watcher;
};

}  // namespace ragwb
