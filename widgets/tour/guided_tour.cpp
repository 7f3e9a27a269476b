#include "tour/guided_tour.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QVBoxLayout>
#include <algorithm>

namespace ragwb {

std::vector<TourStep> defaultTourSteps() {
  using A = TourStep::Action;
  auto t = [](const char* s) { return QObject::tr(s); };
  return {
      {QString(), t("The workflow"),
       t("The editor now holds the IRG workflow as a graph: retrieval and generation nodes joined by edges, "
         "the conditional ones guarded; select a node to edit its prompt in the property panel."),
       A::LoadWorkflow},
      {QStringLiteral("runDock"), t("Running it"),
       t("The run panel has just sent a few test questions through this workflow under the hedra policy: "
         "each request's latency plots against the SLO line as it finishes, and the table lists its answer."),
       A::RunWorkflow},
      {QStringLiteral("timelineDock"), t("Pipeline timeline"),
       t("One lane per engine thread, a span per retrieval sub-stage or generation step, coloured by stage: "
         "watch retrieval and generation overlap (wheel zooms, drag pans, click a span to follow its request)."),
       A::None},
      {QStringLiteral("heatmapDock"), t("Cluster heatmap"),
       t("How often each IVF cluster of the passage index was visited per half second, hottest on top: the "
         "clusters the questions share."),
       A::None},
      {QStringLiteral("kvTreeDock"), t("KV tree"),
       t("The generation worker's prefix cache as a tree: each row a cached prompt prefix with its tokens, "
         "size, memory tier and hits, so you see which prompt parts the requests reuse."),
       A::None},
      {QStringLiteral("historyDock"), t("Run history"),
       t("Every run is kept in runs.db: open a past one to scrub its timeline again, or export its metrics "
         "and trace."),
       A::None},
      {QStringLiteral("dragonDock"), t("DRAGON"),
       t("A device and a cloud answering one question together over a link you set: their drafts, the "
         "frames between them and who decides each token."),
       A::None},
      {QStringLiteral("reproduceDock"), t("Reproduce"),
       t("The papers' headline figures: run the matching bench and see our numbers beside the ones the "
         "paper reports."),
       A::None},
  };
}

GuidedTour::GuidedTour(std::vector<TourStep> steps, QObject* parent)
    : QObject(parent), m_steps(std::move(steps)), m_acted(m_steps.size(), false) {}

void GuidedTour::start() {
  std::fill(m_acted.begin(), m_acted.end(), false);
  if (m_steps.empty()) {
    m_current = -1;
    Q_EMIT finished(false);
    return;
  }
  enter(0);
}

void GuidedTour::next() {
  if (!active()) return;
  if (m_current + 1 >= static_cast<int>(m_steps.size())) {
    m_current = -1;
    Q_EMIT finished(false);
    return;
  }
  enter(m_current + 1);
}

void GuidedTour::back() {
  if (active() && m_current > 0) enter(m_current - 1);
}

void GuidedTour::skip() {
  if (!active()) return;
  m_current = -1;
  Q_EMIT finished(true);
}

void GuidedTour::enter(int index) {
  m_current = index;
  const size_t i = static_cast<size_t>(index);
  Q_EMIT stepChanged(index);
  if (m_steps[i].action != Action::None && !m_acted[i]) {
    m_acted[i] = true;
    Q_EMIT actionRequested(m_steps[i].action);
  }
}

// A frame drawn over the window around the step's view; it lets every click through.
class TourPanel::Frame : public QWidget {
public:
  explicit Frame(QWidget* window) : QWidget(window) {
    setAttribute(Qt::WA_TransparentForMouseEvents);
    setAttribute(Qt::WA_NoSystemBackground);
  }
  void frame(const QRect& r) {
    m_rect = r;
    update();
  }

protected:
  void paintEvent(QPaintEvent*) override {
    if (m_rect.isNull()) return;
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.setPen(QPen(QColor(255, 140, 0), 4));
    p.drawRoundedRect(QRectF(m_rect).adjusted(2, 2, -2, -2), 6, 6);
  }

private:
  QRect m_rect;
};

TourPanel::TourPanel(GuidedTour* tour, QWidget* window, std::function<QWidget*(const QString&)> resolve)
    : QFrame(window),
      m_tour(tour),
      m_resolve(std::move(resolve)),
      m_step(new QLabel),
      m_title(new QLabel),
      m_text(new QLabel),
      m_back(new QPushButton(tr("Back"))),
      m_next(new QPushButton(tr("Next"))),
      m_skip(new QPushButton(tr("Skip tour"))),
      m_frame(new Frame(window)) {
  setObjectName(QStringLiteral("tourPanel"));
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);
  setStyleSheet(QStringLiteral("#tourPanel { border: 2px solid #ff8c00; border-radius: 6px; }"));
  QFont bold = m_title->font();
  bold.setBold(true);
  bold.setPointSizeF(bold.pointSizeF() * 1.15);
  m_title->setFont(bold);
  m_text->setWordWrap(true);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_skip);
  buttons->addStretch(1);
  buttons->addWidget(m_back);
  buttons->addWidget(m_next);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_step);
  layout->addWidget(m_title);
  layout->addWidget(m_text, 1);
  layout->addLayout(buttons);
  setFixedWidth(420);
  m_next->setDefault(true);

  connect(m_next, &QPushButton::clicked, tour, &GuidedTour::next);
  connect(m_back, &QPushButton::clicked, tour, &GuidedTour::back);
  connect(m_skip, &QPushButton::clicked, tour, &GuidedTour::skip);
  connect(tour, &GuidedTour::stepChanged, this, &TourPanel::showStep);
  connect(tour, &GuidedTour::finished, this, [this] {
    m_target = nullptr;
    m_frame->hide();
    hide();
  });
  window->installEventFilter(this);
  m_frame->hide();
  hide();
}

void TourPanel::showStep(int index) {
  const TourStep& s = m_tour->steps()[static_cast<size_t>(index)];
  const int n = static_cast<int>(m_tour->steps().size());
  m_step->setText(tr("Step %1 of %2").arg(index + 1).arg(n));
  m_title->setText(s.title);
  m_text->setText(s.text);
  m_back->setEnabled(index > 0);
  m_next->setText(index + 1 == n ? tr("Finish") : tr("Next"));
  m_target = m_resolve ? m_resolve(s.target) : nullptr;
  QFrame::show();
  m_frame->show();
  place();
  // The dock raised by `resolve` is laid out on the next pass: frame it again then.
  QMetaObject::invokeMethod(this, &TourPanel::place, Qt::QueuedConnection);
}

void TourPanel::place() {
  QWidget* window = parentWidget();
  if (!window || !isVisible()) return;
  m_frame->setGeometry(window->rect());
  QRect target;
  if (m_target && m_target->isVisible())
    target = QRect(m_target->mapTo(window, QPoint(0, 0)), m_target->size()).intersected(window->rect());
  m_frame->frame(target);
  m_frame->raise();
  adjustSize();
  // The card sits inside the framed view's corner, or the window's when there is none.
  const QRect area = target.isNull() ? window->rect() : target;
  QPoint at(area.right() - width() - 16, area.top() + 16);
  at.setX(std::clamp(at.x(), 8, std::max(8, window->width() - width() - 8)));
  at.setY(std::clamp(at.y(), 8, std::max(8, window->height() - height() - 8)));
  move(at);
  raise();
}

bool TourPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == parentWidget() && (event->type() == QEvent::Resize || event->type() == QEvent::LayoutRequest))
    QMetaObject::invokeMethod(this, &TourPanel::place, Qt::QueuedConnection);
  return QFrame::eventFilter(watched, event);
}

}  // namespace ragwb
