// The timeline's data half (no widgets): trace spans per lane, kept sorted for lower_bound
// queries, and the per-frame draw list with pixel folding (Tracy's habit).
//
//   ragwb::LaneModel model;
//   model.setLanes(engine->traceLanes());
//   std::vector<rag::TraceEvent> batch;
//   engine->drainTrace(batch);
//   model.append(batch);                       // emits spansAppended()
//   ragwb::FrameParams f{.t0 = begin, .nsPerPixel = 1e5, .widthPx = 1600};
//   ragwb::DrawList list;
//   model.buildFrame(f, list);                 // what a painter draws for one frame
//
// Layout: each lane holds rows (sub-tracks). A span goes to the first row where it overlaps
// nothing, so concurrent spans of one lane (the "requests" lane runs many requests at once)
// stack instead of hiding each other; past kMaxRows the last row takes the overlap. Each row is
// a vector sorted by begin with a running max of ends beside it, so the spans overlapping
// [t0, t1) are found with two binary searches even when a long span began before t0.
//
// A GUI-thread object: feed it from a queued signal (EngineBridge drains the ring on its own
// thread). Drained events arrive in end order (a zone is pushed when it closes), so a long span
// often arrives after shorter ones that began later: append() inserts in place, which is cheap
// because such inserts land near the tail.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "rag/trace.h"

namespace ragwb {

// Half-open time range in the engine's clock (ns).
struct TimeRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  bool empty() const { return end <= begin; }
  uint64_t length() const { return end > begin ? end - begin : 0; }
};

// One span where the model placed it.
struct PlacedSpan {
  rag::TraceEvent event;
  uint16_t row = 0;
};

inline constexpr size_t kFoldSamples = 32;

// The stage that takes the most time in `spans` (a run the frame folds into one block, drawn in
// this stage's colour): by summed duration, not by count, so one long prefill outweighs many
// short decode steps. Runs of more than kFoldSamples spans are estimated from kFoldSamples of
// them at golden-ratio positions (a fixed stride would alias with periodic traces such as every
// third span a decode step), which keeps folding O(log n) per block. Ties go to the lower stage
// value; an empty run is Unknown.
rag::TraceStage dominantStage(std::span<const rag::TraceEvent> spans);

// One rectangle of a frame. x is in pixels from the frame's t0 (may be negative or past the
// width for spans that stick out; painters clip).

struct DrawItem {
  enum Kind : uint8_t {
    Span,       // one span at least minPx wide, or an isolated narrow one
    Folded,     // a run of `count` spans each narrower than minPx, merged
    Highlight,  // a span of the selected request (drawn on top, also where it was folded)
  };
  double x0 = 0;
  double x1 = 0;
  uint16_t lane = 0;
  uint16_t row = 0;
  Kind kind = Span;
  uint32_t count = 1;     // spans represented
  // Folded: the stage that takes the most of the run's time (estimated from at most
  // kFoldSamples of its spans, so folding stays O(log n) per item), drawn in its colour.
  rag::TraceStage dominant = rag::TraceStage::Unknown;
  rag::TraceEvent event;  // Span/Highlight: the span. Folded: the first span, with endNs set to
                          // the end of the run's last span.
};

struct DrawList {
  std::vector<DrawItem> items;
  size_t foldedSpans = 0;  // spans inside Folded items
  void clear() {
    items.clear();
    foldedSpans = 0;
  }
};

struct FrameParams {
  uint64_t t0 = 0;            // time at x = 0
  double nsPerPixel = 1e6;    // > 0
  int widthPx = 0;            // the frame covers [t0, t0 + widthPx * nsPerPixel)
  double minPx = 3.0;         // spans narrower than this fold
  uint32_t selectedRequest = 0;  // 0: none; otherwise its spans also come as Highlight items
  uint64_t t1() const;
};

class LaneModel : public QObject {
  Q_OBJECT
public:
  static constexpr uint16_t kMaxRows = 48;

  explicit LaneModel(QObject* parent = nullptr);

  // Lane names and kinds by lane id (Engine::traceLanes()). Lanes seen in events without a name
  // are called "lane N" and are of kind Other. Emits lanesChanged().
  void setLanes(const std::vector<rag::TraceLane>& lanes);

  // Adds spans in any order; spans of one lane keep sorted by begin. Emits spansAppended().
  void append(std::span<const rag::TraceEvent> events);
  void clear();  // spans and lanes' rows (names stay); emits cleared()

  size_t spanCount() const { return m_spanCount; }
  int laneCount() const { return static_cast<int>(m_lanes.size()); }
  QString laneName(int lane) const;
  rag::LaneKind laneKind(int lane) const;  // what its spans are (views read args by kind)
  int rowCount(int lane) const;  // at least 1 for an existing lane
  // [earliest begin, latest end) over all spans; empty when there are none.
  TimeRange extent() const { return m_extent; }
  // Stages that occur, as a bit mask over rag::TraceStage values.
  uint32_t stageMask() const { return m_stageMask; }

  // Spans of `lane` overlapping [t0, t1), sorted by begin within each row, rows in order.
  // An instant at t (begin == end) overlaps when t0 <= t < t1. O(rows * log n + k).
  std::vector<PlacedSpan> query(int lane, uint64_t t0, uint64_t t1) const;

  // Draw items of `lane` for [t0, t1) at `nsPerPixel`: spans at least minPx wide come as
  // Span items, runs of narrower neighbours (gaps under minPx) merge into one Folded item;
  // a narrow span with no narrow neighbour stays a Span. x relative to t0. Appends to `out`.
  // Cost per row: O(log n) per emitted item, independent of how many spans fold.
  void fold(int lane, uint64_t t0, uint64_t t1, double nsPerPixel, DrawList& out,
            double minPx = 3.0) const;

  // Every lane's fold plus Highlight items for the selected request: one frame's draw list.
  void buildFrame(const FrameParams& frame, DrawList& out) const;

  // All spans of a request, in arrival order (empty for unknown ids and for 0).
  std::span<const PlacedSpan> requestSpans(uint32_t requestId) const;

Q_SIGNALS:
  void lanesChanged();
  // `count` spans were added; `newestEnd` is extent().end afterwards.
  void spansAppended(qsizetype count, quint64 newestEnd);
  void cleared();

private:
  struct Row {
    std::vector<rag::TraceEvent> spans;  // sorted by beginNs
    std::vector<uint64_t> maxEnd;        // maxEnd[i] = max(spans[0..i].endNs)
  };
  struct Lane {
    QString name;
    rag::LaneKind kind = rag::LaneKind::Other;
    std::vector<Row> rows;
  };

  Lane& laneFor(uint16_t lane);
  uint16_t place(Lane& lane, const rag::TraceEvent& ev);
  static bool fits(const Row& row, const rag::TraceEvent& ev);
  static void insert(Row& row, const rag::TraceEvent& ev);
  static void foldRow(const Row& row, uint16_t lane, uint16_t rowIndex, uint64_t t0, uint64_t t1,
                      double nsPerPixel, double minPx, DrawList& out);
  // [first, last) indices of `row` whose spans may overlap [t0, t1).
  static std::pair<size_t, size_t> window(const Row& row, uint64_t t0, uint64_t t1);

  std::vector<Lane> m_lanes;
  std::unordered_map<uint32_t, std::vector<PlacedSpan>> m_byRequest;
  size_t m_spanCount = 0;
  TimeRange m_extent;
  uint32_t m_stageMask = 0;
};

}  // namespace ragwb
