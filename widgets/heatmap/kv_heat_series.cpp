#include "heatmap/kv_heat_series.h"

#include <algorithm>

namespace ragwb {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

double rateOf(int64_t hit, int64_t queried) {
  return queried > 0 ? std::clamp(static_cast<double>(hit) / static_cast<double>(queried), 0.0, 1.0) : -1.0;
}

}  // namespace

KvHeatSeries::KvHeatSeries(int capacity) : m_capacity(std::max(capacity, 1)) {}

KvHeatSeries::Counters KvHeatSeries::countersOf(const rag::ServingStats& s) {
  return {s.prefixQueriedTokens, s.prefixHitTokens, s.blockTokens, s.blockHitTokens, s.depSegmentTokens, s.depHitTokens};
}

KvHeatSeries::AddResult KvHeatSeries::add(const rag::KvBlockMap& map, const rag::ServingStats& stats,
                                          double timeSeconds) {
  if (map.owners.empty()) return AddResult::Skipped;
  const Counters now = countersOf(stats);
  const Counters& was = m_last;
  const bool wentDown = now.prefixQueried < was.prefixQueried || now.prefixHit < was.prefixHit ||
                        now.blockTokens < was.blockTokens || now.blockHit < was.blockHit ||
                        now.depTokens < was.depTokens || now.depHit < was.depHit;
  const bool restart = !m_samples.empty() && (wentDown || map.owners.size() != m_samples.back().owners.size() ||
                                              timeSeconds < m_samples.back().timeSeconds);
  if (restart) m_samples.clear();
  const bool interval = m_haveLast && !restart && !m_samples.empty();

  KvHeatSample s;
  s.timeSeconds = timeSeconds;
  s.owners = map.owners;
  for (uint8_t o : s.owners) ++s.counts[o < rag::kKvBlockOwnerCount ? o : 0];
  s.hostUsed = map.hostUsed;
  s.hostTotal = map.hostTotal;
  if (interval) {
    s.intervalSeconds = timeSeconds - m_samples.back().timeSeconds;
    s.prefixQueriedTokens = now.prefixQueried - was.prefixQueried;
    s.prefixHitRate = rateOf(now.prefixHit - was.prefixHit, s.prefixQueriedTokens);
    s.passageHitRate = rateOf(now.blockHit - was.blockHit, now.blockTokens - was.blockTokens);
    s.subgraphHitRate = rateOf(now.depHit - was.depHit, now.depTokens - was.depTokens);
  }
  m_last = now;
  m_haveLast = true;
  m_samples.push_back(std::move(s));
  while (static_cast<int>(m_samples.size()) > m_capacity) m_samples.pop_front();
  return restart ? AddResult::Restarted : AddResult::Appended;
}

void KvHeatSeries::clear() {
  m_samples.clear();
  m_haveLast = false;
  m_last = {};
}

void KvHeatSeries::setCapacity(int capacity) {
  m_capacity = std::max(capacity, 1);
  while (static_cast<int>(m_samples.size()) > m_capacity) m_samples.pop_front();
}

int KvHeatSeries::blocksPerRow(int rows) const {
  const int blocks = blockCount();
  rows = std::max(rows, 1);
  return std::max(1, (blocks + rows - 1) / rows);
}

int KvHeatSeries::rowCount(int maxRows) const {
  const int per = blocksPerRow(maxRows);
  return (blockCount() + per - 1) / per;
}

std::vector<uint8_t> KvHeatSeries::column(int i, int maxRows, Layout layout) const {
  const KvHeatSample& s = sample(i);
  const int rows = rowCount(maxRows);
  const int per = blocksPerRow(maxRows);
  std::vector<uint8_t> out(static_cast<size_t>(rows), static_cast<uint8_t>(rag::KvBlockOwner::Free));
  const int blocks = s.blocks();
  if (blocks == 0 || rows == 0) return out;
  if (layout == Layout::ByBlock) {
    for (int r = 0; r < rows; ++r) {
      std::array<int, rag::kKvBlockOwnerCount> n{};
      const int end = std::min(blocks, (r + 1) * per);
      for (int b = r * per; b < end; ++b) {
        const uint8_t o = s.owners[static_cast<size_t>(b)];
        ++n[o < rag::kKvBlockOwnerCount ? o : 0];
      }
      int best = 0;
      for (int o = 1; o < rag::kKvBlockOwnerCount; ++o)
        if (n[static_cast<size_t>(o)] >= n[static_cast<size_t>(best)] && n[static_cast<size_t>(o)] > 0) best = o;
      out[static_cast<size_t>(r)] = static_cast<uint8_t>(best);
    }
    return out;
  }
  // ByOwner: each owner gets its share of the rows, rounded so the shares add up to `rows`
  // (largest remainder), and an owner with any block gets at least one row while rows last.
  static constexpr rag::KvBlockOwner kStack[] = {rag::KvBlockOwner::Sequence, rag::KvBlockOwner::Prefix,
                                                 rag::KvBlockOwner::Subgraph, rag::KvBlockOwner::Passage,
                                                 rag::KvBlockOwner::Free};
  std::array<int, rag::kKvBlockOwnerCount> share{};
  std::array<double, rag::kKvBlockOwnerCount> exact{};
  int given = 0;
  for (rag::KvBlockOwner o : kStack) {
    const size_t k = static_cast<size_t>(o);
    exact[k] = static_cast<double>(s.count(o)) * rows / blocks;
    share[k] = static_cast<int>(exact[k]);
    if (share[k] == 0 && s.count(o) > 0) share[k] = 1;
    given += share[k];
  }
  // Hand out the remaining rows to the owners furthest below their exact share; when the
  // at-least-one rule overshot, take rows back from those furthest above it.
  while (given != rows) {
    const bool add = given < rows;
    size_t best = kNone;
    for (rag::KvBlockOwner o : kStack) {
      const size_t k = static_cast<size_t>(o);
      if (!add && share[k] == 0) continue;
      const double gap = add ? exact[k] - share[k] : share[k] - exact[k];
      if (best == kNone || gap > (add ? exact[best] - share[best] : share[best] - exact[best])) best = k;
    }
    share[best] += add ? 1 : -1;
    given += add ? 1 : -1;
  }
  int r = 0;
  for (rag::KvBlockOwner o : kStack)
    for (int k = 0; k < share[static_cast<size_t>(o)] && r < rows; ++k) out[static_cast<size_t>(r++)] = static_cast<uint8_t>(o);
  return out;
}

}  // namespace ragwb
