// ClusterHeatSeries: the data half of the cluster heatmap (no widgets). The engine reports
// cumulative visit counters per IVF cluster (rag::ClusterHeat::accesses, counted since the
// index loaded); the series turns consecutive reports into per-interval visit deltas and keeps
// the last `capacity` intervals, with each interval's GPU-cache residency and hit rate.
//
//   ClusterHeatSeries series(120);
//   series.add(heat, stats, 0.0);    // Baseline: the first report only sets the counters
//   series.add(heat2, stats2, 0.5);  // Appended: sample(0).visits[c] = visits of c in (0, 0.5]
//   std::vector<int> rows = series.displayOrder(/*byHeat=*/true);  // hottest cluster first
//
// A counter that goes down (another engine, a reloaded index) or a different cluster count
// cannot be diffed: the series restarts from that report as a new baseline (Restarted).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "rag/engine.h"

namespace ragwb {

struct ClusterHeatSample {
  double timeSeconds = 0;      // end of the interval, on the caller's clock
  double intervalSeconds = 0;  // length of the interval
  std::vector<uint32_t> visits;    // [clusters] visits during the interval
  std::vector<uint8_t> residency;  // [clusters] at the end, or empty (no GPU cluster cache)
  uint64_t totalVisits = 0;    // sum of visits
  bool gpuCacheActive = false;
  double hitRate = 0;          // ServingStats::gpuCacheHitRate at the end of the interval

  double visitsPerSecond() const { return intervalSeconds > 0 ? totalVisits / intervalSeconds : 0; }
};

class ClusterHeatSeries {
public:
  enum class AddResult { Baseline, Appended, Restarted };
  // Residency codes of rag::ClusterHeat::residency.
  enum Residency : uint8_t { Absent = 0, SwappingIn = 1, Resident = 2, SwappingOut = 3 };

  explicit ClusterHeatSeries(int capacity = 120);

  // Diffs `heat` against the previous report taken at an earlier `timeSeconds`.
  AddResult add(const rag::ClusterHeat& heat, const rag::ServingStats& stats, double timeSeconds);
  void clear();

  int capacity() const { return m_capacity; }
  void setCapacity(int capacity);  // drops the oldest samples beyond it
  int clusterCount() const { return static_cast<int>(m_last.size()); }
  int sampleCount() const { return static_cast<int>(m_samples.size()); }
  bool hasBaseline() const { return m_haveBaseline; }
  const ClusterHeatSample& sample(int i) const { return m_samples[static_cast<size_t>(i)]; }  // oldest first
  const ClusterHeatSample* latest() const { return m_samples.empty() ? nullptr : &m_samples.back(); }
  // Residency of the last report (the baseline's when no interval exists yet); empty without
  // a GPU cluster cache.
  const std::vector<uint8_t>& currentResidency() const { return m_lastResidency; }

  // Largest per-interval visit count of any cluster in the window (0 when empty).
  uint32_t maxDelta() const;
  // [clusters] visits over the whole window.
  std::vector<uint64_t> windowTotals() const;
  // The n clusters with the most visits in the window, hottest first (ties: lower index first;
  // clusters never visited are left out).
  std::vector<int> hottest(int n) const;
  // Row r of a display shows cluster displayOrder(byHeat)[r]: the cluster index itself, or
  // clusters ranked by window visits, hottest first (ties by index), so hot ones sit together.
  std::vector<int> displayOrder(bool byHeat) const;

private:
  int m_capacity;
  bool m_haveBaseline = false;
  double m_lastTime = 0;
  std::vector<uint64_t> m_last;  // counters of the last report
  std::vector<uint8_t> m_lastResidency;
  std::deque<ClusterHeatSample> m_samples;
};

}  // namespace ragwb
