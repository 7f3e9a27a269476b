// KvHeatSeries: the data half of the KV heatmap (no widgets). Each engine report is a map of who
// holds every compute block of the KV pool (rag::KvBlockMap) and the serving counters; the series
// keeps the last `capacity` reports as samples, each with the interval's hit rates (the
// cumulative token counters of consecutive reports diffed).
//
//   KvHeatSeries series(120);
//   series.add(map, stats, 0.0);    // Appended: the first sample (no interval: no hit rates)
//   series.add(map2, stats2, 0.5);  // sample(1).prefixHitRate = hits / tokens offered in (0, 0.5]
//   std::vector<uint8_t> col = series.column(1, 256, KvHeatSeries::Layout::ByBlock);  // one per row
//
// An empty map (the engine has not taken one yet) adds nothing (Skipped). A map of another size
// or a counter that went down (a reloaded engine) cannot continue the window: the series starts
// again from that report (Restarted).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "rag/engine.h"

namespace ragwb {

struct KvHeatSample {
  double timeSeconds = 0;      // when the report came, on the caller's clock
  double intervalSeconds = 0;  // since the previous report (0 for a window's first)
  std::vector<uint8_t> owners;  // [compute blocks] rag::KvBlockOwner per block
  std::array<int32_t, rag::kKvBlockOwnerCount> counts{};  // blocks per owner
  int32_t hostUsed = 0, hostTotal = 0;
  // Over the interval: tokens found / tokens looked up, in [0, 1]; -1 when none were looked up
  // (or for a window's first sample). Prefix: prompts against the prefix cache; passage and
  // subgraph: Block-Attention's passage blocks and DepCache's subgraphs (their segments).
  double prefixHitRate = -1;
  double passageHitRate = -1;
  double subgraphHitRate = -1;
  int64_t prefixQueriedTokens = 0;  // looked up in the interval

  int32_t blocks() const { return static_cast<int32_t>(owners.size()); }
  int32_t count(rag::KvBlockOwner o) const { return counts[static_cast<size_t>(o)]; }
};

class KvHeatSeries {
public:
  enum class AddResult { Appended, Restarted, Skipped };
  // How a column's rows show the pool: ByBlock, row r holds blocks [r·bin, (r+1)·bin) and shows
  // the owner most of them have (ties: the later KvBlockOwner, so a lone used block in a free bin
  // is not hidden by free ones of the same number); ByOwner, the column is the pool's share per
  // owner stacked (sequence, prefix, subgraph, passage, then free at the bottom).
  enum class Layout { ByBlock, ByOwner };

  explicit KvHeatSeries(int capacity = 120);

  AddResult add(const rag::KvBlockMap& map, const rag::ServingStats& stats, double timeSeconds);
  void clear();

  int capacity() const { return m_capacity; }
  void setCapacity(int capacity);  // drops the oldest samples beyond it
  int sampleCount() const { return static_cast<int>(m_samples.size()); }
  int blockCount() const { return m_samples.empty() ? 0 : m_samples.back().blocks(); }
  const KvHeatSample& sample(int i) const { return m_samples[static_cast<size_t>(i)]; }  // oldest first
  const KvHeatSample* latest() const { return m_samples.empty() ? nullptr : &m_samples.back(); }

  // Blocks per display row when the pool is shown in `rows` rows (ceil(blocks / rows), at least 1).
  int blocksPerRow(int rows) const;
  // Rows actually used for at most `maxRows`: ceil(blocks / blocksPerRow(maxRows)).
  int rowCount(int maxRows) const;
  // Sample i's owner per row (rowCount(maxRows) entries), top row first.
  std::vector<uint8_t> column(int i, int maxRows, Layout layout) const;

private:
  struct Counters {
    int64_t prefixQueried = 0, prefixHit = 0;
    int64_t blockTokens = 0, blockHit = 0;
    int64_t depTokens = 0, depHit = 0;
  };
  static Counters countersOf(const rag::ServingStats& s);

  int m_capacity;
  bool m_haveLast = false;
  Counters m_last;
  std::deque<KvHeatSample> m_samples;
};

}  // namespace ragwb
