// The cluster heatmap: per-interval deltas from cumulative counters (restart when a counter
// goes down), ranking by heat, GPU-residency marking, the hit-rate plot, offscreen rendering
// and PNG/SVG export. With RAGWB_SCREENSHOT_DIR set, renders realistic heat there for review.
#include <QtTest>

#include <QImage>
#include <algorithm>
#include <cmath>
#include <numeric>
#include "plot/qcustomplot_include.h"
#include <random>

#include "heatmap/cluster_heat_series.h"
#include "heatmap/cluster_heatmap.h"

using ragwb::ClusterHeatSeries;

namespace {

rag::ClusterHeat heat(std::vector<uint64_t> accesses, std::vector<uint8_t> residency = {}) {
  return rag::ClusterHeat{std::move(accesses), std::move(residency)};
}

rag::ServingStats cacheStats(double hitRate) {
  rag::ServingStats s;
  s.gpuCacheActive = true;
  s.gpuCacheHitRate = hitRate;
  return s;
}

// Realistic engine reports: Zipf-like visits over `clusters` IVF clusters whose hot set drifts
// over time, and a GPU cache that holds the recently hottest clusters (with a few swapping).
class HeatGenerator {
public:
  HeatGenerator(int clusters, bool gpuCache) : m_counters(clusters, 0), m_gpu(gpuCache), m_rng(7) {
    for (int c = 0; c < clusters; ++c) m_counters[c] = m_rng() % 50;  // the index served before
  }

  std::pair<rag::ClusterHeat, rag::ServingStats> next() {
    const int clusters = static_cast<int>(m_counters.size());
    const double drift = m_step * 1.7;  // hot clusters move by ~1.7 ranks per report
    std::vector<double> weight(clusters);
    double total = 0;
    for (int c = 0; c < clusters; ++c) {
      // Rank of cluster c in a permutation that slides with time, plus a fixed hot pair.
      const int rank = static_cast<int>(std::fmod(c * 37.0 + drift + 1024 * 8, clusters));
      weight[c] = 1.0 / std::pow(rank + 1.0, 1.1);
      if (c == 3 || c == 600) weight[c] += 0.04;
      total += weight[c];
    }
    const int retrievals = 12 + static_cast<int>(m_rng() % 6);  // ~30 requests/s, nprobe 128
    std::discrete_distribution<int> pick(weight.begin(), weight.end());
    std::vector<uint32_t> visits(clusters, 0);
    for (int v = 0; v < retrievals * 128; ++v) ++visits[pick(m_rng)];
    for (int c = 0; c < clusters; ++c) m_counters[c] += visits[c];

    rag::ClusterHeat h;
    h.accesses = m_counters;
    rag::ServingStats s;
    if (m_gpu) {
      // The cache holds the 96 clusters with the highest expected visits, one report late.
      const std::vector<double>& known = m_lastWeight.empty() ? weight : m_lastWeight;
      std::vector<int> order(clusters);
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return known[a] > known[b]; });
      h.residency.assign(clusters, 0);
      double served = 0;
      for (int i = 0; i < 96; ++i) {
        h.residency[order[i]] = i < 90 ? 2 : 1;
        served += weight[order[i]];
      }
      for (int i = 96; i < 100; ++i) h.residency[order[i]] = 3;
      s.gpuCacheActive = true;
      s.gpuCacheHitRate = served / total;
    }
    m_lastWeight = weight;
    ++m_step;
    return {h, s};
  }

private:
  std::vector<uint64_t> m_counters;
  std::vector<double> m_lastWeight;
  bool m_gpu;
  std::mt19937 m_rng;
  int m_step = 0;
};

// Shows `w` offscreen and feeds it `reports` realistic reports (two a second, 1024 clusters).
bool showWithHeat(ragwb::ClusterHeatmap& w, bool gpuCache, int reports) {
  w.resize(1000, 700);
  w.show();
  HeatGenerator gen(1024, gpuCache);
  for (int i = 0; i < reports; ++i) {
    auto [h, s] = gen.next();
    w.addSampleAt(h, s, 0.5 * i);
  }
  return QTest::qWaitForWindowExposed(&w);
}

void saveScreenshot(QWidget& w, const QString& name) {
  const QString dir = qEnvironmentVariable("RAGWB_SCREENSHOT_DIR");
  QCoreApplication::processEvents();  // the queued replot
  if (!dir.isEmpty()) QVERIFY(w.grab().save(dir + "/" + name));
}

}  // namespace

class TestHeatmap : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

private Q_SLOTS:
  void seriesTurnsCountersIntoDeltas() {
    ClusterHeatSeries series(3);
    QCOMPARE(series.add(heat({10, 0, 5}), {}, 0.0), ClusterHeatSeries::AddResult::Baseline);
    QCOMPARE(series.sampleCount(), 0);  // the first report has nothing to diff against
    QCOMPARE(series.clusterCount(), 3);
    QCOMPARE(series.add(heat({14, 0, 6}), {}, 0.5), ClusterHeatSeries::AddResult::Appended);
    QCOMPARE(series.add(heat({14, 9, 26}), {}, 1.5), ClusterHeatSeries::AddResult::Appended);
    QCOMPARE(series.sampleCount(), 2);
    QCOMPARE(series.sample(0).visits, (std::vector<uint32_t>{4, 0, 1}));
    QCOMPARE(series.sample(1).visits, (std::vector<uint32_t>{0, 9, 20}));
    QCOMPARE(series.sample(1).totalVisits, uint64_t{29});
    QCOMPARE(series.sample(1).intervalSeconds, 1.0);
    QCOMPARE(series.sample(1).visitsPerSecond(), 29.0);
    QCOMPARE(series.maxDelta(), 20u);
    QCOMPARE(series.windowTotals(), (std::vector<uint64_t>{4, 9, 21}));
    QCOMPARE(series.hottest(2), (std::vector<int>{2, 1}));

    // The window keeps the newest `capacity` intervals.
    QVERIFY(series.add(heat({15, 9, 26}), {}, 2.0) == ClusterHeatSeries::AddResult::Appended);
    QVERIFY(series.add(heat({16, 9, 26}), {}, 2.5) == ClusterHeatSeries::AddResult::Appended);
    QCOMPARE(series.sampleCount(), 3);
    QCOMPARE(series.sample(0).visits, (std::vector<uint32_t>{0, 9, 20}));
    series.setCapacity(1);
    QCOMPARE(series.sampleCount(), 1);
    QCOMPARE(series.maxDelta(), 1u);

    series.clear();
    QCOMPARE(series.sampleCount(), 0);
    QVERIFY(!series.hasBaseline());
    QCOMPARE(series.add(heat({1, 1, 1}), {}, 3.0), ClusterHeatSeries::AddResult::Baseline);
  }

  void counterGoingDownRestartsTheSeries() {
    ClusterHeatSeries series;
    series.add(heat({100, 100}), {}, 0.0);
    series.add(heat({110, 130}), {}, 0.5);
    QCOMPARE(series.sampleCount(), 1);
    // A new engine: counters start again near zero. No negative or wrapped deltas.
    QCOMPARE(series.add(heat({3, 200}), {}, 1.0), ClusterHeatSeries::AddResult::Restarted);
    QCOMPARE(series.sampleCount(), 0);
    QCOMPARE(series.maxDelta(), 0u);
    QCOMPARE(series.add(heat({5, 201}), {}, 1.5), ClusterHeatSeries::AddResult::Appended);
    QCOMPARE(series.sample(0).visits, (std::vector<uint32_t>{2, 1}));
    // Another index (a different cluster count) restarts too.
    QCOMPARE(series.add(heat({5, 201, 7}), {}, 2.0), ClusterHeatSeries::AddResult::Restarted);
    QCOMPARE(series.clusterCount(), 3);
    QCOMPARE(series.sampleCount(), 0);
  }

  void sortingByHeatPutsHotClustersTogether() {
    ClusterHeatSeries series;
    series.add(heat({0, 0, 0, 0, 0}), {}, 0.0);
    series.add(heat({1, 50, 0, 9, 1}), {}, 0.5);
    QCOMPARE(series.displayOrder(false), (std::vector<int>{0, 1, 2, 3, 4}));
    // Ties (clusters 0 and 4; cluster 2 unvisited) keep index order.
    QCOMPARE(series.displayOrder(true), (std::vector<int>{1, 3, 0, 4, 2}));
    QCOMPARE(series.hottest(10), (std::vector<int>{1, 3, 0, 4}));  // never-visited ones left out

    ragwb::ClusterHeatmap w;
    w.setSortByHeat(true);
    w.addSampleAt(heat({0, 0, 0, 0, 0}), {}, 0.0);
    w.addSampleAt(heat({1, 50, 0, 9, 1}), {}, 0.5);
    QCPColorMapData* d = w.heatMap()->data();
    QCOMPARE(d->valueSize(), 5);
    QCOMPARE(d->cell(0, 0), 50.0);  // row 0: the hottest cluster
    QCOMPARE(d->cell(0, 1), 9.0);
    QVERIFY(std::isnan(d->cell(0, 4)));  // no visits: not painted
    w.setSortByHeat(false);
    QCOMPARE(w.heatMap()->data()->cell(0, 0), 1.0);
    QCOMPARE(w.heatMap()->data()->cell(0, 1), 50.0);
  }

  void gpuResidentClustersAreMarked() {
    ragwb::ClusterHeatmap w;
    w.setSortByHeat(false);
    w.addSampleAt(heat({0, 0, 0, 0}), {}, 0.0);
    w.addSampleAt(heat({1, 2, 3, 4}), {}, 0.5);
    QVERIFY(w.cacheStatus().contains("no GPU cluster cache"));
    QVERIFY(!w.residencyStrip()->keyAxis()->axisRect()->visible());

    w.clear();
    w.addSampleAt(heat({0, 0, 0, 0}, {0, 2, 1, 3}), cacheStats(0.25), 0.0);
    w.addSampleAt(heat({1, 8, 3, 4}, {0, 2, 2, 0}), cacheStats(0.5), 0.5);
    QVERIFY(w.residencyStrip()->keyAxis()->axisRect()->visible());
    QCPColorMapData* strip = w.residencyStrip()->data();
    QCOMPARE(strip->valueSize(), 4);
    QVERIFY(std::isnan(strip->cell(0, 0)));  // absent: not marked
    QCOMPARE(strip->cell(0, 1), 2.0);        // resident
    QCOMPARE(strip->cell(0, 2), 2.0);
    QVERIFY(std::isnan(strip->cell(0, 3)));
    QVERIFY(w.cacheStatus().contains("2 resident"));
    QVERIFY(w.cacheStatus().contains("hit rate 50.0 %"));
    // Ranked by heat, the strip follows the rows: cluster 1 (8 visits) is row 0.
    w.setSortByHeat(true);
    QCOMPARE(w.residencyStrip()->data()->cell(0, 0), 2.0);
    QVERIFY(std::isnan(w.residencyStrip()->data()->cell(0, 1)));  // cluster 3, absent now
  }

  void hitRateGraphGetsPoints() {
    ragwb::ClusterHeatmap w;
    for (int i = 0; i < 5; ++i) w.addSampleAt(heat({10u * i, 5u * i}, {2, 0}), cacheStats(0.1 * i), 0.5 * i);
    QCOMPARE(w.hitRateGraph()->dataCount(), 4);  // the first report is the baseline
    QCOMPARE(w.hitRateGraph()->data()->at(3)->key, 2.0);
    QCOMPARE(w.hitRateGraph()->data()->at(3)->value, 40.0);  // percent
    QCOMPARE(w.visitRateGraph()->dataCount(), 4);
    QCOMPARE(w.visitRateGraph()->data()->at(0)->value, 30.0);  // 15 visits in 0.5 s
    QVERIFY(w.plot()->legend->hasItemWithPlottable(w.hitRateGraph()));
    // Without a cache there is no hit rate, but there are still visits.
    w.clear();
    for (int i = 0; i < 3; ++i) w.addSampleAt(heat({10u * i}), {}, 0.5 * i);
    QCOMPARE(w.hitRateGraph()->dataCount(), 0);
    QVERIFY(!w.plot()->legend->hasItemWithPlottable(w.hitRateGraph()));
    QCOMPARE(w.visitRateGraph()->dataCount(), 2);
  }

  void rendersOffscreenAndExports() {
    ragwb::ClusterHeatmap w;
    QVERIFY(showWithHeat(w, true, 121));
    QCOMPARE(w.series().sampleCount(), 120);
    QCOMPARE(w.heatMap()->data()->keySize(), 120);
    QCOMPARE(w.heatMap()->data()->valueSize(), 1024);
    QVERIFY(w.series().maxDelta() > 20);

    const QImage shot = w.grab().toImage();
    QVERIFY(!shot.isNull());
    // The map is drawn: many distinct colours, not a blank plot.
    QSet<QRgb> colours;
    for (int y = 0; y < shot.height(); y += 7)
      for (int x = 0; x < shot.width(); x += 7) colours.insert(shot.pixel(x, y));
    QVERIFY2(colours.size() > 50, qPrintable(QString::number(colours.size())));
    saveScreenshot(w, "heatmap-gpu.png");

    const QString png = m_dir.filePath("heat.png");
    const QString svg = m_dir.filePath("heat.svg");
    QVERIFY(w.savePng(png, 800, 500));
    QCOMPARE(QImage(png).size(), QSize(800, 500));
    QVERIFY(w.saveSvg(svg));
    QFile f(svg);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray text = f.readAll();
    QVERIFY(text.contains("<svg"));
    QVERIFY(text.contains("<image"));  // the colour map
    QVERIFY(!w.savePng(m_dir.filePath("missing/dir/heat.png")));

    ragwb::ClusterHeatmap cpu;
    QVERIFY(showWithHeat(cpu, false, 80));
    cpu.setSortByHeat(false);
    QVERIFY(cpu.cacheStatus().contains("no GPU cluster cache"));
    saveScreenshot(cpu, "heatmap-nocache.png");
    QPalette dark;
    dark.setColor(QPalette::Window, QColor(0x2b, 0x2b, 0x2b));
    dark.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x1e));
    dark.setColor(QPalette::WindowText, QColor(0xe0, 0xe0, 0xe0));
    dark.setColor(QPalette::Text, QColor(0xe0, 0xe0, 0xe0));
    dark.setColor(QPalette::Mid, QColor(0x60, 0x60, 0x60));
    w.setPalette(dark);
    w.plot()->replot();
    saveScreenshot(w, "heatmap-gpu-dark.png");
  }
};

QTEST_MAIN(TestHeatmap)
#include "test_heatmap.moc"
