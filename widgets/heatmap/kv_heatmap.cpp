#include "heatmap/kv_heatmap.h"

#include "bridge/gui_stall_meter.h"
#include "plot/plot_export.h"

#include <QCheckBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include "plot/qcustomplot_include.h"

namespace ragwb {

namespace {

// Okabe–Ito colours (distinct to colour-blind eyes); free blocks a dark neutral, so the map is
// one self-contained image on dark and light themes, as the cluster heatmap is.
const QColor kFree(0x3a, 0x3e, 0x48);
const QColor kSequence(0xe6, 0x9f, 0x00);  // orange
const QColor kPrefix(0x56, 0xb4, 0xe9);    // sky blue
const QColor kSubgraph(0xcc, 0x79, 0xa7);  // reddish purple
const QColor kPassage(0x00, 0x9e, 0x73);   // bluish green

// Owner codes 0..4 map to exactly five colours.
QCPColorGradient ownerGradient() {
  QCPColorGradient g;
  g.clearColorStops();
  for (int o = 0; o < rag::kKvBlockOwnerCount; ++o)
    g.setColorStopAt(o / double(rag::kKvBlockOwnerCount - 1), KvHeatmap::ownerColour(static_cast<rag::KvBlockOwner>(o)));
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  g.setLevelCount(rag::kKvBlockOwnerCount);
  return g;
}

QString ownerLabel(rag::KvBlockOwner o) {
  switch (o) {
    case rag::KvBlockOwner::Free: return KvHeatmap::tr("free");
    case rag::KvBlockOwner::Sequence: return KvHeatmap::tr("sequences");
    case rag::KvBlockOwner::Prefix: return KvHeatmap::tr("cached prefixes");
    case rag::KvBlockOwner::Subgraph: return KvHeatmap::tr("subgraphs");
    case rag::KvBlockOwner::Passage: return KvHeatmap::tr("passage blocks");
  }
  return {};
}

constexpr rag::KvBlockOwner kLegendOrder[] = {rag::KvBlockOwner::Sequence, rag::KvBlockOwner::Prefix,
                                              rag::KvBlockOwner::Subgraph, rag::KvBlockOwner::Passage,
                                              rag::KvBlockOwner::Free};

}  // namespace

QColor KvHeatmap::ownerColour(rag::KvBlockOwner owner) {
  switch (owner) {
    case rag::KvBlockOwner::Free: return kFree;
    case rag::KvBlockOwner::Sequence: return kSequence;
    case rag::KvBlockOwner::Prefix: return kPrefix;
    case rag::KvBlockOwner::Subgraph: return kSubgraph;
    case rag::KvBlockOwner::Passage: return kPassage;
  }
  return kFree;
}

KvHeatmap::KvHeatmap(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* bar = new QHBoxLayout;
  m_status = new QLabel;
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  // Its text changes twice a second during a run: a width that followed it would re-lay out the docks.
  m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  m_stackBox = new QCheckBox(tr("Stack by owner"));
  m_stackBox->setToolTip(tr("Show each moment's share of the pool per owner instead of the blocks in index order"));
  auto* exportButton = new QToolButton;
  exportButton->setText(tr("Export…"));
  exportButton->setToolTip(tr("Save the plots as PNG or SVG"));
  connect(exportButton, &QToolButton::clicked, this, &KvHeatmap::exportDialog);
  connect(m_stackBox, &QCheckBox::toggled, this, [this](bool on) {
    setBlockLayout(on ? KvHeatSeries::Layout::ByOwner : KvHeatSeries::Layout::ByBlock);
  });
  bar->addWidget(m_status, 1);
  bar->addWidget(m_stackBox);
  bar->addWidget(exportButton);
  layout->addLayout(bar);

  // The owners' colours with their block counts, as a legend line (the map's colours are
  // categories, not a scale).
  m_legend = new QLabel;
  m_legend->setTextFormat(Qt::RichText);
  m_legend->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  layout->addWidget(m_legend);

  m_plot = new QCustomPlot;
  m_plot->setObjectName(QStringLiteral("kvHeatPlot"));  // named in the stall meter's events
  m_plot->setMinimumSize(320, 240);
  layout->addWidget(m_plot, 1);
  connect(m_plot, &QCustomPlot::afterReplot, this,
          [this] { m_longestReplotMs = std::max(m_longestReplotMs, m_plot->replotTime()); });

  // [block map] over [hit rates]; both time axes share their margins, so their seconds line up.
  QCPLayoutGrid* grid = m_plot->plotLayout();
  m_mapRect = m_plot->axisRect();
  m_rateRect = new QCPAxisRect(m_plot, true);
  grid->addElement(1, 0, m_rateRect);
  grid->setRowStretchFactors({3.0, 1.2});
  auto* columns = new QCPMarginGroup(m_plot);
  m_mapRect->setMarginGroup(QCP::msLeft | QCP::msRight, columns);
  m_rateRect->setMarginGroup(QCP::msLeft | QCP::msRight, columns);
  m_plot->setAutoAddPlottableToLegend(false);

  QCPAxis* time = m_mapRect->axis(QCPAxis::atBottom);
  QCPAxis* blocks = m_mapRect->axis(QCPAxis::atLeft);
  time->setLabel(tr("time (s)"));
  blocks->setRangeReversed(true);  // block 0 (or the first owner's share) on top
  m_map = new QCPColorMap(time, blocks);
  m_map->setGradient(ownerGradient());
  m_map->setDataRange(QCPRange(0, rag::kKvBlockOwnerCount - 1));
  m_map->setInterpolate(false);
  m_map->setTightBoundary(false);
  m_map->setName(tr("KV blocks by owner"));

  QCPAxis* rateTime = m_rateRect->axis(QCPAxis::atBottom);
  QCPAxis* rate = m_rateRect->axis(QCPAxis::atLeft);
  rateTime->setLabel(tr("time (s)"));
  rate->setLabel(tr("hit rate (%)"));
  rate->setRange(0, 105);
  connect(time, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), rateTime,
          qOverload<const QCPRange&>(&QCPAxis::setRange));
  auto addRate = [&](const QString& name, const QColor& colour, qreal width) {
    QCPGraph* g = m_plot->addGraph(rateTime, rate);
    g->setName(name);
    g->setPen(QPen(colour, width));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
    return g;
  };
  m_prefixHit = addRate(tr("prefix cache"), kPrefix, 2);
  m_passageHit = addRate(tr("passage blocks"), kPassage, 1.5);
  m_subgraphHit = addRate(tr("subgraphs"), kSubgraph, 1.5);
  m_plot->legend->setVisible(true);
  m_mapRect->insetLayout()->take(m_plot->legend);
  m_rateRect->insetLayout()->addElement(m_plot->legend, Qt::AlignBottom | Qt::AlignRight);
  m_plot->legend->setIconSize(16, 8);

  applyPalette();
  rebuild();
}

void KvHeatmap::setWindowSamples(int samples) {
  m_series.setCapacity(samples);
  rebuild();
}

void KvHeatmap::setBlockLayout(KvHeatSeries::Layout layout) {
  if (layout == m_layout) return;
  m_layout = layout;
  m_stackBox->setChecked(layout == KvHeatSeries::Layout::ByOwner);
  rebuild();
}

void KvHeatmap::addSample(const rag::KvBlockMap& map, const rag::ServingStats& stats) {
  if (!m_clock.isValid()) m_clock.start();
  addSampleAt(map, stats, m_clock.nsecsElapsed() / 1e9);
}

void KvHeatmap::addSampleAt(const rag::KvBlockMap& map, const rag::ServingStats& stats, double seconds) {
  const double cpu0 = GuiStallMeter::threadCpuMs();
  if (m_series.add(map, stats, seconds) != KvHeatSeries::AddResult::Skipped) rebuild();
  m_longestSampleMs = std::max(m_longestSampleMs, GuiStallMeter::threadCpuMs() - cpu0);
}

void KvHeatmap::clear() {
  m_series.clear();
  m_clock.invalidate();
  m_longestSampleMs = m_longestReplotMs = 0;
  rebuild();
}

QString KvHeatmap::legendText() const {
  const KvHeatSample* s = m_series.latest();
  QStringList swatches;
  for (rag::KvBlockOwner o : kLegendOrder) {
    const QString count = s ? QStringLiteral("%1 ").arg(s->count(o)) : QString();
    swatches << QStringLiteral("<span style='color:%1'>&#9632;</span>&nbsp;%2%3")
                    .arg(ownerColour(o).name(), count, ownerLabel(o));
  }
  return swatches.join(QStringLiteral("&nbsp;&nbsp; "));
}

QString KvHeatmap::poolStatus() const {
  const KvHeatSample* s = m_series.latest();
  if (!s) return tr("Waiting for the KV pool's blocks from the engine…");
  QString text = tr("%1 KV blocks, %2 in use").arg(s->blocks()).arg(s->blocks() - s->count(rag::KvBlockOwner::Free));
  if (s->hostTotal > 0) text += tr(" · host tier %1 / %2").arg(s->hostUsed).arg(s->hostTotal);
  if (s->prefixHitRate >= 0) text += tr(" · prefix hit rate %1 %").arg(s->prefixHitRate * 100, 0, 'f', 1);
  return text;
}

void KvHeatmap::rebuild() {
  fillMap();
  fillRates();
  QCPAxis* blocks = m_mapRect->axis(QCPAxis::atLeft);
  blocks->setLabel(m_layout == KvHeatSeries::Layout::ByBlock ? tr("KV block") : tr("blocks, stacked by owner"));
  blocks->setTickLabels(m_series.blockCount() > 0);
  m_status->setText(poolStatus());
  m_legend->setText(legendText());
  replotWhenShown(m_plot);
}

void KvHeatmap::fillMap() {
  const int n = m_series.sampleCount();
  QCPColorMapData* data = m_map->data();
  QCPAxis* time = m_mapRect->axis(QCPAxis::atBottom);
  QCPAxis* blocks = m_mapRect->axis(QCPAxis::atLeft);
  const int rows = m_series.rowCount(kMaxRows);
  if (n == 0 || rows == 0) {
    data->setSize(0, 0);
    time->setRange(0, 10);
    blocks->setRange(0, 1);
    return;
  }
  const int per = m_series.blocksPerRow(kMaxRows);
  // Column i spans from the previous report to report i (the first one, half a report interval
  // back); a single report is drawn twice so it has a width.
  const double step = n > 1 ? (m_series.sample(n - 1).timeSeconds - m_series.sample(0).timeSeconds) / (n - 1) : 0.5;
  const int columns = std::max(n, 2);
  auto centre = [&](int i) {
    const double t = m_series.sample(std::min(i, n - 1)).timeSeconds;
    return n == 1 ? t - step * (1 - i) : t - step / 2;
  };
  data->setSize(columns, rows);
  // Rows in block units: row r is blocks [r·per, (r+1)·per).
  data->setRange(QCPRange(centre(0), centre(columns - 1)), QCPRange(per * 0.5, per * (rows - 0.5)));
  for (int i = 0; i < columns; ++i) {
    const std::vector<uint8_t> col = m_series.column(std::min(i, n - 1), kMaxRows, m_layout);
    for (int r = 0; r < rows; ++r) data->setCell(i, r, col[static_cast<size_t>(r)]);
  }
  const double first = centre(0) - step / 2;
  time->setRange(first, std::max(m_series.sample(n - 1).timeSeconds, first + 1));
  blocks->setRange(0, static_cast<double>(per) * rows);
}

void KvHeatmap::fillRates() {
  QVector<double> tp, p, ts, s, tg, g;
  for (int i = 0; i < m_series.sampleCount(); ++i) {
    const KvHeatSample& x = m_series.sample(i);
    // Intervals where nothing was looked up have no rate: no point (the line bridges them).
    if (x.prefixHitRate >= 0) tp.push_back(x.timeSeconds), p.push_back(x.prefixHitRate * 100);
    if (x.passageHitRate >= 0) ts.push_back(x.timeSeconds), s.push_back(x.passageHitRate * 100);
    if (x.subgraphHitRate >= 0) tg.push_back(x.timeSeconds), g.push_back(x.subgraphHitRate * 100);
  }
  m_prefixHit->setData(tp, p, true);
  m_passageHit->setData(ts, s, true);
  m_subgraphHit->setData(tg, g, true);
  m_plot->legend->clearItems();
  m_prefixHit->addToLegend();  // always named, so an empty plot says what it is waiting for
  if (!ts.isEmpty()) m_passageHit->addToLegend();
  if (!tg.isEmpty()) m_subgraphHit->addToLegend();
}

void KvHeatmap::applyPalette() {
  stylePlot(m_plot, palette());  // both rects, their axes and the legend in the rate rect
}

bool KvHeatmap::event(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) {
    applyPalette();
    replotWhenShown(m_plot);
  }
  return QWidget::event(e);
}

bool KvHeatmap::savePng(const QString& path, int width, int height) {
  QSize size = m_plot->isVisible() ? m_plot->size() : QSize(900, 600);
  if (width > 0) size.setWidth(width);
  if (height > 0) size.setHeight(height);
  return savePlot(m_plot, path, size);
}

void KvHeatmap::exportDialog() {
  QString error;
  exportPlotDialog(this, m_plot, QStringLiteral("kv-heat.png"), &error);
  if (!error.isEmpty()) m_status->setText(error);
}

}  // namespace ragwb
