#include "heatmap/cluster_heatmap.h"

#include "plot/plot_export.h"

#include <QCheckBox>
#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QSvgGenerator>
#include <QToolButton>
#include <QVBoxLayout>
#include <cmath>
#include <initializer_list>
#include <limits>
#include "plot/qcustomplot_include.h"

namespace ragwb {

namespace {

// Viridis: dark to bright with no black or white end, so both ends stay visible on dark and
// light themes, and it reads in grey scale and to colour-blind eyes.
QCPColorGradient visitsGradient() {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0.00, QColor(0x44, 0x01, 0x54));
  g.setColorStopAt(0.25, QColor(0x3b, 0x52, 0x8b));
  g.setColorStopAt(0.50, QColor(0x21, 0x91, 0x8c));
  g.setColorStopAt(0.75, QColor(0x5e, 0xc9, 0x62));
  g.setColorStopAt(1.00, QColor(0xfd, 0xe7, 0x25));
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  // Intervals without visits are NaN (a log scale has no 0): drawn in the coldest colour, so
  // the map is one self-contained image on any theme, with hot clusters the bright lines.
  g.setNanHandling(QCPColorGradient::nhLowestColor);
  g.setLevelCount(256);
  return g;
}

const QColor kSwappingIn(0xf2, 0xa9, 0x00);   // amber
const QColor kResident(0x1f, 0x9e, 0x4a);     // green
const QColor kSwappingOut(0xd6, 0x45, 0x3d);  // red

// Residency codes 1..3 map to exactly three colours; absent (0) is NaN, i.e. not drawn.
QCPColorGradient residencyGradient() {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0.0, kSwappingIn);
  g.setColorStopAt(0.5, kResident);
  g.setColorStopAt(1.0, kSwappingOut);
  g.setLevelCount(3);
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

ClusterHeatmap::ClusterHeatmap(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QHBoxLayout;
  m_status = new QLabel;
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // Its text changes twice a second during a run: a width that followed the text would re-lay
  // out the dock (and the main window's docks around it) each time.
  m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  m_sortBox = new QCheckBox(tr("Sort by heat"));
  m_sortBox->setToolTip(tr("Rank clusters by their visits in the window, hottest on top"));
  m_sortBox->setChecked(m_sortByHeat);
  m_logBox = new QCheckBox(tr("Log colour"));
  m_logBox->setToolTip(tr("Logarithmic colour scale (visits are heavily skewed)"));
  m_logBox->setChecked(m_logColour);
  auto* exportButton = new QToolButton;
  exportButton->setText(tr("Export…"));
  exportButton->setToolTip(tr("Save the plots as PNG or SVG"));
  connect(exportButton, &QToolButton::clicked, this, &ClusterHeatmap::exportDialog);
  bar->addWidget(m_status, 1);
  bar->addWidget(m_sortBox);
  bar->addWidget(m_logBox);
  bar->addWidget(exportButton);
  layout->addLayout(bar);
  connect(m_sortBox, &QCheckBox::toggled, this, &ClusterHeatmap::setSortByHeat);
  connect(m_logBox, &QCheckBox::toggled, this, &ClusterHeatmap::setLogColour);

  m_plot = new QCustomPlot;
  m_plot->setObjectName(QStringLiteral("clusterHeatPlot"));  // named in the stall meter's events
  m_plot->setMinimumSize(320, 240);
  layout->addWidget(m_plot, 1);

  // Layout: [heat map | residency strip | colour scale] over [rates | - | -]; both time axes
  // share the left and right margins, so their seconds line up.
  QCPLayoutGrid* grid = m_plot->plotLayout();
  m_heatRect = m_plot->axisRect();
  m_stripRect = new QCPAxisRect(m_plot, true);
  m_scale = new QCPColorScale(m_plot);
  m_rateRect = new QCPAxisRect(m_plot, true);
  grid->addElement(0, 1, m_stripRect);
  grid->addElement(0, 2, m_scale);
  grid->addElement(1, 0, m_rateRect);
  grid->setRowStretchFactors({3.0, 1.2});
  grid->setColumnSpacing(4);
  auto* columns = new QCPMarginGroup(m_plot);  // the two time axes
  m_heatRect->setMarginGroup(QCP::msLeft | QCP::msRight, columns);
  m_rateRect->setMarginGroup(QCP::msLeft | QCP::msRight, columns);
  auto* rowEnds = new QCPMarginGroup(m_plot);  // map, strip and colour scale span the same rows
  for (QCPLayoutElement* e : std::initializer_list<QCPLayoutElement*>{m_heatRect, m_stripRect, m_scale})
    e->setMarginGroup(QCP::msTop | QCP::msBottom, rowEnds);
  m_plot->setAutoAddPlottableToLegend(false);

  QCPAxis* time = m_heatRect->axis(QCPAxis::atBottom);
  QCPAxis* rows = m_heatRect->axis(QCPAxis::atLeft);
  time->setLabel(tr("time (s)"));
  rows->setRangeReversed(true);  // row 0 (cluster 0, or the hottest) on top
  // The right margin is shared with the rate plot's visits/s axis; mirror the rows there.
  m_heatRect->axis(QCPAxis::atRight)->setVisible(true);
  m_heatRect->axis(QCPAxis::atRight)->setRangeReversed(true);
  connect(rows, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), m_heatRect->axis(QCPAxis::atRight),
          qOverload<const QCPRange&>(&QCPAxis::setRange));
  m_heat = new QCPColorMap(time, rows);
  m_heat->setColorScale(m_scale);
  m_heat->setInterpolate(false);
  m_heat->setTightBoundary(false);
  m_scale->setGradient(visitsGradient());
  m_scale->setBarWidth(10);
  m_scale->axis()->setLabel(tr("visits / interval"));

  // The strip: one column of the current residency per displayed row.
  m_stripRect->setMinimumSize(22, 0);
  m_stripRect->setMaximumSize(22, QWIDGETSIZE_MAX);
  m_stripRect->setAutoMargins(QCP::msTop | QCP::msBottom);  // left and right: none
  m_stripRect->setMargins(QMargins(0, 0, 0, 0));
  for (QCPAxis* a : m_stripRect->axes()) {
    a->setTicks(false);
    a->setTickLabels(false);
    a->grid()->setVisible(false);
  }
  m_stripRect->axis(QCPAxis::atLeft)->setRangeReversed(true);
  m_stripRect->axis(QCPAxis::atBottom)->setRange(0, 1);
  connect(rows, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), m_stripRect->axis(QCPAxis::atLeft),
          qOverload<const QCPRange&>(&QCPAxis::setRange));
  m_strip = new QCPColorMap(m_stripRect->axis(QCPAxis::atBottom), m_stripRect->axis(QCPAxis::atLeft));
  m_strip->setGradient(residencyGradient());
  m_strip->setInterpolate(false);
  m_strip->setDataRange(QCPRange(1, 3));
  m_strip->setName(tr("GPU-resident clusters"));

  QCPAxis* rateTime = m_rateRect->axis(QCPAxis::atBottom);
  QCPAxis* rate = m_rateRect->axis(QCPAxis::atLeft);
  QCPAxis* visits = m_rateRect->axis(QCPAxis::atRight);
  visits->setVisible(true);
  rateTime->setLabel(tr("time (s)"));
  rate->setLabel(tr("hit rate (%)"));
  rate->setRange(0, 100);
  visits->setLabel(tr("visits/s"));
  connect(time, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), rateTime,
          qOverload<const QCPRange&>(&QCPAxis::setRange));
  m_hitRate = m_plot->addGraph(rateTime, rate);
  m_hitRate->setName(tr("GPU cache hit rate"));
  m_hitRate->setPen(QPen(kResident, 2));
  m_visitRate = m_plot->addGraph(rateTime, visits);
  m_visitRate->setName(tr("cluster visits/s"));
  m_visitRate->setPen(QPen(QColor(0x3b, 0x7d, 0xd8), 1.5));
  // The hit-rate plot's legend, inside its rect (the default legend lives in the heat rect).
  m_plot->legend->setVisible(true);
  m_heatRect->insetLayout()->take(m_plot->legend);
  m_rateRect->insetLayout()->addElement(m_plot->legend, Qt::AlignBottom | Qt::AlignRight);
  m_plot->legend->setIconSize(16, 8);

  applyPalette();
  applyColourScale();
  rebuild();
}

void ClusterHeatmap::setWindowSamples(int samples) {
  m_series.setCapacity(samples);
  rebuild();
}

void ClusterHeatmap::setSortByHeat(bool on) {
  if (on == m_sortByHeat) return;
  m_sortByHeat = on;
  m_sortBox->setChecked(on);
  rebuild();
}

void ClusterHeatmap::setLogColour(bool on) {
  if (on == m_logColour) return;
  m_logColour = on;
  m_logBox->setChecked(on);
  applyColourScale();
  rebuild();
}

void ClusterHeatmap::addSample(const rag::ClusterHeat& heat, const rag::ServingStats& stats) {
  if (!m_clock.isValid()) m_clock.start();
  addSampleAt(heat, stats, m_clock.nsecsElapsed() / 1e9);
}

void ClusterHeatmap::addSampleAt(const rag::ClusterHeat& heat, const rag::ServingStats& stats, double seconds) {
  m_series.add(heat, stats, seconds);
  rebuild();
}

void ClusterHeatmap::clear() {
  m_series.clear();
  m_clock.invalidate();
  rebuild();
}

QString ClusterHeatmap::cacheStatus() const {
  if (!m_series.hasBaseline()) return tr("Waiting for cluster visits from the engine…");
  const std::vector<uint8_t>& res = m_series.currentResidency();
  QString clusters = tr("%1 IVF clusters").arg(m_series.clusterCount());
  const ClusterHeatSample* last = m_series.latest();
  QString rate = last ? tr(", %1 visits/s").arg(last->visitsPerSecond(), 0, 'f', 0) : QString();
  if (res.empty()) return tr("%1%2 · no GPU cluster cache").arg(clusters, rate);
  int counts[4] = {0, 0, 0, 0};
  for (uint8_t r : res) ++counts[std::min<int>(r, 3)];
  QString cache = tr("GPU cache: %1 resident").arg(counts[ClusterHeatSeries::Resident]);
  if (counts[ClusterHeatSeries::SwappingIn] + counts[ClusterHeatSeries::SwappingOut] > 0)
    cache += tr(", %1 swapping in, %2 swapping out")
                 .arg(counts[ClusterHeatSeries::SwappingIn])
                 .arg(counts[ClusterHeatSeries::SwappingOut]);
  if (last && last->gpuCacheActive) cache += tr(", hit rate %1 %").arg(last->hitRate * 100, 0, 'f', 1);
  return tr("%1%2 · %3").arg(clusters, rate, cache);
}

void ClusterHeatmap::rebuild() {
  const std::vector<int> order = m_series.displayOrder(m_sortByHeat);
  fillHeat(order);
  fillStrip(order);
  fillRates();

  const int clusters = m_series.clusterCount();
  QCPAxis* rows = m_heatRect->axis(QCPAxis::atLeft);
  rows->setLabel(m_sortByHeat ? tr("clusters by heat (rank)") : tr("cluster"));
  // Before the first sample there are no clusters to number: no ticks (not -0.4 ... 0.4).
  rows->setRange(-0.5, std::max(clusters, 1) - 0.5);
  for (QCPAxis* axis : {rows, m_heatRect->axis(QCPAxis::atRight)}) axis->setTickLabels(clusters > 0);
  m_stripRect->setVisible(!m_series.currentResidency().empty());
  m_stripRect->axis(QCPAxis::atBottom)->setLabel(m_series.currentResidency().empty() ? QString() : tr("GPU"));
  m_status->setText(cacheStatus());
  replotWhenShown(m_plot);
}

void ClusterHeatmap::fillHeat(const std::vector<int>& order) {
  const int n = m_series.sampleCount();
  const int clusters = static_cast<int>(order.size());
  QCPColorMapData* data = m_heat->data();
  QCPAxis* time = m_heatRect->axis(QCPAxis::atBottom);
  if (n == 0 || clusters == 0) {
    data->setSize(0, 0);
    time->setRange(0, 10);
    m_scale->setDataRange(QCPRange(m_logColour ? 0.7 : 0, 10));
    return;
  }
  // Cell i spans sample i's interval; one sample is drawn twice so it has a width.
  const int columns = std::max(n, 2);
  auto centre = [&](int i) {
    const ClusterHeatSample& s = m_series.sample(std::min(i, n - 1));
    return n == 1 ? s.timeSeconds - s.intervalSeconds * (1 - i) : s.timeSeconds - s.intervalSeconds / 2;
  };
  data->setSize(columns, clusters);
  data->setRange(QCPRange(centre(0), centre(columns - 1)), QCPRange(0, clusters - 1));
  for (int i = 0; i < columns; ++i) {
    const std::vector<uint32_t>& visits = m_series.sample(std::min(i, n - 1)).visits;
    for (int r = 0; r < clusters; ++r) {
      const uint32_t v = visits[static_cast<size_t>(order[static_cast<size_t>(r)])];
      data->setCell(i, r, v == 0 ? kNaN : static_cast<double>(v));
    }
  }
  const double first = m_series.sample(0).timeSeconds - m_series.sample(0).intervalSeconds;
  time->setRange(first, std::max(m_series.sample(n - 1).timeSeconds, first + 1));
  // The log scale starts a little below 1, so one visit is a shade above none.
  const double top = std::max<double>(m_series.maxDelta(), 2);
  m_scale->setDataRange(QCPRange(m_logColour ? 0.7 : 0, top));
}

void ClusterHeatmap::applyColourScale() {
  m_scale->setDataScaleType(m_logColour ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  m_scale->axis()->setTicker(m_logColour ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                                         : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
}

void ClusterHeatmap::fillStrip(const std::vector<int>& order) {
  const std::vector<uint8_t>& res = m_series.currentResidency();
  QCPColorMapData* data = m_strip->data();
  if (res.empty() || res.size() != order.size()) {
    data->setSize(0, 0);
    return;
  }
  const int clusters = static_cast<int>(order.size());
  data->setSize(2, clusters);  // two columns so the one strip has a width
  data->setRange(QCPRange(0.25, 0.75), QCPRange(0, clusters - 1));
  for (int r = 0; r < clusters; ++r) {
    const uint8_t code = res[static_cast<size_t>(order[static_cast<size_t>(r)])];
    const double v = code == ClusterHeatSeries::Absent ? kNaN : static_cast<double>(std::min<uint8_t>(code, 3));
    data->setCell(0, r, v);
    data->setCell(1, r, v);
  }
}

void ClusterHeatmap::fillRates() {
  QVector<double> t, hit, tv, visits;
  double peak = 0;
  for (int i = 0; i < m_series.sampleCount(); ++i) {
    const ClusterHeatSample& s = m_series.sample(i);
    tv.push_back(s.timeSeconds);
    visits.push_back(s.visitsPerSecond());
    peak = std::max(peak, s.visitsPerSecond());
    if (s.gpuCacheActive) {  // without a cache there is no hit rate to draw
      t.push_back(s.timeSeconds);
      hit.push_back(s.hitRate * 100);
    }
  }
  m_hitRate->setData(t, hit, true);
  m_plot->legend->clearItems();
  if (!t.isEmpty()) m_hitRate->addToLegend();  // no cache: no hit rate to name
  m_visitRate->addToLegend();
  m_visitRate->setData(tv, visits, true);
  m_rateRect->axis(QCPAxis::atRight)->setRange(0, peak > 0 ? peak * 1.1 : 1);
}

void ClusterHeatmap::applyPalette() {
  stylePlot(m_plot, palette());  // the three rects, their axes and the legend in the rate rect
  styleAxis(m_scale->axis(), palette());  // the colour scale's axis rect is not among the plot's axisRects()
}

bool ClusterHeatmap::event(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) {
    applyPalette();
    replotWhenShown(m_plot);
  }
  return QWidget::event(e);
}

QSize ClusterHeatmap::exportSize(int width, int height) const {
  const QSize shown = m_plot->size();
  QSize s = m_plot->isVisible() ? shown : QSize(900, 600);
  if (width > 0) s.setWidth(width);
  if (height > 0) s.setHeight(height);
  return s;
}

bool ClusterHeatmap::savePng(const QString& path, int width, int height) {
  QString png = path;
  if (png.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive)) png.chop(4), png += QLatin1String(".png");
  return savePlot(m_plot, png, exportSize(width, height));
}

bool ClusterHeatmap::saveSvg(const QString& path, int width, int height) {
  const QString svg = path.endsWith(QLatin1String(".svg"), Qt::CaseInsensitive) ? path : path + QLatin1String(".svg");
  return savePlot(m_plot, svg, exportSize(width, height), tr("IVF cluster heat"));
}

void ClusterHeatmap::exportDialog() {
  QString error;
  exportPlotDialog(this, m_plot, QStringLiteral("cluster-heat.png"), &error);
  if (!error.isEmpty()) m_status->setText(error);
}

}  // namespace ragwb
