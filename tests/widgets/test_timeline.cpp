#include <QtTest>

#include <QImage>
#include <QMouseEvent>
#include <QSignalSpy>
#include <QWheelEvent>
#include <algorithm>
#include <random>
#include <set>

#include "timeline/lane_model.h"
#include "timeline/span_colors.h"
#include "timeline/timeline_bench.h"
#include "timeline/timeline_view.h"

using ragwb::DrawItem;
using ragwb::DrawList;
using ragwb::LaneModel;
using ragwb::TimelineView;
using ragwb::dominantStage;
using ragwb::foldedColor;
using ragwb::kFoldSamples;
using ragwb::spanColor;
using rag::LaneKind;
using rag::TraceEvent;
using rag::TraceStage;

namespace {

TraceEvent span(uint16_t lane, uint64_t begin, uint64_t end, uint32_t request = 0,
                TraceStage stage = TraceStage::Decode, uint32_t arg0 = 0, uint8_t flags = 0) {
  return TraceEvent{.beginNs = begin, .endNs = end, .requestId = request, .lane = lane,
                    .stage = stage, .flags = flags, .arg0 = arg0};
}

bool overlapsWindow(const TraceEvent& e, uint64_t t0, uint64_t t1) {
  return e.beginNs < t1 && (e.endNs > t0 || (e.endNs == e.beginNs && e.beginNs >= t0));
}

// A comparable identity for a span (begin, end, request, lane).
std::tuple<uint64_t, uint64_t, uint32_t, uint16_t> key(const TraceEvent& e) {
  return {e.beginNs, e.endNs, e.requestId, e.lane};
}

void sendMouse(QWidget* w, QEvent::Type type, QPoint pos, Qt::MouseButton button,
               Qt::MouseButtons buttons) {
  QMouseEvent ev(type, QPointF(pos), w->mapToGlobal(QPointF(pos)), button, buttons, Qt::NoModifier);
  QApplication::sendEvent(w, &ev);
}

void click(QWidget* w, QPoint pos) {
  sendMouse(w, QEvent::MouseButtonPress, pos, Qt::LeftButton, Qt::LeftButton);
  sendMouse(w, QEvent::MouseButtonRelease, pos, Qt::LeftButton, Qt::NoButton);
}

const DrawItem* findSpan(const DrawList& list, uint32_t request, TraceStage stage) {
  for (const DrawItem& it : list.items)
    if (it.kind == DrawItem::Span && it.event.requestId == request && it.event.stage == stage)
      return &it;
  return nullptr;
}

}  // namespace

class TestTimeline : public QObject {
  Q_OBJECT

private Q_SLOTS:
  // ---- lane model ------------------------------------------------------------------------------

  void queryFindsSpansThatBeganBeforeTheWindow() {
    LaneModel m;
    std::vector<TraceEvent> ev = {span(0, 0, 1000), span(0, 1100, 1200), span(0, 1300, 1400),
                                  span(1, 50, 60)};
    m.append(ev);
    QCOMPARE(m.spanCount(), size_t(4));
    QCOMPARE(m.laneCount(), 2);
    QCOMPARE(m.rowCount(0), 1);  // no overlap: one row
    auto q = m.query(0, 500, 1150);
    QCOMPARE(q.size(), size_t(2));
    QCOMPARE(q[0].event.beginNs, uint64_t(0));  // began 500 ns before the window
    QCOMPARE(q[1].event.beginNs, uint64_t(1100));
    QVERIFY(m.query(0, 1250, 1290).empty());
    QVERIFY(m.query(0, 1000, 1100).empty());  // half-open on both sides
    QCOMPARE(m.query(1, 0, 100).size(), size_t(1));
    QCOMPARE(m.extent().begin, uint64_t(0));
    QCOMPARE(m.extent().end, uint64_t(1400));
  }

  void concurrentSpansStackInRowsAndOverflowStillQueries() {
    LaneModel m;
    std::vector<TraceEvent> ev;
    const int n = LaneModel::kMaxRows + 12;
    for (int i = 0; i < n; ++i) ev.push_back(span(0, uint64_t(i), 10000 + uint64_t(i)));
    // Short spans late in the run land behind the long ones in the overflow row.
    for (int i = 0; i < 20; ++i) ev.push_back(span(0, 5000 + uint64_t(i) * 10, 5005 + uint64_t(i) * 10));
    m.append(ev);
    QCOMPARE(m.rowCount(0), int(LaneModel::kMaxRows));
    QCOMPARE(m.query(0, 9000, 9001).size(), size_t(n));  // every long span, none of the short
    QCOMPARE(m.query(0, 5000, 5001).size(), size_t(n + 1));
  }

  void queryMatchesBruteForceOnRandomTraces() {
    std::mt19937_64 rng(7);
    LaneModel m;
    std::vector<TraceEvent> all;
    for (int i = 0; i < 3000; ++i) {
      const uint64_t b = rng() % 1'000'000;
      const uint64_t len = (rng() % 10 == 0) ? rng() % 200'000 : rng() % 2000;  // some long ones
      all.push_back(span(uint16_t(rng() % 3), b, b + len, uint32_t(rng() % 50)));
    }
    // In several batches, each in arbitrary order: inserts land in the middle of rows.
    for (size_t i = 0; i < all.size(); i += 500)
      m.append(std::span<const TraceEvent>(all).subspan(i, 500));
    QCOMPARE(m.spanCount(), all.size());
    for (int trial = 0; trial < 200; ++trial) {
      const uint64_t t0 = rng() % 1'100'000;
      const uint64_t t1 = t0 + 1 + rng() % 100'000;
      const uint16_t lane = uint16_t(trial % 3);
      std::multiset<decltype(key(all[0]))> want, got;
      for (const TraceEvent& e : all)
        if (e.lane == lane && overlapsWindow(e, t0, t1)) want.insert(key(e));
      for (const auto& p : m.query(lane, t0, t1)) got.insert(key(p.event));
      QCOMPARE(got, want);
    }
  }

  void outOfOrderInsertsKeepRowsSortedAndDisjoint() {
    LaneModel m;
    // Arrival in end order, as the trace ring delivers: the enclosing span comes last.
    std::vector<TraceEvent> a = {span(0, 300, 400), span(0, 100, 200)};
    std::vector<TraceEvent> b = {span(0, 50, 90), span(0, 0, 1000), span(0, 210, 290)};
    m.append(a);
    m.append(b);
    QCOMPARE(m.rowCount(0), 2);  // the enclosing span needs its own row
    auto q = m.query(0, 0, 2000);
    QCOMPARE(q.size(), size_t(5));
    std::vector<std::vector<TraceEvent>> rows(2);
    for (const auto& p : q) rows[p.row].push_back(p.event);
    for (const auto& row : rows) {
      for (size_t i = 1; i < row.size(); ++i) {
        QVERIFY(row[i - 1].beginNs <= row[i].beginNs);
        QVERIFY(row[i - 1].endNs <= row[i].beginNs);
      }
    }
    QCOMPARE(rows[0].size(), size_t(4));
    QCOMPARE(rows[0][0].beginNs, uint64_t(50));
    QCOMPARE(rows[0][2].beginNs, uint64_t(210));
    QCOMPARE(rows[1][0].endNs, uint64_t(1000));
    // A window inside the long span but between the short ones finds only the long one.
    auto inner = m.query(0, 600, 700);
    QCOMPARE(inner.size(), size_t(1));
    QCOMPARE(inner[0].row, uint16_t(1));
  }

  void foldMergesNarrowRunsAndKeepsWideSpans() {
    LaneModel m;
    std::vector<TraceEvent> ev;
    for (int i = 0; i < 100; ++i)  // 1 µs spans 2 µs apart: [0, 200 µs)
      ev.push_back(span(0, uint64_t(i) * 2000, uint64_t(i) * 2000 + 1000));
    ev.push_back(span(0, 300'000, 400'000));  // 100 µs
    ev.push_back(span(0, 600'000, 600'500));  // a lone narrow span
    for (int i = 0; i < 10; ++i) {  // two narrow runs 80 µs apart: two folded rects, not one
      ev.push_back(span(0, 700'000 + uint64_t(i) * 2000, 701'000 + uint64_t(i) * 2000));
      ev.push_back(span(0, 800'000 + uint64_t(i) * 2000, 801'000 + uint64_t(i) * 2000));
    }
    m.append(ev);

    DrawList list;
    m.fold(0, 0, 1'000'000, 1000.0, list);  // 1 µs per px: the short spans are 1 px wide
    QCOMPARE(list.items.size(), size_t(5));
    QCOMPARE(int(list.items[0].kind), int(DrawItem::Folded));
    QCOMPARE(list.items[0].count, 100u);
    QCOMPARE(list.items[0].x0, 0.0);
    QCOMPARE(list.items[0].x1, 199.0);
    QCOMPARE(list.foldedSpans, size_t(120));
    QCOMPARE(int(list.items[1].kind), int(DrawItem::Span));
    QCOMPARE(list.items[1].x1 - list.items[1].x0, 100.0);
    QCOMPARE(int(list.items[2].kind), int(DrawItem::Span));  // nothing to fold with
    QCOMPARE(list.items[2].count, 1u);
    for (int k : {3, 4}) {
      QCOMPARE(int(list.items[k].kind), int(DrawItem::Folded));
      QCOMPARE(list.items[k].count, 10u);
    }
    QCOMPARE(list.items[4].x0, 800.0);

    list.clear();
    m.fold(0, 0, 1'000'000, 100.0, list);  // 10 px each: nothing folds
    QCOMPARE(list.items.size(), size_t(122));
    QCOMPARE(list.foldedSpans, size_t(0));

    list.clear();
    m.fold(0, 0, 1'000'000, 1000.0, list, 0.5);  // a threshold under 1 px: nothing folds either
    QCOMPARE(list.foldedSpans, size_t(0));
  }

  void foldAccountsForEverySpanInTheWindow() {
    std::mt19937_64 rng(11);
    LaneModel m;
    std::vector<TraceEvent> all;
    uint64_t t = 0;
    for (int i = 0; i < 20000; ++i) {  // one worker: back-to-back spans of mixed widths
      const uint64_t len = rng() % 8 == 0 ? 5000 + rng() % 50000 : rng() % 800;
      all.push_back(span(0, t, t + len));
      t += len + rng() % 1500;
    }
    m.append(all);
    for (int trial = 0; trial < 50; ++trial) {
      const uint64_t t0 = rng() % t;
      const uint64_t t1 = t0 + 1 + rng() % (t / 4);
      const double nsPerPx = double(t1 - t0) / 1600.0;
      DrawList list;
      m.fold(0, t0, t1, nsPerPx, list);
      size_t counted = 0;
      for (const DrawItem& it : list.items) {
        counted += it.count;
        QVERIFY(it.kind == DrawItem::Folded ? it.count >= 2 : it.count == 1);
      }
      QCOMPARE(counted, m.query(0, t0, t1).size());
      // Bounded by pixels, not by spans: at most two items (a narrow one, then a wide one) per
      // 3 px.
      QVERIFY(list.items.size() <= 1600 * 2 / 3 + 4);
    }
  }

  void requestSpansAcrossLanesAndHighlights() {
    LaneModel m;
    std::vector<TraceEvent> ev = {span(1, 0, 100, 7, TraceStage::Request),
                                  span(1, 10, 40, 7, TraceStage::RetrievalStep, 64),
                                  span(3, 12, 20, 7, TraceStage::RetrievalStep, 4),
                                  span(3, 21, 30, 8, TraceStage::RetrievalStep, 4),
                                  span(0, 5, 6, 0, TraceStage::Schedule)};
    m.append(ev);
    QCOMPARE(m.requestSpans(7).size(), size_t(3));
    QCOMPARE(m.requestSpans(8).size(), size_t(1));
    QVERIFY(m.requestSpans(9).empty());
    QVERIFY(m.requestSpans(0).empty());  // 0 is "no request", not a request
    for (const auto& p : m.requestSpans(7)) {
      const auto q = m.query(p.event.lane, p.event.beginNs, p.event.endNs);
      QVERIFY(std::any_of(q.begin(), q.end(), [&](const auto& s) {
        return s.row == p.row && key(s.event) == key(p.event);
      }));
    }
    ragwb::FrameParams f;
    f.t0 = 0;
    f.nsPerPixel = 0.1;
    f.widthPx = 1000;
    f.selectedRequest = 7;
    DrawList list;
    m.buildFrame(f, list);
    QCOMPARE(std::count_if(list.items.begin(), list.items.end(),
                           [](const DrawItem& it) { return it.kind == DrawItem::Highlight; }),
             3L);
  }

  // The pure function behind a folded block's colour: the stage with the most time wins, not the
  // one with the most spans; periodic runs longer than the sample budget are not aliased; ties and
  // empty runs are decided.
  void dominantStageIsByTime() {
    using rag::TraceStage;
    QCOMPARE(dominantStage({}), TraceStage::Unknown);
    std::vector<TraceEvent> run;
    for (int i = 0; i < 10; ++i)  // ten 100 ns decode steps ...
      run.push_back(span(0, uint64_t(i) * 100, uint64_t(i) * 100 + 100, 1, TraceStage::Decode));
    run.push_back(span(0, 1000, 6000, 1, TraceStage::Prefill));  // ... and one 5 µs prefill
    QCOMPARE(dominantStage(run), TraceStage::Prefill);
    run.back().endNs = 1500;  // a 500 ns prefill: the decode steps' 1 µs wins
    QCOMPARE(dominantStage(run), TraceStage::Decode);
    // Equal time: the lower stage value, whatever the order.
    std::vector<TraceEvent> tie = {span(0, 0, 100, 0, TraceStage::Embed), span(0, 100, 200, 0, TraceStage::Decode)};
    QCOMPARE(dominantStage(tie), std::min(TraceStage::Embed, TraceStage::Decode));
    std::reverse(tie.begin(), tie.end());
    QCOMPARE(dominantStage(tie), std::min(TraceStage::Embed, TraceStage::Decode));
    // Far more spans than kFoldSamples, every third a long retrieval step (a stride of 3 would
    // see only one kind): retrieval has 8x the time of the two short embeds beside each.
    std::vector<TraceEvent> periodic;
    for (int i = 0; i < 3000; ++i) {
      const bool longOne = i % 3 == 0;
      periodic.push_back(span(0, uint64_t(i) * 1000, uint64_t(i) * 1000 + (longOne ? 800 : 50), 0,
                              longOne ? TraceStage::RetrievalStep : TraceStage::Embed));
    }
    QVERIFY(periodic.size() > kFoldSamples);
    QCOMPARE(dominantStage(periodic), TraceStage::RetrievalStep);
    for (TraceEvent& e : periodic) e.endNs = e.beginNs + (e.stage == TraceStage::Embed ? 800 : 50);
    QCOMPARE(dominantStage(periodic), TraceStage::Embed);
  }

  // A folded block is drawn in its dominant stage's hue (not grey), paler than a span of that
  // stage, and two stages' blocks tell apart.
  void foldedColourIsTheDominantStagesHue() {
    using rag::TraceStage;
    for (TraceStage s : {TraceStage::Decode, TraceStage::Embed, TraceStage::RetrievalStep, TraceStage::Prefill}) {
      TraceEvent e = span(0, 0, 1, 0, s);
      const QColor spanC = spanColor(e), folded = foldedColor(s);
      QCOMPARE(folded.hsvHue(), spanC.hsvHue());
      QVERIFY2(folded.hsvSaturation() > 40, qPrintable(QString::number(folded.hsvSaturation())));  // not grey
      QVERIFY(folded.lightness() >= spanC.lightness());
    }
    QVERIFY(foldedColor(TraceStage::Decode).hsvHue() != foldedColor(TraceStage::Embed).hsvHue());
  }

  // A folded run keeps the stage that takes most of its time (drawn in that stage's colour).
  void foldedRunsKeepTheirDominantStage() {
    LaneModel m;
    std::vector<TraceEvent> ev;
    for (int i = 0; i < 300; ++i) {  // embeds 900 ns each, every third a 100 ns decode: embed wins
      const uint64_t b = uint64_t(i) * 1000;
      ev.push_back(span(0, b, b + (i % 3 == 0 ? 100 : 900), 0, i % 3 == 0 ? TraceStage::Decode : TraceStage::Embed));
    }
    for (int i = 0; i < 300; ++i) {  // then decode only, after a gap
      const uint64_t b = 1'000'000 + uint64_t(i) * 1000;
      ev.push_back(span(0, b, b + 900, 0, TraceStage::Decode));
    }
    m.append(ev);
    DrawList list;
    m.fold(0, 0, 2'000'000, 1000.0, list);  // 1 µs per px: every span is under 3 px
    QCOMPARE(list.items.size(), size_t(2));
    QCOMPARE(int(list.items[0].kind), int(DrawItem::Folded));
    QCOMPARE(list.items[0].dominant, TraceStage::Embed);
    QCOMPARE(list.items[1].dominant, TraceStage::Decode);
  }

  // Lanes taller than the view scroll vertically (Shift+wheel); spans move with their lanes.
  void manyLanesScrollVertically() {
    LaneModel m;
    std::vector<TraceEvent> ev;
    for (uint16_t lane = 0; lane < 40; ++lane) ev.push_back(span(lane, 0, 50'000'000, lane + 1));
    m.append(ev);
    TimelineView view(&m);
    view.resize(800, 240);
    view.setFollowLive(false);
    view.setVisibleRange({0, 100'000'000});
    QVERIFY(view.maxVerticalScroll() > 0);
    QCOMPARE(view.verticalScroll(), 0);
    const DrawItem* first = findSpan(view.drawList(), 1, TraceStage::Decode);
    QVERIFY(first);
    const double top = view.itemRect(*first).top();
    view.setVerticalScroll(60);
    QCOMPARE(view.verticalScroll(), 60);
    QCOMPARE(view.itemRect(*first).top(), top - 60);
    view.setVerticalScroll(1 << 20);  // clamped
    QCOMPARE(view.verticalScroll(), view.maxVerticalScroll());
    QWheelEvent wheel(QPointF(400, 120), view.mapToGlobal(QPointF(400, 120)), QPoint(), QPoint(0, 120),
                      Qt::NoButton, Qt::ShiftModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(&view, &wheel);  // one notch up
    QCOMPARE(view.verticalScroll(), view.maxVerticalScroll() - 40);
    view.resize(800, 4000);  // room for every lane: nothing to scroll
    QCOMPARE(view.maxVerticalScroll(), 0);
    QCOMPARE(view.verticalScroll(), 0);
  }

  void signalsAndClear() {
    LaneModel m;
    QSignalSpy appended(&m, &LaneModel::spansAppended);
    QSignalSpy cleared(&m, &LaneModel::cleared);
    QSignalSpy lanes(&m, &LaneModel::lanesChanged);
    m.setLanes({{"scheduler", LaneKind::Scheduler}, {"requests", LaneKind::Requests}});
    QCOMPARE(lanes.count(), 1);
    QCOMPARE(m.laneName(1), QString("requests"));
    std::vector<TraceEvent> ev = {span(0, 10, 20), span(4, 30, 50, 2)};
    m.append(ev);
    QCOMPARE(appended.count(), 1);
    QCOMPARE(appended.at(0).at(0).value<qsizetype>(), qsizetype(2));
    QCOMPARE(appended.at(0).at(1).value<quint64>(), quint64(50));
    QCOMPARE(m.laneCount(), 5);
    QCOMPARE(m.laneName(4), QString("lane 4"));
    m.clear();
    QCOMPARE(cleared.count(), 1);
    QCOMPARE(m.spanCount(), size_t(0));
    QVERIFY(m.extent().empty());
    QVERIFY(m.requestSpans(2).empty());
    QVERIFY(m.query(0, 0, 100).empty());
    QCOMPARE(m.laneName(1), QString("requests"));  // names stay
  }

  // ---- view ------------------------------------------------------------------------------------

  void rendersEmptyAndTwoHundredThousandSpans() {
    LaneModel m;
    TimelineView view(&m);
    view.resize(1600, 600);
    QImage img(view.size(), QImage::Format_ARGB32_Premultiplied);
    view.render(&img);
    QVERIFY(view.drawList().items.empty());
    QVERIFY(view.textAt(view.timeArea().center()).isEmpty());

    const auto trace = ragwb::syntheticServingTrace(200000);
    QCOMPARE(trace.size(), size_t(200000));
    m.setLanes(ragwb::syntheticLanes());
    m.append(trace);
    view.zoomToFit();
    view.render(&img);
    const DrawList& list = view.drawList();
    QVERIFY(!list.items.empty());
    QVERIFY2(list.items.size() < 40000, qPrintable(QString::number(list.items.size())));
    QVERIFY(list.foldedSpans > 100000);  // most spans are far under 3 px at this zoom
  }

  void zoomAndPanChangeTheVisibleRange() {
    LaneModel m;
    std::vector<TraceEvent> ev;
    for (int i = 0; i < 100; ++i) ev.push_back(span(0, uint64_t(i) * 10'000'000, uint64_t(i) * 10'000'000 + 5'000'000));
    m.append(ev);
    TimelineView view(&m);
    view.resize(1000, 400);
    view.setFollowLive(false);
    const QRect area = view.timeArea();
    view.setVisibleRange({100'000'000, 100'000'000 + uint64_t(area.width()) * 100'000});
    const auto r0 = view.visibleRange();
    QCOMPARE(r0.begin, uint64_t(100'000'000));

    // Zoom in around the middle: half the duration, the time under the cursor stays put.
    const double mid = area.left() + area.width() / 2.0;
    const double tMid = r0.begin + (mid - area.left()) * view.nsPerPixel();
    view.zoomAt(mid, 0.5);
    const auto r1 = view.visibleRange();
    QVERIFY(std::abs(double(r1.length()) - r0.length() / 2.0) < 2);
    QVERIFY(std::abs(r1.begin + (mid - area.left()) * view.nsPerPixel() - tMid) < 2);

    // A wheel notch up zooms in too.
    QWheelEvent wheel(QPointF(mid, area.center().y()), view.mapToGlobal(QPointF(mid, 100)),
                      QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase,
                      false);
    QApplication::sendEvent(&view, &wheel);
    QVERIFY(view.visibleRange().length() < r1.length());

    // Dragging right by 100 px shows earlier times.
    const auto before = view.visibleRange();
    const double nspx = view.nsPerPixel();
    const QPoint p0 = area.center();
    sendMouse(&view, QEvent::MouseButtonPress, p0, Qt::LeftButton, Qt::LeftButton);
    sendMouse(&view, QEvent::MouseMove, p0 + QPoint(50, 0), Qt::NoButton, Qt::LeftButton);
    sendMouse(&view, QEvent::MouseMove, p0 + QPoint(100, 0), Qt::NoButton, Qt::LeftButton);
    sendMouse(&view, QEvent::MouseButtonRelease, p0 + QPoint(100, 0), Qt::LeftButton, Qt::NoButton);
    QVERIFY(std::abs(double(before.begin) - double(view.visibleRange().begin) - 100 * nspx) < 2);
    QCOMPARE(view.visibleRange().length(), before.length());
  }

  void followLiveTracksNewestUntilPanned() {
    LaneModel m;
    TimelineView view(&m);
    view.resize(1000, 400);
    QSignalSpy follow(&view, &TimelineView::followLiveChanged);
    QVERIFY(view.followLive());
    std::vector<TraceEvent> a = {span(0, 1'000'000, 2'000'000), span(1, 1'500'000, 9'000'000)};
    m.append(a);
    const double slack = view.nsPerPixel() + 1;
    QVERIFY(std::abs(double(view.visibleRange().end) - 9'000'000) <= slack);
    std::vector<TraceEvent> b = {span(0, 40'000'000, 50'000'000)};
    m.append(b);
    QVERIFY(std::abs(double(view.visibleRange().end) - 50'000'000) <= slack);

    view.panByPixels(30);
    QVERIFY(!view.followLive());
    QCOMPARE(follow.count(), 1);
    QCOMPARE(follow.at(0).at(0).toBool(), false);
    const auto held = view.visibleRange();
    std::vector<TraceEvent> c = {span(0, 80'000'000, 90'000'000)};
    m.append(c);
    QCOMPARE(view.visibleRange().begin, held.begin);  // stays where the user put it

    view.setFollowLive(true);
    QCOMPARE(follow.count(), 2);
    QVERIFY(std::abs(double(view.visibleRange().end) - 90'000'000) <= slack);
  }

  void clickSelectsTheRequestUnderTheCursor() {
    LaneModel m;
    m.setLanes({{"scheduler", LaneKind::Scheduler}, {"requests", LaneKind::Requests},
                {"generation", LaneKind::Generation}, {"retrieval", LaneKind::Retrieval}});
    std::vector<TraceEvent> ev = {
        span(1, 0, 40'000'000, 5, TraceStage::Decode, 32),
        span(1, 50'000'000, 90'000'000, 6, TraceStage::RetrievalStep, 128),
        span(3, 52'000'000, 60'000'000, 5, TraceStage::RetrievalStep, 16),
        span(3, 61'000'000, 70'000'000, 6, TraceStage::RetrievalStep, 16,
             rag::kTraceSpeculative | rag::kTraceRollback),
        span(0, 10'000'000, 11'000'000, 0, TraceStage::Schedule)};
    m.append(ev);
    TimelineView view(&m);
    view.resize(1000, 400);
    view.setFollowLive(false);
    view.setVisibleRange({0, 100'000'000});
    QSignalSpy selected(&view, &TimelineView::requestSelected);

    const DrawItem* it = findSpan(view.drawList(), 5, TraceStage::Decode);
    QVERIFY(it);
    const QPoint at = view.itemRect(*it).center().toPoint();
    click(&view, at);
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected.at(0).at(0).value<uint32_t>(), 5u);
    QCOMPARE(view.selectedRequest(), 5u);
    // All spans of request 5, in both lanes, are highlighted.
    std::set<uint16_t> lanes;
    for (const DrawItem& d : view.drawList().items)
      if (d.kind == DrawItem::Highlight) {
        QCOMPARE(d.event.requestId, 5u);
        lanes.insert(d.event.lane);
      }
    QCOMPARE(lanes, (std::set<uint16_t>{1, 3}));

    // Clicking empty space clears the selection.
    const QRect area = view.timeArea();
    click(&view, QPoint(area.right() - 2, area.bottom() - 2));
    QCOMPARE(selected.count(), 2);
    QCOMPARE(selected.at(1).at(0).value<uint32_t>(), 0u);
    QCOMPARE(view.selectedRequest(), 0u);
  }

  void hoverTextNamesStageRequestAndPayload() {
    LaneModel m;
    m.setLanes({{"scheduler", LaneKind::Scheduler}, {"requests", LaneKind::Requests},
                {"generation", LaneKind::Generation}, {"retrieval", LaneKind::Retrieval}});
    std::vector<TraceEvent> ev = {
        span(1, 0, 40'000'000, 5, TraceStage::Decode, 32),
        span(3, 50'000'000, 62'500'000, 6, TraceStage::RetrievalStep, 16,
             rag::kTraceSpeculative | rag::kTraceRollback)};
    m.append(ev);
    TimelineView view(&m);
    view.resize(1000, 400);
    view.setFollowLive(false);
    view.setVisibleRange({0, 100'000'000});

    const DrawItem* dec = findSpan(view.drawList(), 5, TraceStage::Decode);
    QVERIFY(dec);
    const QString t = view.textAt(view.itemRect(*dec).center().toPoint());
    QVERIFY2(t.contains("decode") && t.contains("request 5"), qPrintable(t));
    QVERIFY2(t.contains("node run 40.000 ms") && t.contains("tokens 32"), qPrintable(t));

    const DrawItem* ret = findSpan(view.drawList(), 6, TraceStage::RetrievalStep);
    QVERIFY(ret);
    const QString r = view.textAt(view.itemRect(*ret).center().toPoint());
    QVERIFY2(r.contains("retrieval") && r.contains("request 6"), qPrintable(r));
    QVERIFY2(r.contains("12.500 ms") && r.contains("clusters 16"), qPrintable(r));
    QVERIFY2(r.contains("speculative") && r.contains("rolled back"), qPrintable(r));

    QVERIFY(view.textAt(QPoint(5, 5)).isEmpty());  // the axis corner
  }

  void snapshotPaintsStageColoursAndTheSelection() {
    LaneModel m;
    m.setLanes(ragwb::syntheticLanes());
    m.append(ragwb::syntheticServingTrace(20000, 3));
    TimelineView view(&m);
    view.resize(1600, 600);
    view.setFollowLive(false);
    const auto ext = m.extent();
    view.setVisibleRange({ext.begin + ext.length() / 3, ext.begin + ext.length() / 3 + 300'000'000});
    QImage img(view.size(), QImage::Format_ARGB32);
    view.render(&img);

    // The middle of a decode step (generation lane, no request) is painted green.
    const DrawItem* step = nullptr;
    for (const DrawItem& it : view.drawList().items)
      if (it.kind == DrawItem::Span && it.event.lane == 2 && view.itemRect(it).width() > 8 &&
          view.timeArea().contains(view.itemRect(it).center().toPoint())) {
        step = &it;
        break;
      }
    QVERIFY(step);
    const QRectF r = view.itemRect(*step);
    const QColor c = img.pixelColor(QPoint(int(r.left()) + 2, int(r.bottom()) - 1));
    QVERIFY2(c.hsvHue() > 110 && c.hsvHue() < 170 && c.hsvSaturation() > 60, qPrintable(c.name()));

    // Selecting a request outlines its spans in orange.
    const auto visible = m.query(1, view.visibleRange().begin + 100'000'000, view.visibleRange().end);
    QVERIFY(!visible.empty());
    view.setSelectedRequest(visible.back().event.requestId);
    view.render(&img);
    if (qEnvironmentVariableIsSet("RAGWB_TIMELINE_SNAPSHOT"))
      img.save(qEnvironmentVariable("RAGWB_TIMELINE_SNAPSHOT"));
    const DrawItem* hl = nullptr;
    for (const DrawItem& it : view.drawList().items)
      if (it.kind == DrawItem::Highlight && view.timeArea().contains(view.itemRect(it).topLeft().toPoint()))
        hl = &it;
    QVERIFY(hl);
    const QRectF h = view.itemRect(*hl);
    const QColor edge = img.pixelColor(QPoint(int(h.left() + h.width() / 2), int(h.top()) - 1));
    QVERIFY2(edge.hsvHue() > 25 && edge.hsvHue() < 45 && edge.hsvSaturation() > 200,
             qPrintable(edge.name()));
  }
};

QTEST_MAIN(TestTimeline)
#include "test_timeline.moc"
