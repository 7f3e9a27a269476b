#include "timeline/timeline_view.h"

#include "timeline/span_colors.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <array>
#include <cmath>

namespace ragwb {

namespace {

constexpr int kHeaderWidth = 118;
constexpr int kAxisHeight = 26;
constexpr int kLegendHeight = 24;
constexpr int kLaneGap = 5;
constexpr int kMinRowHeight = 3;
constexpr int kMaxRowHeight = 18;
constexpr int kFewRows = 4;  // lanes with at most this many rows get full-height rows
constexpr double kMinNsPerPixel = 0.05;
constexpr double kMaxNsPerPixel = 1e11;
constexpr int kDragThreshold = 3;

const QColor kBackground(0xfb, 0xfb, 0xfc);
const QColor kLaneShade(0xf0, 0xf1, 0xf5);
const QColor kHeaderFill(0xe4, 0xe6, 0xee);
const QColor kGridLine(0xdd, 0xdf, 0xe6);
const QColor kText(0x26, 0x2a, 0x33);
const QColor kFolded(0xa4, 0xa8, 0xb0);
const QColor kRollback(0xd3, 0x20, 0x20);
const QColor kHighlight(0xff, 0x8f, 0x00);

QString stageName(rag::TraceStage s) {
  const std::string_view n = rag::traceStageName(s);
  return QString::fromLatin1(n.data(), static_cast<qsizetype>(n.size()));
}

// "3.214 ms"; precision follows magnitude.
QString formatDuration(double ns) {
  const double a = std::abs(ns);
  if (a >= 1e9) return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', 3);
  if (a >= 1e6) return QStringLiteral("%1 ms").arg(ns / 1e6, 0, 'f', 3);
  if (a >= 1e3) return QStringLiteral("%1 µs").arg(ns / 1e3, 0, 'f', 1);
  return QStringLiteral("%1 ns").arg(ns, 0, 'f', 0);
}

// An axis label at a multiple of `step`, with as few decimals as the step needs; past one second
// in seconds ("13.02 s"), so labels stay short deep into a long trace.
QString formatTick(double ns, double step) {
  if (std::abs(ns) >= 1e9 || step >= 1e9) {
    const int decimals = std::clamp(int(std::ceil(-std::log10(step / 1e9) - 1e-9)), 0, 6);
    return QStringLiteral("%1 s").arg(ns / 1e9, 0, 'f', decimals);
  }
  struct Unit {
    double scale;
    const char* name;
  };
  const Unit u = step >= 1e6 ? Unit{1e6, "ms"} : step >= 1e3 ? Unit{1e3, "µs"} : Unit{1, "ns"};
  const double s = step / u.scale;
  const int decimals = s >= 1 ? 0 : s >= 0.1 ? 1 : 2;
  return QStringLiteral("%1 %2").arg(ns / u.scale, 0, 'f', decimals).arg(QString::fromUtf8(u.name));
}

// 1, 2 or 5 times a power of ten, at least `raw`.
double niceStep(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-3))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// What arg0/arg1 mean on each kind of lane the serving engine registers (rag/trace.h).
QString argumentText(rag::LaneKind lane, const rag::TraceEvent& e) {
  switch (e.stage) {
    case rag::TraceStage::Decode:
    case rag::TraceStage::Prefill:
      if (lane == rag::LaneKind::Generation)
        return QStringLiteral("rows %1, batch %2").arg(e.arg0).arg(e.arg1);
      if (lane == rag::LaneKind::Requests)
        return QStringLiteral("tokens %1, node %2").arg(e.arg0).arg(e.arg1);
      return QStringLiteral("tokens %1").arg(e.arg0);
    case rag::TraceStage::RetrievalStep:
    case rag::TraceStage::ClusterScan:
      if (lane == rag::LaneKind::Retrieval)
        return QStringLiteral("clusters %1, tasks %2").arg(e.arg0).arg(e.arg1);
      if (lane == rag::LaneKind::Requests)
        return QStringLiteral("clusters %1, node %2").arg(e.arg0).arg(e.arg1);
      return QStringLiteral("clusters %1").arg(e.arg0);
    case rag::TraceStage::Compress:
      return QStringLiteral("sentences %1, node %2").arg(e.arg0).arg(e.arg1);
    default:
      return QStringLiteral("arg0 %1, arg1 %2").arg(e.arg0).arg(e.arg1);
  }
}

void drawCross(QPainter& p, const QRectF& r) {
  p.setPen(QPen(kRollback, 1.6));
  const double s = std::min(r.width(), r.height()) * 0.5 - 1;
  const QPointF c = r.center();
  p.drawLine(QPointF(c.x() - s, c.y() - s), QPointF(c.x() + s, c.y() + s));
  p.drawLine(QPointF(c.x() - s, c.y() + s), QPointF(c.x() + s, c.y() - s));
}

}  // namespace

TimelineView::TimelineView(LaneModel* model, QWidget* parent) : QWidget(parent), m_model(model) {
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setFocusPolicy(Qt::WheelFocus);
  connect(m_model, &LaneModel::spansAppended, this, &TimelineView::onSpansAppended);
  connect(m_model, &LaneModel::lanesChanged, this, [this] {
    m_layoutValid = false;
    invalidate();
  });
  connect(m_model, &LaneModel::cleared, this, [this] {
    m_hasRange = false;
    m_selected = 0;
    m_layoutValid = false;
    invalidate();
  });
  if (m_model->spanCount() > 0) zoomToFit();
}

QRect TimelineView::timeArea() const {
  return QRect(kHeaderWidth, kAxisHeight, std::max(1, width() - kHeaderWidth),
               std::max(1, height() - kAxisHeight - kLegendHeight));
}

TimeRange TimelineView::visibleRange() const {
  const uint64_t t0 = static_cast<uint64_t>(std::max(0.0, m_t0));
  return {t0, t0 + static_cast<uint64_t>(timeArea().width() * m_nsPerPixel)};
}

void TimelineView::invalidate() {
  m_frameValid = false;
  update();
}

void TimelineView::setStart(double t0) {
  m_t0 = std::max(0.0, t0);
  m_hasRange = true;
  invalidate();
  Q_EMIT visibleRangeChanged(visibleRange());
}

void TimelineView::setVisibleRange(TimeRange range) {
  if (range.empty()) return;
  m_nsPerPixel = std::clamp(double(range.length()) / timeArea().width(), kMinNsPerPixel,
                            kMaxNsPerPixel);
  setStart(double(range.begin));
}

void TimelineView::zoomAt(double x, double factor) {
  if (!(factor > 0)) return;
  const QRect area = timeArea();
  const double px = m_followLive ? area.width() : std::clamp(x - area.left(), 0.0, double(area.width()));
  const double anchor = m_t0 + px * m_nsPerPixel;
  m_nsPerPixel = std::clamp(m_nsPerPixel * factor, kMinNsPerPixel, kMaxNsPerPixel);
  setStart(anchor - px * m_nsPerPixel);
}

void TimelineView::panByPixels(double dx) {
  setFollowLive(false);
  setStart(m_t0 - dx * m_nsPerPixel);
}

void TimelineView::setFollowLive(bool on) {
  if (m_followLive == on) return;
  m_followLive = on;
  if (on) trackNewest();
  Q_EMIT followLiveChanged(on);
}

void TimelineView::trackNewest() {
  if (m_model->spanCount() == 0) return;
  setStart(double(m_model->extent().end) - timeArea().width() * m_nsPerPixel);
}

void TimelineView::setSelectedRequest(uint32_t requestId) {
  if (m_selected == requestId) return;
  m_selected = requestId;
  invalidate();
}

void TimelineView::zoomToFit() {
  const TimeRange ext = m_model->extent();
  if (ext.empty()) return;
  const uint64_t margin = ext.length() / 50;
  setVisibleRange({ext.begin > margin ? ext.begin - margin : 0, ext.end + margin});
}

void TimelineView::onSpansAppended(qsizetype, quint64) {
  m_layoutValid = false;
  if (m_followLive) {
    if (!m_hasRange) {
      // Following a live run starts with a few seconds in view, not the first batch's microseconds.
      // (The window ends at the newest event; times before the clock's zero do not exist.)
      const TimeRange ext = m_model->extent();
      const uint64_t window = std::min<uint64_t>(3'000'000'000ull, ext.end);
      if (window > 0) setVisibleRange({ext.end - window, ext.end});
    }
    trackNewest();
  } else if (!m_hasRange) {
    zoomToFit();
  }
  invalidate();
}

const std::vector<TimelineView::LaneGeometry>& TimelineView::layout() const {
  if (m_layoutValid && m_layoutSize == size()) return m_layout;
  m_layoutSize = size();
  const QRect area = timeArea();
  const int lanes = m_model->laneCount();
  // Worker lanes (a few rows) keep readable rows; lanes of many concurrent spans (requests)
  // share what is left, down to kMinRowHeight.
  int fewRows = 0, manyRows = 0;
  for (int l = 0; l < lanes; ++l) {
    const int r = m_model->rowCount(l);
    (r <= kFewRows ? fewRows : manyRows) += r;
  }
  const int avail = area.height() - kLaneGap * (lanes + 1);
  const int fewHeight =
      fewRows > 0 ? std::clamp(avail / std::max(1, fewRows + manyRows / 3), kMinRowHeight, kMaxRowHeight)
                  : kMaxRowHeight;
  const int manyHeight = manyRows > 0 ? std::clamp((avail - fewRows * fewHeight) / manyRows,
                                                   kMinRowHeight, fewHeight)
                                      : fewHeight;
  m_layout.assign(size_t(lanes), {});
  int y = area.top() + kLaneGap;
  for (int l = 0; l < lanes; ++l) {
    LaneGeometry& g = m_layout[size_t(l)];
    g.rows = m_model->rowCount(l);
    g.rowHeight = g.rows <= kFewRows ? fewHeight : manyHeight;
    g.top = y;
    g.height = g.rows * g.rowHeight;
    y += g.height + kLaneGap;
  }
  m_contentHeight = y - area.top();
  // Scrolled: every lane moves up by the (clamped) offset; painting clips to the time area.
  const int scroll = std::clamp(m_scrollY, 0, std::max(0, m_contentHeight - area.height()));
  for (LaneGeometry& g : m_layout) g.top -= scroll;
  m_layoutValid = true;
  return m_layout;
}

int TimelineView::maxVerticalScroll() const {
  layout();
  return std::max(0, m_contentHeight - timeArea().height());
}

void TimelineView::setVerticalScroll(int y) {
  const int clamped = std::clamp(y, 0, maxVerticalScroll());
  if (clamped == m_scrollY) return;
  m_scrollY = clamped;
  m_layoutValid = false;
  update();
}

const DrawList& TimelineView::drawList() const {
  if (!m_frameValid) {
    FrameParams f;
    f.t0 = static_cast<uint64_t>(std::max(0.0, m_t0));
    f.nsPerPixel = m_nsPerPixel;
    f.widthPx = timeArea().width();
    f.selectedRequest = m_selected;
    m_model->buildFrame(f, m_drawList);
    // The frame starts at a whole ns; keep pixels aligned to the view's fractional start.
    const double shift = (double(f.t0) - m_t0) / m_nsPerPixel;
    if (shift != 0)
      for (DrawItem& it : m_drawList.items) {
        it.x0 += shift;
        it.x1 += shift;
      }
    m_frameValid = true;
  }
  return m_drawList;
}

QRectF TimelineView::itemRect(const DrawItem& item) const {
  const auto& lanes = layout();
  const LaneGeometry& g = lanes[item.lane];
  const double left = timeArea().left();
  double x0 = left + item.x0;
  double w = std::max(item.x1 - item.x0, 1.0);
  return QRectF(x0, g.top + item.row * g.rowHeight + 0.5, w, g.rowHeight - 1.0);
}

const DrawItem* TimelineView::itemAt(QPoint pos) const {
  if (!timeArea().contains(pos)) return nullptr;
  const DrawList& list = drawList();
  const auto& lanes = layout();
  const DrawItem* best = nullptr;
  double bestDist = 3.0;  // px of slack either side for thin spans
  for (const DrawItem& it : list.items) {
    if (it.kind == DrawItem::Highlight || it.lane >= lanes.size()) continue;
    const QRectF r = itemRect(it);
    if (pos.y() < r.top() || pos.y() > r.bottom()) continue;
    const double d = pos.x() < r.left() ? r.left() - pos.x() : pos.x() > r.right() ? pos.x() - r.right() : 0;
    if (d < bestDist || (d == 0 && best && bestDist == 0 && r.width() < itemRect(*best).width())) {
      best = &it;
      bestDist = d;
    }
  }
  return best;
}

QString TimelineView::textAt(QPoint pos) const {
  const DrawItem* it = itemAt(pos);
  if (!it) return {};
  const rag::TraceEvent& e = it->event;
  const QString lane = m_model->laneName(e.lane);
  const rag::LaneKind kind = m_model->laneKind(e.lane);
  if (it->kind == DrawItem::Folded) {
    return QStringLiteral("%1 spans folded in %2\n%3 from +%4\nclick to zoom in")
        .arg(it->count)
        .arg(lane, formatDuration(double(e.durationNs())),
             formatDuration(double(e.beginNs - timeOrigin())));
  }
  QStringList lines;
  QString head = stageName(e.stage);
  if (e.requestId != 0) head += QStringLiteral(" · request %1").arg(e.requestId);
  lines << head;
  const bool nodeRun = kind == rag::LaneKind::Requests && e.stage != rag::TraceStage::Request;
  lines << QStringLiteral("%1 %2 ms  (lane %3, +%4)")
               .arg(nodeRun ? QStringLiteral("node run") : QStringLiteral("duration"))
               .arg(double(e.durationNs()) / 1e6, 0, 'f', 3)
               .arg(lane, formatDuration(double(e.beginNs - timeOrigin())));
  lines << argumentText(kind, e);
  QStringList flags;
  if (e.flags & rag::kTraceSpeculative) flags << QStringLiteral("speculative");
  if (e.flags & rag::kTraceRollback) flags << QStringLiteral("rolled back");
  if (e.flags & rag::kTraceGpu) flags << QStringLiteral("GPU");
  if (!flags.isEmpty()) lines << flags.join(QStringLiteral(", "));
  return lines.join(QLatin1Char('\n'));
}

uint64_t TimelineView::timeOrigin() const {
  const TimeRange ext = m_model->extent();
  return ext.empty() ? 0 : ext.begin;
}

// ---- events ----------------------------------------------------------------------------------

bool TimelineView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString text = textAt(help->pos());
    if (text.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(help->globalPos(), text, this);
    return true;
  }
  return QWidget::event(e);
}

void TimelineView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  m_scrollY = std::clamp(m_scrollY, 0, maxVerticalScroll());  // the layout follows the size
  if (m_followLive) trackNewest();
  invalidate();
}

void TimelineView::wheelEvent(QWheelEvent* e) {
  const QPoint d = e->angleDelta();
  const bool overNames = e->position().x() < timeArea().left();
  if (d.y() != 0 && ((e->modifiers() & Qt::ShiftModifier) || overNames) && maxVerticalScroll() > 0) {
    setVerticalScroll(m_scrollY - d.y() / 3);  // one notch: 40 px
  } else if (std::abs(d.x()) > std::abs(d.y())) {
    panByPixels(d.x() / 2.0);
  } else if (d.y() != 0) {
    zoomAt(e->position().x(), std::pow(2.0, -d.y() / 240.0));  // one notch: x0.71
  }
  e->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return QWidget::mousePressEvent(e);
  m_pressed = true;
  m_dragging = false;
  m_pressPos = m_lastDragPos = e->position().toPoint();
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
  const QPoint pos = e->position().toPoint();
  if (!m_pressed) return;
  if (!m_dragging && (pos - m_pressPos).manhattanLength() > kDragThreshold) {
    m_dragging = true;
    setCursor(Qt::ClosedHandCursor);
  }
  if (m_dragging) {
    panByPixels(pos.x() - m_lastDragPos.x());
    m_lastDragPos = pos;
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton || !m_pressed) return QWidget::mouseReleaseEvent(e);
  m_pressed = false;
  if (m_dragging) {
    m_dragging = false;
    unsetCursor();
    return;
  }
  const DrawItem* it = itemAt(e->position().toPoint());
  if (it && it->kind == DrawItem::Folded) {
    const uint64_t span = std::max<uint64_t>(it->event.durationNs(), 1000);
    setFollowLive(false);
    setVisibleRange({it->event.beginNs - std::min(it->event.beginNs, span / 4),
                     it->event.endNs + span / 4});
    return;
  }
  const uint32_t id = it ? it->event.requestId : 0;
  if (id == m_selected) return;
  setSelectedRequest(id);
  Q_EMIT requestSelected(id);
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) zoomToFit();
}

// ---- painting --------------------------------------------------------------------------------

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), kBackground);
  paintLanes(p);
  paintAxis(p);
  paintItems(p);
  {
    p.save();  // lane names scroll with their lanes, under the axis
    p.setClipRect(QRect(0, kAxisHeight, kHeaderWidth, timeArea().height()));
    paintHeader(p);
    p.restore();
  }
  paintLegend(p);
  if (const int maxScroll = maxVerticalScroll(); maxScroll > 0) {
    // Where the view is in the lanes: a thin thumb at the right edge (Shift+wheel scrolls).
    const QRect area = timeArea();
    const double shown = double(area.height()) / double(area.height() + maxScroll);
    const double h = std::max(12.0, shown * area.height());
    const double y = area.top() + (area.height() - h) * double(m_scrollY) / double(maxScroll);
    p.fillRect(QRectF(area.right() - 4, y, 4, h), QColor(0, 0, 0, 90));
  }
}

void TimelineView::paintLanes(QPainter& p) const {
  const QRect area = timeArea();
  p.save();
  p.setClipRect(QRect(0, area.top(), width(), area.height()));
  const auto& lanes = layout();
  for (size_t l = 0; l < lanes.size(); ++l) {
    if (l % 2 == 1) continue;
    const LaneGeometry& g = lanes[l];
    p.fillRect(QRect(0, g.top - kLaneGap / 2, width(), g.height + kLaneGap), kLaneShade);
  }
  p.restore();
  // Vertical grid at the axis ticks is drawn by paintAxis; lanes end at the area bottom.
  p.setPen(kGridLine);
  p.drawLine(area.left(), area.bottom() + 1, area.right(), area.bottom() + 1);
}

void TimelineView::paintAxis(QPainter& p) const {
  const QRect area = timeArea();
  const double origin = double(timeOrigin());
  const double step = niceStep(110 * m_nsPerPixel);
  const double first = std::ceil((m_t0 - origin) / step) * step;
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.9);
  p.setFont(f);
  const QFontMetrics fm(f);
  for (double t = first;; t += step) {
    const double x = area.left() + (origin + t - m_t0) / m_nsPerPixel;
    if (x > area.right()) break;
    p.setPen(kGridLine);
    p.drawLine(QPointF(x, area.top()), QPointF(x, area.bottom()));
    p.setPen(kText);
    p.drawLine(QPointF(x, kAxisHeight - 6), QPointF(x, kAxisHeight - 1));
    const QString label = formatTick(t, step);
    if (x + 3 + fm.horizontalAdvance(label) <= width()) p.drawText(QPointF(x + 3, kAxisHeight - 8), label);
    // Minor ticks at fifths of the step.
    for (int m = 1; m < 5; ++m) {
      const double xm = x + m * step / 5 / m_nsPerPixel;
      if (xm > area.right()) break;
      p.drawLine(QPointF(xm, kAxisHeight - 3), QPointF(xm, kAxisHeight - 1));
    }
  }
  p.setPen(kGridLine);
  p.drawLine(0, kAxisHeight - 1, width(), kAxisHeight - 1);
  // Where we are: visible duration, follow-live state.
  const QString status = QStringLiteral("%1%2").arg(formatDuration(area.width() * m_nsPerPixel),
                                                    m_followLive ? QStringLiteral(" · live") : QString());
  p.fillRect(QRect(0, 0, kHeaderWidth, kAxisHeight - 1), kHeaderFill);
  p.setPen(m_followLive ? QColor(0x1b, 0x7f, 0x3a) : kText);
  p.drawText(QRect(6, 0, kHeaderWidth - 8, kAxisHeight - 1), Qt::AlignVCenter | Qt::AlignLeft,
             fm.elidedText(status, Qt::ElideRight, kHeaderWidth - 8));
}

void TimelineView::paintItems(QPainter& p) const {
  const QRect area = timeArea();
  const DrawList& list = drawList();
  const auto& lanes = layout();
  p.save();
  p.setClipRect(area);
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.82);
  p.setFont(f);
  const QFontMetrics fm(f);
  const int labelRowHeight = fm.height() - 2;
  const bool dim = m_selected != 0;
  const QBrush hatch(QColor(0, 0, 0, 90), Qt::BDiagPattern);
  const QPen dashed(QColor(0, 0, 0, 150), 1, Qt::DashLine);

  for (const DrawItem& it : list.items) {
    if (it.kind == DrawItem::Highlight || it.lane >= lanes.size()) continue;
    QRectF r = itemRect(it);
    if (r.right() < area.left() || r.left() > area.right()) continue;
    r = r.intersected(QRectF(area.left() - 2, r.top(), area.width() + 4, r.height()));
    if (it.kind == DrawItem::Folded) {
      // The colour of the stage that dominates the run, paled, so the whole-run view still shows
      // where the time goes (Tracy draws folded zones in their own colour).
      p.fillRect(r, foldedColor(it.dominant));
      p.fillRect(r, QBrush(QColor(255, 255, 255, 70), Qt::Dense6Pattern));
      if (r.height() >= labelRowHeight && r.width() > 60) {
        p.setPen(kText);
        p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                   QStringLiteral("%1 spans").arg(it.count));
      }
      continue;
    }
    const rag::TraceEvent& e = it.event;
    QColor c = spanColor(e);
    if (dim && e.requestId != m_selected) c.setAlpha(e.requestId == 0 ? 150 : 95);
    p.fillRect(r, c);
    if (e.flags & rag::kTraceSpeculative) {
      p.fillRect(r, hatch);
      if (r.width() >= 4) {
        p.setPen(dashed);
        p.setBrush(Qt::NoBrush);
        p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
      }
    }
    if (e.flags & rag::kTraceRollback) {
      if (r.width() >= 6) {
        drawCross(p, r);
      } else {
        p.fillRect(QRectF(r.left(), r.top(), r.width(), 2), kRollback);
      }
    }
    if (r.height() >= labelRowHeight && r.width() > 48) {
      QString text = stageName(e.stage);
      if (e.requestId != 0) text += QStringLiteral(" #%1").arg(e.requestId);
      p.setPen(dim && e.requestId != m_selected ? QColor(0, 0, 0, 110) : kText);
      p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                 fm.elidedText(text, Qt::ElideRight, int(r.width()) - 5));
    }
  }

  // The selected request on top, in every lane, at least 3 px wide even where it folded.
  p.setBrush(Qt::NoBrush);
  p.setPen(QPen(kHighlight, 2));
  for (const DrawItem& it : list.items) {
    if (it.kind != DrawItem::Highlight || it.lane >= lanes.size()) continue;
    QRectF r = itemRect(it);
    if (r.width() < 3) r.adjust(-(3 - r.width()) / 2, 0, (3 - r.width()) / 2, 0);
    p.drawRect(r.adjusted(-1, -1, 1, 1));
  }
  p.restore();
}

void TimelineView::paintHeader(QPainter& p) const {
  const auto& lanes = layout();
  p.fillRect(QRect(0, kAxisHeight, kHeaderWidth, timeArea().height()), kHeaderFill);
  QFont f = font();
  f.setBold(true);
  QFont small = font();
  small.setPointSizeF(small.pointSizeF() * 0.8);
  const QFontMetrics fm(f);
  for (size_t l = 0; l < lanes.size(); ++l) {
    const LaneGeometry& g = lanes[l];
    const int h = std::max(g.height, fm.height());
    const QRect box(8, g.top, kHeaderWidth - 12, h);
    p.setPen(kText);
    p.setFont(f);
    const QString name = fm.elidedText(m_model->laneName(int(l)), Qt::ElideRight, box.width());
    if (g.rows > 1 && g.height >= 2 * fm.height()) {
      p.drawText(box, Qt::AlignTop | Qt::AlignLeft, name);
      p.setFont(small);
      p.setPen(QColor(0x60, 0x66, 0x73));
      p.drawText(box.adjusted(0, fm.height(), 0, 0), Qt::AlignTop | Qt::AlignLeft,
                 QStringLiteral("%1 rows").arg(g.rows));
    } else {
      p.drawText(QRect(box.left(), g.top + g.height / 2 - fm.height() / 2, box.width(), fm.height()),
                 Qt::AlignVCenter | Qt::AlignLeft, name);
    }
  }
  p.setPen(kGridLine);
  p.drawLine(kHeaderWidth - 1, kAxisHeight, kHeaderWidth - 1, height() - kLegendHeight);
}

void TimelineView::paintLegend(QPainter& p) const {
  const QRect box(0, height() - kLegendHeight, width(), kLegendHeight);
  p.fillRect(box, kHeaderFill);
  QFont f = font();
  f.setPointSizeF(f.pointSizeF() * 0.85);
  p.setFont(f);
  const QFontMetrics fm(f);
  const int sw = 14;
  const int y = box.top() + (kLegendHeight - 10) / 2;
  int x = 8;
  auto swatch = [&](const QString& label, auto&& paintSwatch) {
    const QRectF r(x, y, sw, 10);
    paintSwatch(r);
    p.setPen(kText);
    p.drawText(QPointF(x + sw + 4, box.top() + (kLegendHeight + fm.ascent() - fm.descent()) / 2),
               label);
    x += sw + 4 + fm.horizontalAdvance(label) + 14;
  };
  uint32_t mask = m_model->stageMask();
  if (mask == 0)
    for (rag::TraceStage s : {rag::TraceStage::Schedule, rag::TraceStage::Decode,
                              rag::TraceStage::RetrievalStep, rag::TraceStage::Embed})
      mask |= 1u << unsigned(s);
  for (unsigned s = 0; s < unsigned(rag::TraceStage::Count_); ++s) {
    if (!(mask & (1u << s))) continue;
    rag::TraceEvent e;
    e.stage = rag::TraceStage(s);
    swatch(stageName(e.stage), [&](const QRectF& r) { p.fillRect(r, spanColor(e)); });
  }
  x += 10;
  const QColor neutral(0xc8, 0xcd, 0xd8);
  swatch(QStringLiteral("speculative"), [&](const QRectF& r) {
    p.fillRect(r, neutral);
    p.fillRect(r, QBrush(QColor(0, 0, 0, 90), Qt::BDiagPattern));
    p.setPen(QPen(QColor(0, 0, 0, 150), 1, Qt::DashLine));
    p.setBrush(Qt::NoBrush);
    p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
  });
  swatch(QStringLiteral("rolled back"), [&](const QRectF& r) {
    p.fillRect(r, neutral);
    drawCross(p, r);
  });
  // Folded runs take their main stage's colour, paled and dotted: the swatch shows the dots.
  swatch(QStringLiteral("folded (< 3 px)"), [&](const QRectF& r) {
    p.fillRect(r, kFolded);
    p.fillRect(r, QBrush(QColor(255, 255, 255, 70), Qt::Dense6Pattern));
  });
  swatch(m_selected ? QStringLiteral("request %1").arg(m_selected) : QStringLiteral("selected request"),
         [&](const QRectF& r) {
           p.setPen(QPen(kHighlight, 2));
           p.setBrush(Qt::NoBrush);
           p.drawRect(r.adjusted(1, 1, -1, -1));
         });
  const QString count = QStringLiteral("%1 spans · %2 drawn")
                            .arg(m_model->spanCount())
                            .arg(drawList().items.size());
  p.setPen(QColor(0x60, 0x66, 0x73));
  p.drawText(box.adjusted(0, 0, -8, 0), Qt::AlignVCenter | Qt::AlignRight, count);
}

}  // namespace ragwb
