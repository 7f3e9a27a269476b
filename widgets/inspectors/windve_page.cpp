#include "inspectors/windve_page.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>
#include <vector>

#include "bridge/background.h"
#include "plot/plot_export.h"
#include "plot/qcustomplot_include.h"

namespace ragwb {

namespace {

const QColor kMain(31, 119, 180), kAux(255, 127, 14), kSlo(214, 39, 40), kServed(44, 160, 44), kBusy(148, 103, 189);

QColor deviceColour(int i) { return i == 0 ? kMain : kAux; }

QString seconds(double s) { return QString::number(s, 'f', s < 0.1 ? 3 : 2) + QStringLiteral(" s"); }

QString percent(double share) { return QString::number(100.0 * share, 'f', 0) + QStringLiteral("%"); }

// Drops a facade off the GUI thread (its destructor waits for its worker).
void retire(std::shared_ptr<rag::WindVeLive> live) {
  if (!live) return;
  live->stop();
  (void)runInBackground([old = std::move(live)]() mutable { old.reset(); });
}

}  // namespace

struct WindVePage::Inbox {
  std::mutex mu;
  std::vector<std::pair<rag::WindVeDevice, rag::WindVeSample>> samples;
  std::optional<rag::Result<rag::WindVeCalibration>> calibrated;
  std::optional<rag::Result<rag::WindVeLoadSummary>> loaded;
};

WindVePage::WindVePage(QWidget* parent) : QWidget(parent) {
  m_slo = new QDoubleSpinBox;
  m_slo->setRange(0.05, 10);
  m_slo->setDecimals(2);
  m_slo->setSingleStep(0.05);
  m_slo->setValue(0.5);
  m_slo->setSuffix(tr(" s"));
  m_slo->setToolTip(tr("The latency every answer should meet: a queue's depth is the concurrency its device answers within it"));
  m_cap = new QSpinBox;
  m_cap->setRange(2, 4096);
  m_cap->setValue(256);
  m_cap->setToolTip(tr("The largest burst the calibration profiles, and the cap of a depth"));
  m_calibrate = new QPushButton(tr("Calibrate"));
  m_clients = new QSpinBox;
  m_clients->setRange(1, 512);
  m_clients->setValue(64);
  m_clients->setToolTip(tr("Closed-loop clients: each sends a question, waits for its answer and sends the next; "
                           "a BUSY answer makes it wait 5 ms"));
  m_seconds = new QSpinBox;
  m_seconds->setRange(1, 600);
  m_seconds->setValue(10);
  m_seconds->setSuffix(tr(" s"));
  m_hetero = new QCheckBox(tr("Heterogeneous (offload overflow to the auxiliary device)"));
  m_hetero->setChecked(true);
  m_run = new QPushButton(tr("Run"));
  m_run->setDefault(true);
  m_status = new QLabel(tr("Not loaded: the first Calibrate or Run loads the embedder on both devices."));
  m_status->setWordWrap(true);
  m_summary = new QLabel;
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* calBox = new QGroupBox(tr("Calibration (each device alone)"));
  auto* cf = new QFormLayout(calBox);
  cf->addRow(tr("Latency SLO"), m_slo);
  cf->addRow(tr("Max concurrency"), m_cap);
  cf->addRow(QString(), m_calibrate);
  auto* loadBox = new QGroupBox(tr("Load (closed-loop clients)"));
  auto* lf = new QFormLayout(loadBox);
  lf->addRow(tr("Clients"), m_clients);
  lf->addRow(tr("Duration"), m_seconds);
  lf->addRow(QString(), m_hetero);
  lf->addRow(QString(), m_run);
  auto* controls = new QHBoxLayout;
  controls->addWidget(calBox, 1);
  controls->addWidget(loadBox, 1);

  // Latency against concurrency: each device's bursts, its fit and where the fit crosses the SLO.
  m_fitPlot = new QCustomPlot;
  m_fitPlot->setMinimumSize(320, 240);
  m_fitPlot->xAxis->setLabel(tr("concurrent queries C"));
  m_fitPlot->yAxis->setLabel(tr("latency of a burst (s)"));
  m_fitPlot->legend->setVisible(true);
  m_fitPlot->legend->setIconSize(16, 8);
  m_fitPlot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  m_fitPlot->xAxis->setRange(0, 64);   // until the first burst: the default SLO's scale
  m_fitPlot->yAxis->setRange(0, 0.7);
  for (int i = 0; i < 2; ++i) {
    m_points[i] = m_fitPlot->addGraph();
    m_points[i]->setLineStyle(QCPGraph::lsNone);
    m_points[i]->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, deviceColour(i), 7));
    m_points[i]->setName(i == 0 ? tr("main: measured") : tr("auxiliary: measured"));
    m_fits[i] = m_fitPlot->addGraph();
    m_fits[i]->setPen(QPen(deviceColour(i), 1.5));
    m_fits[i]->setName(i == 0 ? tr("main: fit") : tr("auxiliary: fit"));
    m_fits[i]->removeFromLegend();
  }

  // Over time: [each queue's load under its depth] over [answers per second].
  m_livePlot = new QCustomPlot;
  m_livePlot->setMinimumSize(320, 240);
  m_livePlot->setAutoAddPlottableToLegend(false);
  m_queueRect = m_livePlot->axisRect();
  m_rateRect = new QCPAxisRect(m_livePlot, true);
  m_livePlot->plotLayout()->addElement(1, 0, m_rateRect);
  auto* columns = new QCPMarginGroup(m_livePlot);
  m_queueRect->setMarginGroup(QCP::msLeft | QCP::msRight, columns);
  m_rateRect->setMarginGroup(QCP::msLeft | QCP::msRight, columns);
  QCPAxis* qTime = m_queueRect->axis(QCPAxis::atBottom);
  QCPAxis* queries = m_queueRect->axis(QCPAxis::atLeft);
  qTime->setLabel(tr("time since the load started (s)"));
  queries->setLabel(tr("queries queued + running"));
  QCPAxis* rTime = m_rateRect->axis(QCPAxis::atBottom);
  QCPAxis* rate = m_rateRect->axis(QCPAxis::atLeft);
  QCPAxis* busyRate = m_rateRect->axis(QCPAxis::atRight);
  rTime->setLabel(tr("time since the load started (s)"));
  rate->setLabel(tr("served per second"));
  busyRate->setVisible(true);
  busyRate->setLabel(tr("BUSY per second"));
  connect(qTime, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), rTime, qOverload<const QCPRange&>(&QCPAxis::setRange));
  for (int i = 0; i < 2; ++i) {
    m_load[i] = m_livePlot->addGraph(qTime, queries);
    m_load[i]->setPen(QPen(deviceColour(i), 2));
    m_load[i]->setName(i == 0 ? tr("main queue") : tr("auxiliary queue"));
    m_load[i]->addToLegend();
    m_depth[i] = m_livePlot->addGraph(qTime, queries);
    m_depth[i]->setPen(QPen(deviceColour(i).darker(170), 1.5, Qt::DashLine));  // visible over a full queue's line
    m_depth[i]->setName(i == 0 ? tr("main depth") : tr("auxiliary depth"));
    m_depth[i]->addToLegend();
  }
  m_servedRate = m_livePlot->addGraph(rTime, rate);
  m_servedRate->setPen(QPen(kServed, 2));
  m_servedRate->setName(tr("served / s"));
  m_busyRate = m_livePlot->addGraph(rTime, busyRate);
  m_busyRate->setPen(QPen(kBusy, 2));
  m_busyRate->setName(tr("BUSY / s (right axis)"));
  m_livePlot->legend->setVisible(true);
  m_livePlot->legend->setIconSize(16, 8);
  m_queueRect->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  m_rateLegend = new QCPLegend;
  m_rateRect->insetLayout()->addElement(m_rateLegend, Qt::AlignTop | Qt::AlignRight);
  m_rateLegend->setLayer(QStringLiteral("legend"));
  m_rateLegend->setIconSize(16, 8);
  m_servedRate->addToLegend(m_rateLegend);
  m_busyRate->addToLegend(m_rateLegend);
  qTime->setRange(0, 10);
  queries->setRange(0, 10);
  rate->setRange(0, 10);
  busyRate->setRange(0, 10);
  stylePlot(m_fitPlot, palette());
  stylePlot(m_livePlot, palette());

  auto* plots = new QSplitter(Qt::Horizontal);
  plots->addWidget(m_fitPlot);
  plots->addWidget(m_livePlot);
  plots->setStretchFactor(0, 2);
  plots->setStretchFactor(1, 3);
  auto* top = new QVBoxLayout(this);
  top->addLayout(controls);
  top->addWidget(m_status);
  top->addWidget(m_summary);
  top->addWidget(plots, 1);

  for (QCustomPlot* plot : {m_fitPlot, m_livePlot})
    connect(plot, &QCustomPlot::afterReplot, this,
            [this, plot] { m_longestReplotMs = std::max(m_longestReplotMs, plot->replotTime()); });
  connect(m_calibrate, &QPushButton::clicked, this, &WindVePage::calibrate);
  connect(m_run, &QPushButton::clicked, this, [this] { m_working ? stop() : start(); });
  m_timer.setInterval(100);
  connect(&m_timer, &QTimer::timeout, this, &WindVePage::tick);
  connect(&m_loader, &QFutureWatcher<std::shared_ptr<Loaded>>::finished, this, [this] {
    std::shared_ptr<Loaded> r = m_loader.result();
    const Next next = m_runAfterCalibration ? Next::Run : Next::Calibrate;
    if (!r || !r->status.isOk()) {
      setBusy(false, false);
      fail(next, tr("The embedder could not be loaded: %1")
                     .arg(QString::fromStdString(r ? r->status.message() : std::string("no result"))));
      return;
    }
    if (r->modelDir != m_embedderDir || r->corpus != m_corpus) {  // the sources changed meanwhile
      retire(std::move(r->live));
      load(next);
      return;
    }
    m_live = r->live;
    setBusy(false, false);
    m_status->setText(tr("Loaded: %1; queries: %2.")
                          .arg(QString::fromStdString(m_live->plan()), QString::fromStdString(m_live->querySource())));
    if (next == Next::Run && calibrationMatchesControls()) launchRun();
    else launchCalibration(next == Next::Run);
  });
}

WindVePage::~WindVePage() {
  m_timer.stop();
  m_loader.waitForFinished();
  if (m_live) m_live->stop();
  m_live.reset();  // waits for the worker: the burst or the answers in flight
}

void WindVePage::setSources(std::filesystem::path embedderDir, std::filesystem::path corpus) {
  if (embedderDir == m_embedderDir && corpus == m_corpus) return;
  m_embedderDir = std::move(embedderDir);
  m_corpus = std::move(corpus);
  if (m_live && m_live->busy()) {  // what runs on the old sources stops; its results are dropped
    m_inbox.reset();
    m_timer.stop();
    m_running = false;
    setBusy(m_loading, false);
    m_status->setText(tr("The sources changed: the calibration or load in flight was stopped."));
  }
  retire(std::move(m_live));
  m_calibration.reset();
}

rag::WindVeCalibrationSettings WindVePage::calibrationSettings() const {
  return {.sloSeconds = m_slo->value(), .maxConcurrency = m_cap->value()};
}

rag::WindVeLoadSettings WindVePage::loadSettings() const {
  return {.clients = m_clients->value(), .seconds = static_cast<double>(m_seconds->value()),
          .heterogeneous = m_hetero->isChecked()};
}

bool WindVePage::calibrationMatchesControls() const {
  return m_calibration && std::abs(m_calibration->sloSeconds - m_slo->value()) < 1e-9 &&
         m_calibration->maxConcurrency == m_cap->value();
}

void WindVePage::setBusy(bool loading, bool working) {
  m_loading = loading;
  m_working = working;
  m_calibrate->setEnabled(!busy());
  // While a calibration or a load runs, Run is Stop (loading the embedder cannot be stopped).
  m_run->setText(m_working ? tr("Stop") : tr("Run"));
  m_run->setEnabled(!m_loading);
  for (QWidget* w : std::initializer_list<QWidget*>{m_slo, m_cap, m_clients, m_seconds, m_hetero}) w->setEnabled(!busy());
}

void WindVePage::fail(Next what, const QString& message) {
  m_status->setText(message);
  if (what == Next::Calibrate || m_runAfterCalibration) Q_EMIT calibrationFinished(false, message);
  if (what == Next::Run) Q_EMIT runFinished(false, message);
  m_runAfterCalibration = false;
}

void WindVePage::calibrate() {
  if (busy()) {
    Q_EMIT calibrationFinished(false, tr("A WindVE calibration or load is in flight; wait for it or press Stop."));
    return;
  }
  if (!m_live) return load(Next::Calibrate);
  launchCalibration(false);
}

void WindVePage::start() {
  if (busy()) {
    Q_EMIT runFinished(false, tr("A WindVE calibration or load is in flight; wait for it or press Stop."));
    return;
  }
  if (!m_live) return load(Next::Run);
  if (calibrationMatchesControls()) launchRun();
  else launchCalibration(true);
}

void WindVePage::stop() {
  if (m_live) m_live->stop();
  if (busy()) m_status->setText(tr("Stopping…"));
}

void WindVePage::load(Next next) {
  m_runAfterCalibration = next == Next::Run;
  setBusy(true, false);
  m_status->setText(tr("Loading the embedder on both devices…"));
  m_loader.setFuture(loadLive<rag::WindVeLive>(rag::WindVeParams{.embedderDir = m_embedderDir,
                                                                 .corpusPath = m_corpus,
                                                                 .onWorkerStart = &runBelowTheGuiThread},
                                               m_embedderDir, m_corpus));
}

void WindVePage::launchCalibration(bool thenRun) {
  m_runAfterCalibration = thenRun;
  for (int i = 0; i < 2; ++i) {
    m_points[i]->data()->clear();
    m_fits[i]->data()->clear();
  }
  m_fitPlot->clearItems();
  m_calibration.reset();
  auto inbox = std::make_shared<Inbox>();
  const rag::WindVeCalibrationSettings s = calibrationSettings();
  rag::Status st = m_live->calibrate(
      s,
      [inbox](rag::WindVeDevice d, const rag::WindVeSample& x) {
        std::lock_guard lock(inbox->mu);
        inbox->samples.emplace_back(d, x);
      },
      [inbox](const rag::Result<rag::WindVeCalibration>& r) {
        std::lock_guard lock(inbox->mu);
        inbox->calibrated = r;
      });
  if (!st.isOk()) return fail(thenRun ? Next::Run : Next::Calibrate, QString::fromStdString(st.message()));
  m_inbox = inbox;
  setBusy(false, true);
  m_status->setText(tr("Calibrating: bursts of 1, 2, 4, … concurrent questions on each device alone, up to %1 or "
                       "half the SLO of %2…")
                        .arg(s.maxConcurrency)
                        .arg(seconds(s.sloSeconds)));
  m_fitPlot->replot(QCustomPlot::rpQueuedReplot);
  m_timer.start();
}

void WindVePage::launchRun() {
  m_runAfterCalibration = false;
  const rag::WindVeLoadSettings s = loadSettings();
  auto inbox = std::make_shared<Inbox>();
  rag::Status st = m_live->run(s, [inbox](const rag::Result<rag::WindVeLoadSummary>& r) {
    std::lock_guard lock(inbox->mu);
    inbox->loaded = r;
  });
  if (!st.isOk()) return fail(Next::Run, QString::fromStdString(st.message()));
  m_inbox = inbox;
  for (QCPGraph* g : {m_load[0], m_load[1], m_depth[0], m_depth[1], m_servedRate, m_busyRate}) g->data()->clear();
  // The depths the load runs with, as dashed lines over the whole duration.
  const rag::WindVeCalibration& c = *m_calibration;
  const bool aux = s.heterogeneous && c.auxiliary && c.auxiliary->depth > 0;
  const double depths[2] = {static_cast<double>(c.main.depth), aux ? static_cast<double>(c.auxiliary->depth) : 0.0};
  for (int i = 0; i < 2; ++i)
    if (i == 0 || aux) m_depth[i]->setData({0.0, s.seconds}, {depths[i], depths[i]});
  m_queueRect->axis(QCPAxis::atBottom)->setRange(0, s.seconds);
  m_queueRect->axis(QCPAxis::atLeft)->setRange(0, std::max(depths[0], depths[1]) * 1.5 + 1);  // the legend above
  m_rateRect->axis(QCPAxis::atLeft)->setRange(0, 10);
  m_rateRect->axis(QCPAxis::atRight)->setRange(0, 10);
  m_livePlot->replot(QCustomPlot::rpQueuedReplot);
  m_running = true;
  setBusy(false, true);
  m_status->setText(tr("Running: %1 closed-loop clients for %2 s, heterogeneous %3…")
                        .arg(s.clients)
                        .arg(s.seconds, 0, 'f', 0)
                        .arg(aux ? tr("on") : tr("off")));
  m_timer.start();
  Q_EMIT runStarted();
}

void WindVePage::tick() {
  QElapsedTimer clock;
  clock.start();
  std::vector<std::pair<rag::WindVeDevice, rag::WindVeSample>> samples;
  std::optional<rag::Result<rag::WindVeCalibration>> calibrated;
  std::optional<rag::Result<rag::WindVeLoadSummary>> loaded;
  if (m_inbox) {
    std::lock_guard lock(m_inbox->mu);
    samples.swap(m_inbox->samples);
    calibrated.swap(m_inbox->calibrated);
    loaded.swap(m_inbox->loaded);
  }
  for (const auto& [d, x] : samples) addCalibrationSample(d, x);
  if (m_running && m_live) addSnapshot(m_live->snapshot());
  if (calibrated) {
    m_inbox.reset();
    setBusy(false, false);
    if (!*calibrated) {
      fail(m_runAfterCalibration ? Next::Run : Next::Calibrate,
           tr("The calibration failed: %1").arg(QString::fromStdString(calibrated->status().message())));
    } else {
      m_calibration = **calibrated;
      drawCalibration();
      const rag::WindVeCalibration& c = *m_calibration;
      QString text = tr("Calibrated within %1: depth %2 on %3").arg(seconds(c.sloSeconds)).arg(c.main.depth).arg(QString::fromStdString(c.main.name));
      if (c.auxiliary) text += tr(", %1 on %2").arg(c.auxiliary->depth).arg(QString::fromStdString(c.auxiliary->name));
      m_status->setText(text + QStringLiteral("."));
      Q_EMIT calibrationFinished(true, text);
      if (m_runAfterCalibration) launchRun();
    }
  }
  if (loaded) {
    m_inbox.reset();
    m_running = false;
    setBusy(false, false);
    if (!*loaded) {
      fail(Next::Run, tr("The load failed: %1").arg(QString::fromStdString(loaded->status().message())));
    } else {
      m_lastSummary = **loaded;
      showSummary(*m_lastSummary);
      const QString text = tr("Done: %1 served, %2 BUSY in %3.")
                               .arg(m_lastSummary->served)
                               .arg(m_lastSummary->busy)
                               .arg(seconds(m_lastSummary->seconds));
      m_status->setText(text);
      Q_EMIT runFinished(true, text);
    }
  }
  if (!busy()) m_timer.stop();
  m_longestTickMs = std::max(m_longestTickMs, static_cast<double>(clock.nsecsElapsed()) / 1e6);
}

void WindVePage::addCalibrationSample(rag::WindVeDevice device, const rag::WindVeSample& s) {
  m_points[static_cast<int>(device)]->addData(static_cast<double>(s.concurrency), s.seconds);
  bool found = false;
  const QCPRange x = m_points[0]->getKeyRange(found), x1 = m_points[1]->getKeyRange(found);
  const QCPRange y = m_points[0]->getValueRange(found), y1 = m_points[1]->getValueRange(found);
  m_fitPlot->xAxis->setRange(0, std::max(x.upper, x1.upper) * 1.1 + 1);
  m_fitPlot->yAxis->setRange(0, std::max({y.upper, y1.upper, m_slo->value()}) * 1.15);
  m_fitPlot->replot(QCustomPlot::rpQueuedReplot);
}

void WindVePage::drawCalibration() {
  const rag::WindVeCalibration& c = *m_calibration;
  const rag::WindVeDeviceProfile* devices[2] = {&c.main, c.auxiliary ? &*c.auxiliary : nullptr};
  double xMax = 1, yMax = c.sloSeconds;
  for (const rag::WindVeDeviceProfile* d : devices) {
    if (!d) continue;
    for (const rag::WindVeSample& s : d->samples) {
      xMax = std::max(xMax, static_cast<double>(s.concurrency));
      yMax = std::max(yMax, s.seconds);
    }
    xMax = std::max(xMax, static_cast<double>(d->depth));
  }
  xMax *= 1.1;
  yMax *= 1.35;  // room for the legend above the SLO line
  m_fitPlot->clearItems();
  auto* slo = new QCPItemStraightLine(m_fitPlot);
  slo->point1->setCoords(0, c.sloSeconds);
  slo->point2->setCoords(1, c.sloSeconds);
  slo->setPen(QPen(kSlo, 1.5, Qt::DashLine));
  auto* sloText = new QCPItemText(m_fitPlot);
  sloText->position->setCoords(0, c.sloSeconds);  // left, under the line: the depths are labelled at the right
  sloText->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
  sloText->setPadding(QMargins(4, 2, 4, 2));
  sloText->setText(tr("SLO %1").arg(seconds(c.sloSeconds)));
  sloText->setColor(kSlo);
  for (int i = 0; i < 2; ++i) {
    const rag::WindVeDeviceProfile* d = devices[i];
    if (!d) {
      m_fits[i]->removeFromLegend();
      continue;
    }
    const QString who = (i == 0 ? tr("main %1") : tr("auxiliary %1")).arg(QString::fromStdString(d->name));
    m_points[i]->setName(tr("%1: measured").arg(who));
    m_fits[i]->setName(tr("%1: %2·C + %3 s").arg(who).arg(d->alpha, 0, 'g', 3).arg(d->beta, 0, 'g', 3));
    m_fits[i]->addToLegend();
    m_fits[i]->setData({0.0, xMax}, {d->beta, d->alpha * xMax + d->beta});
    if (d->depth < 1) continue;  // one query alone misses the SLO here: no queue
    // The depth: where the fit meets the SLO, marked down to the axis and labelled.
    const double depth = static_cast<double>(d->depth), at = d->alpha * depth + d->beta;
    auto* drop = new QCPItemLine(m_fitPlot);
    drop->start->setCoords(depth, 0);
    drop->end->setCoords(depth, at);
    drop->setPen(QPen(deviceColour(i), 1, Qt::DotLine));
    auto* label = new QCPItemText(m_fitPlot);
    label->position->setCoords(depth, at);
    label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);  // left of its drop line, under the SLO
    label->setPadding(QMargins(2, 4 + 18 * i, 4, 2));                // the two labels never on one line
    // At the cap the SLO would allow more: the cap, not the device, set this depth.
    label->setText(d->depth == c.maxConcurrency ? tr("depth %1 (the cap)").arg(d->depth) : tr("depth %1").arg(d->depth));
    label->setColor(deviceColour(i));
    QFont bold = label->font();
    bold.setBold(true);
    label->setFont(bold);
  }
  m_fitPlot->xAxis->setRange(0, xMax);
  m_fitPlot->yAxis->setRange(0, yMax);
  m_fitPlot->replot(QCustomPlot::rpQueuedReplot);
}

void WindVePage::addSnapshot(const rag::WindVeSnapshot& s) {
  if (!s.running || s.seconds <= 0) return;  // not started yet, or the last load's final figures
  m_load[0]->addData(s.seconds, static_cast<double>(s.main.load()));
  if (s.auxiliary && m_depth[1]->dataCount() > 0) m_load[1]->addData(s.seconds, static_cast<double>(s.auxiliary->load()));
  m_servedRate->addData(s.seconds, s.servedPerSecond);
  m_busyRate->addData(s.seconds, s.busyPerSecond);
  QCPAxis* rate = m_rateRect->axis(QCPAxis::atLeft);
  QCPAxis* busyRate = m_rateRect->axis(QCPAxis::atRight);
  if (s.servedPerSecond * 1.15 > rate->range().upper) rate->setRange(0, s.servedPerSecond * 1.3);
  if (s.busyPerSecond * 1.15 > busyRate->range().upper) busyRate->setRange(0, s.busyPerSecond * 1.3);
  QString text = tr("%1 s: main %2 of %3").arg(s.seconds, 0, 'f', 1).arg(s.main.load()).arg(s.main.depth);
  if (s.auxiliary && m_depth[1]->dataCount() > 0)
    text += tr(", auxiliary %1 of %2").arg(s.auxiliary->load()).arg(s.auxiliary->depth);
  text += tr(" queued + running · %1 served/s, %2 BUSY/s · p50 %3, p99 %4 over the last second (SLO %5)")
              .arg(s.servedPerSecond, 0, 'f', 1)
              .arg(s.busyPerSecond, 0, 'f', 0)
              .arg(seconds(s.p50Seconds), seconds(s.p99Seconds))
              .arg(seconds(m_calibration ? m_calibration->sloSeconds : 0));
  m_summary->setText(text);
  m_livePlot->replot(QCustomPlot::rpQueuedReplot);
}

void WindVePage::showSummary(const rag::WindVeLoadSummary& s) {
  const rag::WindVeCalibration& c = *m_calibration;
  QString depths = tr("depth %1 on main %2").arg(s.mainDepth).arg(QString::fromStdString(c.main.name));
  if (s.auxDepth > 0 && c.auxiliary)
    depths += tr(", %1 on auxiliary %2").arg(s.auxDepth).arg(QString::fromStdString(c.auxiliary->name));
  else
    depths += s.heterogeneous ? QString() : tr(" (heterogeneous off)");
  QString cores = tr("main got %1 of its core").arg(percent(s.mainCoreShare));
  if (s.auxDepth > 0) cores += tr(", auxiliary %1").arg(percent(s.auxCoreShare));
  m_summary->setText(tr("<b>%1 clients, %2:</b> %3 · %4 served (main %5, auxiliary %6), <b>%7/s</b> · "
                        "<b>BUSY %8</b> of answers · latency p50 %9, <b>p99 %10</b> against the SLO of %11 "
                        "(%12 within) · %13 (below 100%: other processes took the rest)")
                         .arg(s.clients)
                         .arg(seconds(s.seconds), depths)
                         .arg(s.served)
                         .arg(s.servedMain)
                         .arg(s.servedAux)
                         .arg(s.servedPerSecond, 0, 'f', 1)
                         .arg(percent(s.busyShare), seconds(s.p50Seconds), seconds(s.p99Seconds),
                              seconds(s.sloSeconds), percent(s.withinSloShare), cores));
}

}  // namespace ragwb
