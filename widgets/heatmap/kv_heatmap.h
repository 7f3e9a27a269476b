// KvHeatmap: the KV pool's compute blocks by owner over time, beside the cluster heatmap and in
// its look. Top: a map (x = seconds, y = blocks, colour = who holds them: a running sequence, a
// cached prefix, a DepCache subgraph, a Block-Attention passage block, or nobody); below: the
// hit rates over each interval (prefix cache, passage blocks, subgraphs).
//
//   auto* kv = new KvHeatmap;
//   connect(&bridge, &EngineBridge::kvBlocks, kv, &KvHeatmap::addSample);  // twice a second
//   kv->setLayout(KvHeatSeries::Layout::ByOwner);                          // stacked shares
//
// The widget only draws what KvHeatSeries (the data half) holds. It measures its own GUI-thread
// work (a report's handling, a replot) so a live run can report it.
#pragma once

#include <QElapsedTimer>
#include <QString>
#include <QWidget>

#include "heatmap/kv_heat_series.h"
#include "rag/engine.h"

class QCheckBox;
class QLabel;
class QCustomPlot;
class QCPAxisRect;
class QCPColorMap;
class QCPGraph;

namespace ragwb {

class KvHeatmap : public QWidget {
  Q_OBJECT
public:
  explicit KvHeatmap(QWidget* parent = nullptr);

  static constexpr int kMaxRows = 256;  // a larger pool is shown a few blocks per row

  const KvHeatSeries& series() const { return m_series; }
  void setWindowSamples(int samples);  // default 120 (a minute at two reports a second)
  KvHeatSeries::Layout blockLayout() const { return m_layout; }
  void setBlockLayout(KvHeatSeries::Layout layout);
  static QColor ownerColour(rag::KvBlockOwner owner);

  bool savePng(const QString& path, int width = 0, int height = 0);

  // The parts, for inspection and tests.
  QCustomPlot* plot() const { return m_plot; }
  QCPColorMap* blockMap() const { return m_map; }
  QCPGraph* prefixHitGraph() const { return m_prefixHit; }
  QCPGraph* passageHitGraph() const { return m_passageHit; }
  QCPGraph* subgraphHitGraph() const { return m_subgraphHit; }
  QString poolStatus() const;  // the line above the plot: blocks, host tier, the last hit rate
  QString legendText() const;  // the owners' colours with their blocks in the last report (rich text)
  // The longest GUI-thread work since clear(): handling one report (series and map filled; the
  // thread's CPU time), and one replot (QCustomPlot's replotTime, wall clock), in milliseconds.
  double longestSampleMs() const { return m_longestSampleMs; }
  double longestReplotMs() const { return m_longestReplotMs; }

public Q_SLOTS:
  // One engine report; time is taken from a clock started by the first report after clear().
  void addSample(const rag::KvBlockMap& map, const rag::ServingStats& stats);
  void addSampleAt(const rag::KvBlockMap& map, const rag::ServingStats& stats, double seconds);
  void clear();

protected:
  bool event(QEvent* e) override;  // follows palette (theme) changes

private:
  void rebuild();
  void fillMap();
  void fillRates();
  void applyPalette();
  void exportDialog();

  KvHeatSeries m_series;
  KvHeatSeries::Layout m_layout = KvHeatSeries::Layout::ByBlock;
  QElapsedTimer m_clock;
  double m_longestSampleMs = 0;
  double m_longestReplotMs = 0;

  QLabel* m_status;
  QLabel* m_legend;
  QCheckBox* m_stackBox;
  QCustomPlot* m_plot;
  QCPAxisRect* m_mapRect;
  QCPAxisRect* m_rateRect;
  QCPColorMap* m_map;
  QCPGraph* m_prefixHit;
  QCPGraph* m_passageHit;
  QCPGraph* m_subgraphHit;
};

}  // namespace ragwb
