#include "heatmap/cluster_heat_series.h"

#include <algorithm>
#include <numeric>

namespace ragwb {

ClusterHeatSeries::ClusterHeatSeries(int capacity) : m_capacity(std::max(1, capacity)) {}

ClusterHeatSeries::AddResult ClusterHeatSeries::add(const rag::ClusterHeat& heat,
                                                     const rag::ServingStats& stats, double timeSeconds) {
  const std::vector<uint64_t>& now = heat.accesses;
  bool diffable = m_haveBaseline && now.size() == m_last.size() && timeSeconds > m_lastTime;
  for (size_t c = 0; diffable && c < now.size(); ++c) diffable = now[c] >= m_last[c];

  AddResult result = AddResult::Appended;
  if (!diffable) {
    result = m_haveBaseline ? AddResult::Restarted : AddResult::Baseline;
    m_samples.clear();
  } else {
    ClusterHeatSample s;
    s.timeSeconds = timeSeconds;
    s.intervalSeconds = timeSeconds - m_lastTime;
    s.visits.resize(now.size());
    for (size_t c = 0; c < now.size(); ++c) {
      const uint64_t d = now[c] - m_last[c];
      s.visits[c] = static_cast<uint32_t>(std::min<uint64_t>(d, UINT32_MAX));
      s.totalVisits += d;
    }
    s.residency = heat.residency;
    s.gpuCacheActive = stats.gpuCacheActive;
    s.hitRate = stats.gpuCacheHitRate;
    m_samples.push_back(std::move(s));
    while (static_cast<int>(m_samples.size()) > m_capacity) m_samples.pop_front();
  }
  m_haveBaseline = true;
  m_lastTime = timeSeconds;
  m_last = now;
  m_lastResidency = heat.residency;
  return result;
}

void ClusterHeatSeries::clear() {
  m_haveBaseline = false;
  m_lastTime = 0;
  m_last.clear();
  m_lastResidency.clear();
  m_samples.clear();
}

void ClusterHeatSeries::setCapacity(int capacity) {
  m_capacity = std::max(1, capacity);
  while (static_cast<int>(m_samples.size()) > m_capacity) m_samples.pop_front();
}

uint32_t ClusterHeatSeries::maxDelta() const {
  uint32_t m = 0;
  for (const ClusterHeatSample& s : m_samples)
    if (!s.visits.empty()) m = std::max(m, *std::max_element(s.visits.begin(), s.visits.end()));
  return m;
}

std::vector<uint64_t> ClusterHeatSeries::windowTotals() const {
  std::vector<uint64_t> totals(m_last.size(), 0);
  for (const ClusterHeatSample& s : m_samples)
    for (size_t c = 0; c < s.visits.size(); ++c) totals[c] += s.visits[c];
  return totals;
}

namespace {

// Cluster indices, most visits first; stable, so equally hot clusters keep index order and
// rows do not shuffle between frames.
std::vector<int> rankByVisits(const std::vector<uint64_t>& totals) {
  std::vector<int> order(totals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return totals[a] > totals[b]; });
  return order;
}

}  // namespace

std::vector<int> ClusterHeatSeries::displayOrder(bool byHeat) const {
  if (byHeat) return rankByVisits(windowTotals());
  std::vector<int> order(m_last.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<int> ClusterHeatSeries::hottest(int n) const {
  const std::vector<uint64_t> totals = windowTotals();
  std::vector<int> out;
  for (int c : rankByVisits(totals)) {
    if (static_cast<int>(out.size()) >= n || totals[c] == 0) break;
    out.push_back(c);
  }
  return out;
}

}  // namespace ragwb
