#include "inspectors/dragon_timeline_view.h"

#include <QHelpEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "inspectors/dragon_event_model.h"

namespace ragwb {

using rag::DragonEvent;
using rag::DragonSide;

namespace {

constexpr double kLabelW = 92;
constexpr double kLaneH = 34;
constexpr double kLinkH = 70;
constexpr double kAggH = 18;
constexpr double kTop = 8;

QColor sideColor(DragonSide s) { return s == DragonSide::Device ? QColor(52, 120, 200) : QColor(230, 140, 40); }
const QColor kVerdictColor(140, 70, 170);
const QColor kAccept(40, 150, 70);
const QColor kReject(200, 50, 50);

// A step of 1, 2 or 5 × 10^k giving about `target` ticks over `span`.
double niceStep(double span, int target) {
  const double raw = span / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(std::max(raw, 1e-9))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

}  // namespace

DragonTimelineView::DragonTimelineView(DragonEventModel* model, QWidget* parent) : QWidget(parent), m_model(model) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  setAttribute(Qt::WA_OpaquePaintEvent);
  auto repaint = [this] { update(); };
  connect(model, &QAbstractItemModel::rowsInserted, this, repaint);
  connect(model, &QAbstractItemModel::modelReset, this, repaint);
}

QString DragonTimelineView::toolTipAt(QPointF p) const {
  // The smallest item under the point: a mark beats the decode span it sits on.
  const Hit* best = nullptr;
  for (const Hit& h : m_hits)
    if (h.rect.contains(p) && (!best || h.rect.width() * h.rect.height() < best->rect.width() * best->rect.height()))
      best = &h;
  return best ? best->text : QString();
}

bool DragonTimelineView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const QString t = toolTipAt(he->pos());
    if (t.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(he->globalPos(), t, this);
    return true;
  }
  return QWidget::event(e);
}

void DragonTimelineView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  p.setRenderHint(QPainter::Antialiasing, true);
  m_hits.clear();
  const double w = width();
  const double plotW = std::max(10.0, w - kLabelW - 12);
  const double span = std::max(1.0, m_model->endMs() * 1.03);
  auto x = [&](double ms) { return kLabelW + ms / span * plotW; };
  const double yDev = kTop, yLink = yDev + kLaneH, yCloud = yLink + kLinkH, yAgg = yCloud + kLaneH + 8,
               yAxis = yAgg + kAggH + 4;
  const QColor text = palette().color(QPalette::Text);
  const QColor grid = palette().color(QPalette::Mid);

  // Lane labels and backgrounds.
  QFont small = font();
  small.setPointSizeF(std::max(6.0, font().pointSizeF() - 1));
  p.setFont(small);
  auto laneBg = [&](double y, double h, const QString& label) {
    p.fillRect(QRectF(kLabelW, y, plotW, h), palette().color(QPalette::AlternateBase));
    p.setPen(text);
    p.drawText(QRectF(4, y, kLabelW - 8, h), Qt::AlignVCenter | Qt::AlignLeft, label);
  };
  laneBg(yDev, kLaneH, tr("device"));
  laneBg(yCloud, kLaneH, tr("cloud"));
  p.setPen(text);
  p.drawText(QRectF(4, yLink, kLabelW - 8, kLinkH), Qt::AlignVCenter | Qt::AlignLeft, tr("link"));
  p.drawText(QRectF(4, yAgg, kLabelW - 8, kAggH), Qt::AlignVCenter | Qt::AlignLeft, tr("aggregator"));

  // Axis.
  const double step = niceStep(span, std::max(2, static_cast<int>(plotW / 90)));
  p.setPen(grid);
  for (double t = 0; t <= span; t += step) {
    const double xt = x(t);
    p.drawLine(QPointF(xt, yDev), QPointF(xt, yAxis));
    p.drawText(QRectF(xt - 40, yAxis, 80, 16), Qt::AlignHCenter | Qt::AlignTop, tr("%1 ms").arg(t, 0, 'f', step < 1 ? 1 : 0));
  }

  const auto& events = m_model->events();
  auto laneY = [&](DragonSide s) { return s == DragonSide::Device ? yDev : yCloud; };

  // Decode spans (each side's own drafts).
  for (const DragonEvent& e : events) {
    if (e.kind != DragonEvent::Kind::Decoded) continue;
    const double x0 = x(e.startMs), x1 = std::max(x(e.endMs), x0 + 2);
    const QRectF r(x0, laneY(e.observer) + 6, x1 - x0, kLaneH - 12);
    p.fillRect(r, sideColor(e.observer));
    if (r.width() > 18) {
      p.setPen(Qt::white);
      p.drawText(r, Qt::AlignCenter, QString::number(e.pos));
    }
    m_hits.push_back({r.adjusted(-1, -6, 1, 6), tr("%1 drafted position %2 (%3) in %4 ms")
                                                    .arg(dragonSideName(e.observer))
                                                    .arg(e.pos)
                                                    .arg(QString::fromStdString(e.text).toHtmlEscaped())
                                                    .arg(e.decodeMs, 0, 'f', 2)});
  }

  // Frames between the sides.
  for (const DragonTransfer& t : m_model->transfers()) {
    const bool down = t.from == DragonSide::Device;  // device (top) to cloud (bottom)
    const QPointF a(x(t.sentMs), down ? yLink : yCloud), b(x(t.receivedMs), down ? yCloud : yLink);
    QPen pen(t.kind == DragonTransfer::Kind::Verdict ? kVerdictColor
             : t.kind == DragonTransfer::Kind::StaleDraft ? QColor(150, 150, 150)
                                                         : sideColor(t.from),
             t.kind == DragonTransfer::Kind::Verdict ? 1.6 : 1.1);
    if (t.kind == DragonTransfer::Kind::StaleDraft) pen.setStyle(Qt::DashLine);
    p.setPen(pen);
    p.drawLine(a, b);
    const QString what = t.kind == DragonTransfer::Kind::Verdict ? tr("verdict") : t.kind == DragonTransfer::Kind::StaleDraft ? tr("stale draft") : tr("draft");
    const QRectF hit = QRectF(a, b).normalized().adjusted(-3, 0, 3, 0);
    m_hits.push_back({hit, tr("%1 for position %2, %3 → %4: %5 ms on the link")
                               .arg(what)
                               .arg(t.pos)
                               .arg(dragonSideName(t.from), dragonSideName(t.from == DragonSide::Device ? DragonSide::Cloud : DragonSide::Device))
                               .arg(t.latencyMs(), 0, 'f', 1)});
  }

  // Accept / reject marks (from each verdict as its decider recorded it) and rollbacks.
  QFont bold = small;
  bold.setBold(true);
  p.setFont(bold);
  for (const DragonEvent& e : events) {
    if (e.kind == DragonEvent::Kind::Verdict && e.observer == e.side) {
      for (DragonSide s : {DragonSide::Device, DragonSide::Cloud}) {
        const bool ok = e.accepted[static_cast<int>(s)];
        const double xm = x(e.endMs);
        const QRectF r(xm - 6, s == DragonSide::Device ? yDev - 2 : yCloud + kLaneH - 12, 12, 14);
        p.setPen(ok ? kAccept : kReject);
        p.drawText(r, Qt::AlignCenter, ok ? QStringLiteral("✓") : QStringLiteral("✗"));
        m_hits.push_back({r, tr("position %1: target %2 decided by the %3; the %4's draft %5")
                                 .arg(e.pos)
                                 .arg(QString::fromStdString(e.text).toHtmlEscaped())
                                 .arg(dragonSideName(e.side), dragonSideName(s), ok ? tr("accepted") : tr("rejected"))});
      }
    } else if (e.kind == DragonEvent::Kind::Rollback) {
      const double xm = x(e.endMs);
      const double y = laneY(e.observer);
      p.setPen(QPen(kReject, 1.5));
      p.drawLine(QPointF(xm, y + 3), QPointF(xm, y + kLaneH - 3));
      const QRectF r(xm + 1, y + kLaneH / 2 - 7, 12, 14);
      p.drawText(r, Qt::AlignCenter, QStringLiteral("↺"));
      m_hits.push_back({r.adjusted(-3, -8, 0, 8), tr("the %1 rolled back at position %2 and continued from %3")
                                                      .arg(dragonSideName(e.observer))
                                                      .arg(e.pos)
                                                      .arg(QString::fromStdString(e.text).toHtmlEscaped())});
    }
  }
  p.setFont(small);

  // Who held the aggregator.
  for (const AggregatorSpan& s : m_model->aggregatorSpans()) {
    const QRectF r(x(s.beginMs), yAgg, std::max(1.0, x(s.endMs) - x(s.beginMs)), kAggH);
    QColor c = sideColor(s.side);
    c.setAlpha(170);
    p.fillRect(r, c);
    if (r.width() > 40) {
      p.setPen(Qt::white);
      p.drawText(r, Qt::AlignCenter, dragonSideName(s.side));
    }
    m_hits.push_back({r, tr("the %1 held the aggregator from %2 to %3 ms")
                             .arg(dragonSideName(s.side))
                             .arg(s.beginMs, 0, 'f', 1)
                             .arg(s.endMs, 0, 'f', 1)});
  }
  if (events.empty()) {
    p.setPen(text);
    p.drawText(QRectF(kLabelW, yLink, plotW, kLinkH), Qt::AlignCenter,
               tr("Set the link, type a question and press Run: both sides' decoding, the frames between them, "
                  "accept/reject marks, rollbacks and the aggregator's moves appear here live."));
  }
}

}  // namespace ragwb
