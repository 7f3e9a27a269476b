#include "inspectors/dragon_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>
#include <mutex>
#include <vector>

#include "bridge/background.h"
#include "inspectors/dragon_event_model.h"
#include "inspectors/dragon_timeline_view.h"

namespace ragwb {

struct DragonPage::Inbox {
  std::mutex mu;
  std::vector<rag::DragonEvent> events;
  std::optional<rag::Result<rag::DragonSummary>> done;
};

DragonPage::DragonPage(QWidget* parent) : QWidget(parent) {
  m_model = new DragonEventModel(this);
  m_timeline = new DragonTimelineView(m_model);
  m_table = new QTableView;
  m_table->setModel(m_model);
  m_table->verticalHeader()->hide();
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);

  m_question = new QLineEdit;
  m_question->setPlaceholderText(tr("A question, e.g. What is a compiler?"));
  m_question->setText(tr("What is a compiler?"));
  m_method = new QComboBox;
  m_method->addItem(tr("DRAGON (speculative aggregation)"), QStringLiteral("dragon"));
  m_method->addItem(tr("DRDG/TW (token-wise synchronisation)"), QStringLiteral("drdg_tw"));
  m_policy = new QComboBox;
  for (const char* p : {"greedy", "device", "cloud", "random"}) m_policy->addItem(QString::fromLatin1(p), QString::fromLatin1(p));
  m_policy->setToolTip(tr("Who aggregates: greedy moves the aggregator by the DRAGON scheduler's cost model"));
  m_maxTokens = new QSpinBox;
  m_maxTokens->setRange(1, 256);
  m_maxTokens->setValue(20);
  m_docs = new QSpinBox;
  m_docs->setRange(0, 8);
  m_docs->setValue(2);
  m_docs->setSuffix(tr(" per side"));
  m_ignoreEos = new QCheckBox(tr("Decode every token (ignore EOS)"));
  m_latency = new QDoubleSpinBox;
  m_latency->setRange(0, 1000);
  m_latency->setSingleStep(25);
  m_latency->setValue(100);
  m_latency->setSuffix(tr(" ms"));
  m_latency->setToolTip(tr("Added to the round trip (half each way) by the transport's delay line"));
  m_jitter = new QDoubleSpinBox;
  m_jitter->setRange(-1, 1000);
  m_jitter->setValue(-1);
  m_jitter->setSuffix(tr(" ms"));
  m_jitter->setSpecialValueText(tr("latency / 5"));
  m_jitter->setToolTip(tr("Width of the uniform per-frame jitter"));
  m_bandwidth = new QDoubleSpinBox;
  m_bandwidth->setRange(0, 100000);
  m_bandwidth->setDecimals(1);
  m_bandwidth->setValue(0);
  m_bandwidth->setSuffix(tr(" Mbit/s"));
  m_bandwidth->setSpecialValueText(tr("unlimited"));
  m_run = new QPushButton(tr("Run"));
  m_run->setDefault(true);
  m_status = new QLabel(tr("Not loaded: the first Run loads the model twice (device and cloud)."));
  m_status->setWordWrap(true);
  m_answer = new QLabel;
  m_answer->setWordWrap(true);
  m_answer->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_summaryLabel = new QLabel;
  m_summaryLabel->setWordWrap(true);

  auto* runBox = new QGroupBox(tr("Run"));
  auto* rf = new QFormLayout(runBox);
  rf->addRow(tr("Question"), m_question);
  rf->addRow(tr("Method"), m_method);
  rf->addRow(tr("Aggregator"), m_policy);
  rf->addRow(tr("Tokens"), m_maxTokens);
  rf->addRow(tr("Passages"), m_docs);
  rf->addRow(QString(), m_ignoreEos);
  auto* linkBox = new QGroupBox(tr("Link (device ⇄ cloud)"));
  auto* lf = new QFormLayout(linkBox);
  lf->addRow(tr("Added latency"), m_latency);
  lf->addRow(tr("Jitter"), m_jitter);
  lf->addRow(tr("Bandwidth"), m_bandwidth);
  lf->addRow(QString(), m_run);
  auto* controls = new QHBoxLayout;
  controls->addWidget(runBox, 3);
  controls->addWidget(linkBox, 2);

  auto* top = new QVBoxLayout(this);
  top->addLayout(controls);
  top->addWidget(m_status);
  top->addWidget(m_answer);
  top->addWidget(m_summaryLabel);
  top->addWidget(m_timeline);
  top->addWidget(m_table, 1);

  connect(m_run, &QPushButton::clicked, this, &DragonPage::start);
  connect(m_question, &QLineEdit::returnPressed, this, &DragonPage::start);
  m_drainTimer.setInterval(30);
  connect(&m_drainTimer, &QTimer::timeout, this, &DragonPage::drain);
  connect(&m_loader, &QFutureWatcher<std::shared_ptr<Loaded>>::finished, this, [this] {
    std::shared_ptr<Loaded> r = m_loader.result();
    if (!r || !r->status.isOk()) {
      setBusy(false, false);
      finish(false, tr("The DRAGON sides could not be loaded: %1")
                        .arg(QString::fromStdString(r ? r->status.message() : std::string("no result"))));
      return;
    }
    m_loading = false;
    if (r->modelDir != m_modelDir || r->corpus != m_corpus) {  // the sources changed meanwhile
      if (r->live) (void)runInBackground([stale = std::move(r->live)]() mutable { stale.reset(); });
      start();
      return;
    }
    m_live = r->live;
    launch();
  });
}

DragonPage::~DragonPage() {
  m_loader.waitForFinished();
  m_live.reset();  // joins the workers after the run in flight
}

void DragonPage::setSources(std::filesystem::path modelDir, std::filesystem::path corpus) {
  if (modelDir == m_modelDir && corpus == m_corpus) return;
  m_modelDir = std::move(modelDir);
  m_corpus = std::move(corpus);
  // The next Run loads sides of the new sources; a run in flight finishes on the old ones, which
  // are released (off the GUI thread) when it ends.
  if (m_running) m_retired = std::move(m_live);
  m_live.reset();
}

rag::DragonRunSettings DragonPage::settings() const {
  rag::DragonRunSettings s;
  s.question = m_question->text().trimmed().toStdString();
  s.method = m_method->currentData().toString().toStdString();
  s.policy = m_policy->currentData().toString().toStdString();
  s.maxTokens = static_cast<uint32_t>(m_maxTokens->value());
  s.docsPerSide = static_cast<uint32_t>(m_docs->value());
  s.ignoreEos = m_ignoreEos->isChecked();
  s.link.latencyMs = m_latency->value();
  s.link.jitterMs = m_jitter->value();
  s.link.bandwidthMbps = m_bandwidth->value();
  return s;
}

void DragonPage::setBusy(bool loading, bool running) {
  m_loading = loading;
  m_running = running;
  m_run->setEnabled(!loading && !running);
}

void DragonPage::start() {
  if (busy()) {
    Q_EMIT runFinished(false, tr("A DRAGON run is in flight; wait for it to finish."));
    return;
  }
  if (m_question->text().trimmed().isEmpty()) {
    m_status->setText(tr("Type a question first."));
    Q_EMIT runFinished(false, tr("Type a question first."));
    return;
  }
  if (m_live) {
    launch();
    return;
  }
  setBusy(true, false);
  m_status->setText(tr("Loading the device and the cloud (model, corpus, BM25 index, decode profile)…"));
  m_loader.setFuture(loadLive<rag::DragonLive>(rag::DragonLiveParams{.modelDir = m_modelDir, .corpusPath = m_corpus},
                                               m_modelDir, m_corpus));
}

void DragonPage::launch() {
  const rag::DragonRunSettings s = settings();
  m_model->clear();
  m_summary.reset();
  m_answerSoFar.clear();
  m_answer->clear();
  m_summaryLabel->clear();
  m_expectedTokens = static_cast<int>(s.maxTokens);
  auto inbox = std::make_shared<Inbox>();
  m_inbox = inbox;
  rag::Status st = m_live->run(
      s,
      [inbox](const rag::DragonEvent& e) {
        std::lock_guard lock(inbox->mu);
        inbox->events.push_back(e);
      },
      [inbox](const rag::Result<rag::DragonSummary>& r) {
        std::lock_guard lock(inbox->mu);
        inbox->done = r;
      });
  if (!st.isOk()) {
    setBusy(false, false);
    if (st.code() == rag::StatusCode::Unavailable) m_live.reset();  // the next Run loads fresh sides
    finish(false, QString::fromStdString(st.message()));
    return;
  }
  setBusy(false, true);
  m_status->setText(tr("Running: %1 at +%2 ms…").arg(m_method->currentText()).arg(s.link.latencyMs, 0, 'f', 0));
  m_drainTimer.start();
  Q_EMIT runStarted();
}

void DragonPage::drain() {
  if (!m_inbox) return;
  std::vector<rag::DragonEvent> batch;
  std::optional<rag::Result<rag::DragonSummary>> done;
  {
    std::lock_guard lock(m_inbox->mu);
    batch.swap(m_inbox->events);
    done.swap(m_inbox->done);
  }
  for (const rag::DragonEvent& e : batch)
    if (e.kind == rag::DragonEvent::Kind::Verdict && e.observer == rag::DragonSide::Device)
      m_answerSoFar += QString::fromStdString(e.text);
  m_model->appendEvents(batch);
  if (!batch.empty()) {
    m_answer->setText(tr("<b>Answer so far:</b> %1").arg(m_answerSoFar.toHtmlEscaped()));
    m_status->setText(tr("Running: %1 of %2 tokens fixed, %3 events").arg(m_model->decidedPositions()).arg(m_expectedTokens).arg(m_model->rowCount()));
  }
  if (!done) return;
  m_drainTimer.stop();
  m_inbox.reset();
  setBusy(false, false);
  if (m_retired) (void)runInBackground([retired = std::move(m_retired)]() mutable { retired.reset(); });
  if (!*done) {
    finish(false, tr("The run failed: %1").arg(QString::fromStdString(done->status().message())));
    return;
  }
  const rag::DragonSummary& s = **done;
  m_summary = s;
  m_answer->setText(tr("<b>Answer:</b> %1").arg(QString::fromStdString(s.answer).toHtmlEscaped()));
  const auto rate = [&](int i) {
    const double n = static_cast<double>(s.accepted[i] + s.rejected[i]);
    return n > 0 ? QString::number(100.0 * static_cast<double>(s.accepted[i]) / n, 'f', 0) + "%" : QStringLiteral("–");
  };
  QString text = tr("%1 tokens in %2 ms (%3 ms/token, first token %4 ms) · drafts accepted: device %5, cloud %6 · "
                    "%7 aggregator hand-overs · %8 stale drafts · %9 KB sent, %10 KB received · RTT %11 ms")
                     .arg(s.tokens)
                     .arg(s.totalMs, 0, 'f', 0)
                     .arg(s.perTokenMs, 0, 'f', 1)
                     .arg(s.ttftMs, 0, 'f', 0)
                     .arg(rate(0), rate(1))
                     .arg(s.handovers)
                     .arg(s.staleDrafts)
                     .arg(static_cast<double>(s.bytesSent) / 1024.0, 0, 'f', 1)
                     .arg(static_cast<double>(s.bytesReceived) / 1024.0, 0, 'f', 1)
                     .arg(s.rttMs, 0, 'f', 1);
  if (!s.note.empty()) text += QStringLiteral(" · ") + QString::fromStdString(s.note);
  m_summaryLabel->setText(text);
  finish(true, tr("Done: %1 tokens, %2 events.").arg(s.tokens).arg(m_model->rowCount()));
}

void DragonPage::finish(bool ok, const QString& message) {
  m_status->setText(message);
  Q_EMIT runFinished(ok, message);
}

}  // namespace ragwb
