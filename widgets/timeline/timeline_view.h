// The timeline's widget half: lanes of a LaneModel painted left to right in time, one lane per
// worker with its concurrent spans stacked in rows, a header column of lane names, a time axis
// and a legend.
//
//   auto* model = new ragwb::LaneModel(this);
//   auto* view = new ragwb::TimelineView(model, this);
//   connect(view, &ragwb::TimelineView::requestSelected, this, &Window::showRequest);
//   model->append(batch);   // follow-live (on by default) keeps the newest span in view
//
// Colour: stage picks the hue, the request id the shade; speculative spans are hatched with a
// dashed outline, rolled-back spans get a red cross; runs of spans narrower than 3 px fold into
// one dotted block in the paled colour of the stage that takes most of their time
// (span_colors.h; click one to zoom into it). Wheel zooms around the cursor, dragging
// pans (and turns follow-live off), a click selects the request under the cursor and outlines
// all its spans in every lane, a double click fits the whole trace.
//
// Every frame paints exactly the draw list LaneModel::buildFrame() made for it, so the cost of a
// frame follows the number of pixels, not the number of spans.
#pragma once

#include <QWidget>
#include <algorithm>
#include <vector>

#include "timeline/lane_model.h"

namespace ragwb {

class TimelineView : public QWidget {
  Q_OBJECT
public:
  // `model` must outlive the view.
  explicit TimelineView(LaneModel* model, QWidget* parent = nullptr);

  LaneModel* model() const { return m_model; }

  // What is on screen now: [t0, t0 + time-area width * nsPerPixel).
  TimeRange visibleRange() const;
  double nsPerPixel() const { return m_nsPerPixel; }
  // Shows `range` across the time area. Not a pan: follow-live stays as it is.
  void setVisibleRange(TimeRange range);
  // Multiplies the visible duration by `factor` (< 1 zooms in) keeping the time under widget
  // x coordinate `x` fixed; with follow-live on, the right edge stays on the newest event.
  void zoomAt(double x, double factor);
  // Moves the view by `dx` pixels (positive shows earlier times) and turns follow-live off.
  void panByPixels(double dx);

  bool followLive() const { return m_followLive; }
  uint32_t selectedRequest() const { return m_selected; }

  // The area spans are drawn in (right of the lane names, between axis and legend).
  QRect timeArea() const;
  // The draw list of the current frame (built on demand from the model and the view state).
  const DrawList& drawList() const;
  // The draw item under widget position `pos`, or nullptr (Highlight items are skipped in
  // favour of the span or folded run beneath them).
  const DrawItem* itemAt(QPoint pos) const;
  // Where `item` of drawList() is painted, in widget coordinates (before clipping).
  QRectF itemRect(const DrawItem& item) const;
  // The tooltip text for `pos`: stage, request, duration in ms, tokens or clusters, flags;
  // empty where there is no span.
  QString textAt(QPoint pos) const;

  // Vertical scrolling, when the lanes are taller than the view (many lanes, or a requests lane
  // of many rows): Shift+wheel, or the wheel over the lane names. 0: the first lane at the top.
  int verticalScroll() const { return std::min(m_scrollY, maxVerticalScroll()); }
  int maxVerticalScroll() const;
  void setVerticalScroll(int y);  // clamped to [0, maxVerticalScroll()]

  QSize sizeHint() const override { return {1200, 420}; }
  QSize minimumSizeHint() const override { return {400, 160}; }

public Q_SLOTS:
  void setFollowLive(bool on);
  // 0 clears. Does not emit requestSelected (that is for the user's clicks).
  void setSelectedRequest(uint32_t requestId);
  void zoomToFit();

Q_SIGNALS:
  // The user clicked a span of `requestId` (0: clicked where no request is).
  void requestSelected(uint32_t requestId);
  void followLiveChanged(bool on);
  void visibleRangeChanged(ragwb::TimeRange range);

protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;

private:
  struct LaneGeometry {
    int top = 0;     // widget y of the lane's first row
    int height = 0;  // rows * rowHeight
    int rows = 1;
    int rowHeight = 1;
  };

  void onSpansAppended(qsizetype count, quint64 newestEnd);
  void invalidate();  // view state or data changed: rebuild the frame on next use
  void trackNewest();
  void setStart(double t0);  // clamps, invalidates, notifies
  const std::vector<LaneGeometry>& layout() const;
  uint64_t timeOrigin() const;

  void paintAxis(QPainter& p) const;
  void paintLanes(QPainter& p) const;
  void paintItems(QPainter& p) const;
  void paintHeader(QPainter& p) const;
  void paintLegend(QPainter& p) const;

  LaneModel* m_model;
  double m_t0 = 0;             // ns at the time area's left edge
  double m_nsPerPixel = 1e6;   // 1 ms per pixel until data says otherwise
  bool m_followLive = true;
  bool m_hasRange = false;     // the range was set (by data, fit or the user)
  uint32_t m_selected = 0;

  QPoint m_pressPos;
  QPoint m_lastDragPos;
  bool m_pressed = false;
  bool m_dragging = false;

  mutable bool m_frameValid = false;
  mutable DrawList m_drawList;
  mutable bool m_layoutValid = false;
  int m_scrollY = 0;                  // pixels the lanes are scrolled up
  mutable int m_contentHeight = 0;    // every lane's height and gaps (layout())
  mutable QSize m_layoutSize;         // the widget size the layout was made for
  mutable std::vector<LaneGeometry> m_layout;
};

}  // namespace ragwb
