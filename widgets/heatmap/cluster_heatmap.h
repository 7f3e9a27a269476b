// ClusterHeatmap: IVF cluster visits over time. Top: a colour map (x = seconds, y = cluster
// index or hotness rank, colour = visits per interval) with a thin strip on its right marking
// the clusters held by the GPU cluster cache; below: the cache hit rate and the visit rate.
//
//   auto* heat = new ClusterHeatmap;
//   connect(&bridge, &EngineBridge::clusterHeat, heat, &ClusterHeatmap::addSample);
//   heat->savePng("heat.png");
//
// The widget only draws what ClusterHeatSeries (the data half) holds.
#pragma once

#include <QElapsedTimer>
#include <QString>
#include <QWidget>

#include "heatmap/cluster_heat_series.h"
#include "rag/engine.h"

class QCheckBox;
class QLabel;
class QCustomPlot;
class QCPAxisRect;
class QCPColorMap;
class QCPColorScale;
class QCPGraph;

namespace ragwb {

class ClusterHeatmap : public QWidget {
  Q_OBJECT
public:
  explicit ClusterHeatmap(QWidget* parent = nullptr);

  const ClusterHeatSeries& series() const { return m_series; }
  void setWindowSamples(int samples);  // default 120 (a minute at two reports a second)
  bool sortByHeat() const { return m_sortByHeat; }
  void setSortByHeat(bool on);         // rows ranked by visits in the window, hottest on top
  bool logColour() const { return m_logColour; }
  void setLogColour(bool on);          // default on: visits are heavily skewed

  // Exports the plots at their shown size (900x600 when never shown); false when the file
  // cannot be written.
  bool savePng(const QString& path, int width = 0, int height = 0);
  bool saveSvg(const QString& path, int width = 0, int height = 0);

  // The parts, for inspection and tests.
  QCustomPlot* plot() const { return m_plot; }
  QCPColorMap* heatMap() const { return m_heat; }
  QCPColorMap* residencyStrip() const { return m_strip; }
  QCPGraph* hitRateGraph() const { return m_hitRate; }
  QCPGraph* visitRateGraph() const { return m_visitRate; }
  QString cacheStatus() const;  // the line above the plots ("no GPU cluster cache", ...)

public Q_SLOTS:
  // One engine report; time is taken from a clock started by the first report after clear().
  void addSample(const rag::ClusterHeat& heat, const rag::ServingStats& stats);
  // The same at an explicit time in seconds (replays, tests).
  void addSampleAt(const rag::ClusterHeat& heat, const rag::ServingStats& stats, double seconds);
  void clear();

protected:
  bool event(QEvent* e) override;  // follows palette (theme) changes

private:
  void rebuild();
  void fillHeat(const std::vector<int>& order);
  void fillStrip(const std::vector<int>& order);
  void fillRates();
  void applyPalette();
  void applyColourScale();  // linear or logarithmic
  void exportDialog();
  QSize exportSize(int width, int height) const;  // shown size, or 900x600

  ClusterHeatSeries m_series;
  QElapsedTimer m_clock;
  bool m_sortByHeat = true;
  bool m_logColour = true;

  QLabel* m_status;
  QCheckBox* m_sortBox;
  QCheckBox* m_logBox;
  QCustomPlot* m_plot;
  QCPAxisRect* m_heatRect;
  QCPAxisRect* m_stripRect;
  QCPAxisRect* m_rateRect;
  QCPColorMap* m_heat;
  QCPColorMap* m_strip;
  QCPColorScale* m_scale;
  QCPGraph* m_hitRate;
  QCPGraph* m_visitRate;
};

}  // namespace ragwb
