// DepCachePanel: the prefix cache's eviction policy at work on DepCache's subgraphs. The line on
// top names the policy and LACR's α the engine serves with (set in the Run panel); the plot draws
// each policy's live subgraph hit rate through its latest run (tokens of knowledge subgraphs the
// cache found, of those looked up since the run started), one line per policy, so runs under
// different policies compare over the same seconds; the table sums every run per policy, with the
// hit rate of every lookup in the prefix cache (prompts and segments) beside the subgraphs'.
//
//   auto* panel = new DepCachePanel(&bridge);  // follows runStarted, the stats reports, runFinished
//
// DepCachePolicyModel is the table's data (no widgets): one row per policy label ("lacr α 0.20").
#pragma once

#include <QAbstractTableModel>
#include <QElapsedTimer>
#include <QString>
#include <QWidget>
#include <vector>

#include "rag/engine.h"

class QLabel;
class QCustomPlot;
class QCPGraph;

namespace ragwb {

class EngineBridge;
struct EngineConfig;

// Token counters of one run (differences of rag::ServingStats' cumulative counters).
struct CacheCounters {
  int64_t subgraphTokens = 0, subgraphHits = 0;  // DepCache's subgraphs looked up / found
  int64_t promptTokens = 0, promptHits = 0;      // every token looked up in the prefix cache (prompts and segments) / found
  static CacheCounters between(const rag::ServingStats& from, const rag::ServingStats& to);
  double subgraphHitRate() const { return subgraphTokens > 0 ? double(subgraphHits) / double(subgraphTokens) : -1; }
  double promptHitRate() const { return promptTokens > 0 ? double(promptHits) / double(promptTokens) : -1; }
};

class DepCachePolicyModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Policy, Runs, SubgraphTokens, SubgraphHitRate, PromptTokens, PromptHitRate, ColumnCount };
  explicit DepCachePolicyModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  // A run under `label` starts: its row (added when new) counts one more run.
  void beginRun(const QString& label);
  // The current run's counters so far (replacing the previous update of the same run).
  void updateRun(const CacheCounters& run);
  // Every run of the row, the current one included.
  CacheCounters totals(int row) const;
  QString label(int row) const;
  int rowOf(const QString& label) const;  // -1 when absent

private:
  struct Row {
    QString label;
    int runs = 0;
    CacheCounters done;     // finished runs
    CacheCounters current;  // the run going on (or the last one, until the next begins)
  };
  std::vector<Row> m_rows;
  int m_current = -1;
};

class DepCachePanel : public QWidget {
  Q_OBJECT
public:
  explicit DepCachePanel(EngineBridge* bridge, QWidget* parent = nullptr);

  static QString policyLabel(const EngineConfig& c);  // "lru", "lacr α 0.20"
  DepCachePolicyModel* policies() { return &m_model; }
  QCustomPlot* plot() const { return m_plot; }
  QCPGraph* graphOf(const QString& label) const;  // null before the policy's first run
  QString statusText() const;
  double longestReportMs() const { return m_longestReportMs; }  // GUI thread's CPU time per stats report

public Q_SLOTS:
  // One stats report (EngineBridge::clusterHeat's), at `seconds` on the panel's clock.
  void addStats(const rag::ServingStats& stats);

private:
  void runStarted();
  void runFinished();
  void update(const rag::ServingStats& stats, double seconds);

  EngineBridge* m_bridge;
  DepCachePolicyModel m_model;
  QLabel* m_status;
  QCustomPlot* m_plot;
  std::vector<std::pair<QString, QCPGraph*>> m_graphs;
  rag::ServingStats m_idle;      // the last report while no run was going (the next run's baseline)
  rag::ServingStats m_baseline;  // the current run's
  QString m_label;               // the current (or last) run's policy
  bool m_active = false;
  QElapsedTimer m_clock;         // since the current run started
  double m_longestReportMs = 0;
};

}  // namespace ragwb
