#include "timeline/lane_model.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace ragwb {

rag::TraceStage dominantStage(std::span<const rag::TraceEvent> spans) {
  if (spans.empty()) return rag::TraceStage::Unknown;
  std::array<uint64_t, static_cast<size_t>(rag::TraceStage::Count_)> ns{};
  const size_t n = spans.size();
  const size_t samples = std::min(n, kFoldSamples);
  for (size_t s = 0; s < samples; ++s) {
    const double phase = static_cast<double>(s) * 0.6180339887498949;
    const size_t k = n <= kFoldSamples ? s : static_cast<size_t>((phase - std::floor(phase)) * static_cast<double>(n));
    const rag::TraceEvent& e = spans[k];
    const auto stage = static_cast<size_t>(e.stage);
    if (stage < ns.size()) ns[stage] += std::max<uint64_t>(1, e.durationNs());
  }
  return static_cast<rag::TraceStage>(std::max_element(ns.begin(), ns.end()) - ns.begin());
}

namespace {

bool overlaps(const rag::TraceEvent& e, uint64_t t0, uint64_t t1) {
  if (e.beginNs >= t1) return false;
  return e.endNs > t0 || (e.endNs == e.beginNs && e.beginNs >= t0);
}

double pixelOf(uint64_t t, uint64_t t0, double nsPerPixel) {
  const double d = t >= t0 ? static_cast<double>(t - t0) : -static_cast<double>(t0 - t);
  return d / nsPerPixel;
}

}  // namespace

uint64_t FrameParams::t1() const {
  return t0 + static_cast<uint64_t>(std::ceil(std::max(0, widthPx) * nsPerPixel));
}

LaneModel::LaneModel(QObject* parent) : QObject(parent) {}

void LaneModel::setLanes(const std::vector<rag::TraceLane>& lanes) {
  if (m_lanes.size() < lanes.size()) m_lanes.resize(lanes.size());
  for (size_t i = 0; i < lanes.size(); ++i) {
    m_lanes[i].name = QString::fromStdString(lanes[i].name);
    m_lanes[i].kind = lanes[i].kind;
  }
  Q_EMIT lanesChanged();
}

rag::LaneKind LaneModel::laneKind(int lane) const {
  return lane < 0 || lane >= laneCount() ? rag::LaneKind::Other : m_lanes[lane].kind;
}

QString LaneModel::laneName(int lane) const {
  if (lane < 0 || lane >= laneCount()) return {};
  const QString& n = m_lanes[lane].name;
  return n.isEmpty() ? QStringLiteral("lane %1").arg(lane) : n;
}

int LaneModel::rowCount(int lane) const {
  if (lane < 0 || lane >= laneCount()) return 0;
  return std::max<int>(1, static_cast<int>(m_lanes[lane].rows.size()));
}

LaneModel::Lane& LaneModel::laneFor(uint16_t lane) {
  if (lane >= m_lanes.size()) m_lanes.resize(size_t(lane) + 1);
  return m_lanes[lane];
}

bool LaneModel::fits(const Row& row, const rag::TraceEvent& ev) {
  if (row.spans.empty()) return true;
  if (row.spans.back().beginNs <= ev.beginNs) return row.maxEnd.back() <= ev.beginNs;  // tail
  auto it = std::upper_bound(row.spans.begin(), row.spans.end(), ev.beginNs,
                             [](uint64_t t, const rag::TraceEvent& e) { return t < e.beginNs; });
  const size_t pos = static_cast<size_t>(it - row.spans.begin());
  if (pos > 0 && row.maxEnd[pos - 1] > ev.beginNs) return false;
  return it->beginNs >= ev.endNs;  // later spans begin later still
}

void LaneModel::insert(Row& row, const rag::TraceEvent& ev) {
  auto it = std::upper_bound(row.spans.begin(), row.spans.end(), ev.beginNs,
                             [](uint64_t t, const rag::TraceEvent& e) { return t < e.beginNs; });
  const size_t pos = static_cast<size_t>(it - row.spans.begin());
  row.spans.insert(it, ev);
  const uint64_t before = pos > 0 ? row.maxEnd[pos - 1] : 0;
  row.maxEnd.insert(row.maxEnd.begin() + static_cast<ptrdiff_t>(pos), std::max(before, ev.endNs));
  // Later running maxima only grow, and stop changing once they already cover ev.endNs.
  for (size_t i = pos + 1; i < row.maxEnd.size() && row.maxEnd[i] < ev.endNs; ++i)
    row.maxEnd[i] = ev.endNs;
}

uint16_t LaneModel::place(Lane& lane, const rag::TraceEvent& ev) {
  for (size_t r = 0; r < lane.rows.size(); ++r) {
    if (fits(lane.rows[r], ev)) {
      insert(lane.rows[r], ev);
      return static_cast<uint16_t>(r);
    }
  }
  if (lane.rows.size() < kMaxRows) lane.rows.emplace_back();
  insert(lane.rows.back(), ev);
  return static_cast<uint16_t>(lane.rows.size() - 1);
}

void LaneModel::append(std::span<const rag::TraceEvent> events) {
  if (events.empty()) return;
  // Placing by begin order packs rows best (first fit over intervals sorted by start).
  std::vector<rag::TraceEvent> sorted(events.begin(), events.end());
  if (!std::is_sorted(sorted.begin(), sorted.end(),
                      [](const auto& a, const auto& b) { return a.beginNs < b.beginNs; }))
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.beginNs < b.beginNs; });
  for (rag::TraceEvent ev : sorted) {
    ev.endNs = std::max(ev.endNs, ev.beginNs);
    const uint16_t row = place(laneFor(ev.lane), ev);
    if (ev.requestId != 0) m_byRequest[ev.requestId].push_back(PlacedSpan{ev, row});
    if (m_spanCount == 0) {
      m_extent = TimeRange{ev.beginNs, ev.endNs};
    } else {
      m_extent.begin = std::min(m_extent.begin, ev.beginNs);
      m_extent.end = std::max(m_extent.end, ev.endNs);
    }
    m_stageMask |= 1u << static_cast<unsigned>(ev.stage);
    ++m_spanCount;
  }
  Q_EMIT spansAppended(static_cast<qsizetype>(sorted.size()), m_extent.end);
}

void LaneModel::clear() {
  for (Lane& l : m_lanes) l.rows.clear();
  m_byRequest.clear();
  m_spanCount = 0;
  m_extent = {};
  m_stageMask = 0;
  Q_EMIT cleared();
}

std::pair<size_t, size_t> LaneModel::window(const Row& row, uint64_t t0, uint64_t t1) {
  // First span whose running max end reaches t0: nothing before it can overlap, even a long span
  // that began long before t0 is found because maxEnd carries its end forward.
  auto first = std::lower_bound(row.maxEnd.begin(), row.maxEnd.end(), t0);
  auto last = std::lower_bound(row.spans.begin(), row.spans.end(), t1,
                               [](const rag::TraceEvent& e, uint64_t t) { return e.beginNs < t; });
  return {static_cast<size_t>(first - row.maxEnd.begin()),
          static_cast<size_t>(last - row.spans.begin())};
}

std::vector<PlacedSpan> LaneModel::query(int lane, uint64_t t0, uint64_t t1) const {
  std::vector<PlacedSpan> out;
  if (lane < 0 || lane >= laneCount() || t1 <= t0) return out;
  const auto& rows = m_lanes[lane].rows;
  for (size_t r = 0; r < rows.size(); ++r) {
    auto [first, last] = window(rows[r], t0, t1);
    for (size_t i = first; i < last; ++i)
      if (overlaps(rows[r].spans[i], t0, t1))
        out.push_back(PlacedSpan{rows[r].spans[i], static_cast<uint16_t>(r)});
  }
  return out;
}

void LaneModel::foldRow(const Row& row, uint16_t lane, uint16_t rowIndex, uint64_t t0, uint64_t t1,
                        double nsPerPixel, double minPx, DrawList& out) {
  const auto [first, last] = window(row, t0, t1);
  const double minNsD = minPx * nsPerPixel;
  const uint64_t minNs = static_cast<uint64_t>(std::ceil(minNsD));
  auto narrow = [&](const rag::TraceEvent& e) { return static_cast<double>(e.durationNs()) < minNsD; };
  auto emit = [&](DrawItem::Kind kind, const rag::TraceEvent& e, uint64_t end, uint32_t count) {
    DrawItem item;
    item.x0 = pixelOf(e.beginNs, t0, nsPerPixel);
    item.x1 = pixelOf(end, t0, nsPerPixel);
    item.lane = lane;
    item.row = rowIndex;
    item.kind = kind;
    item.count = count;
    item.event = e;
    item.event.endNs = end;
    out.items.push_back(item);
  };

  size_t i = first;
  while (i < last) {
    const rag::TraceEvent& e = row.spans[i];
    if (!overlaps(e, t0, t1)) {  // ended before t0 behind a longer span (overflow row only)
      ++i;
      continue;
    }
    if (!narrow(e)) {
      emit(DrawItem::Span, e, e.endNs, 1);
      ++i;
      continue;
    }
    // A run of narrow spans: swallow, one binary search at a time, every span ending within
    // minPx of the run's end, and go on while the next span is narrow and starts within minPx.
    uint64_t runEnd = e.endNs;
    size_t j = i;
    for (;;) {
      auto k = std::lower_bound(row.maxEnd.begin() + static_cast<ptrdiff_t>(j),
                                row.maxEnd.begin() + static_cast<ptrdiff_t>(last), runEnd + minNs);
      size_t next = static_cast<size_t>(k - row.maxEnd.begin());
      if (next == j) ++next;
      runEnd = std::max(runEnd, row.maxEnd[next - 1]);
      j = next;
      if (j >= last) break;
      const rag::TraceEvent& n = row.spans[j];
      if (!narrow(n) || n.beginNs >= runEnd + minNs) break;
    }
    const uint32_t count = static_cast<uint32_t>(j - i);
    if (count == 1) {
      emit(DrawItem::Span, e, e.endNs, 1);
    } else {
      emit(DrawItem::Folded, e, runEnd, count);
      out.items.back().dominant = dominantStage(std::span(row.spans).subspan(i, j - i));
      out.foldedSpans += count;
    }
    i = j;
  }
}

void LaneModel::fold(int lane, uint64_t t0, uint64_t t1, double nsPerPixel, DrawList& out,
                     double minPx) const {
  if (lane < 0 || lane >= laneCount() || t1 <= t0 || !(nsPerPixel > 0)) return;
  const auto& rows = m_lanes[lane].rows;
  for (size_t r = 0; r < rows.size(); ++r)
    foldRow(rows[r], static_cast<uint16_t>(lane), static_cast<uint16_t>(r), t0, t1, nsPerPixel,
            minPx, out);
}

void LaneModel::buildFrame(const FrameParams& frame, DrawList& out) const {
  out.clear();
  const uint64_t t1 = frame.t1();
  for (int lane = 0; lane < laneCount(); ++lane)
    fold(lane, frame.t0, t1, frame.nsPerPixel, out, frame.minPx);
  for (const PlacedSpan& s : requestSpans(frame.selectedRequest)) {
    if (!overlaps(s.event, frame.t0, t1)) continue;
    DrawItem item;
    item.x0 = pixelOf(s.event.beginNs, frame.t0, frame.nsPerPixel);
    item.x1 = pixelOf(s.event.endNs, frame.t0, frame.nsPerPixel);
    item.lane = s.event.lane;
    item.row = s.row;
    item.kind = DrawItem::Highlight;
    item.event = s.event;
    out.items.push_back(item);
  }
}

std::span<const PlacedSpan> LaneModel::requestSpans(uint32_t requestId) const {
  if (requestId == 0) return {};
  auto it = m_byRequest.find(requestId);
  if (it == m_byRequest.end()) return {};
  return it->second;
}

}  // namespace ragwb
