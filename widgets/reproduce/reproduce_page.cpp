#include "reproduce/reproduce_page.h"

#include <QDateTime>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "bridge/background.h"
#include "plot/qcustomplot_include.h"
#include "rag/run_store.h"
#include "reproduce/bench_process.h"
#include "reproduce/bench_result_model.h"

namespace ragwb {

ReproducePage::ReproducePage(QWidget* parent)
    : QWidget(parent),
      m_figures(new QListWidget),
      m_title(new QLabel),
      m_citation(new QLabel),
      m_command(new QLabel),
      m_extraArgs(new QLineEdit),
      m_run(new QPushButton(tr("Run"))),
      m_cancel(new QPushButton(tr("Cancel"))),
      m_progress(new QProgressBar),
      m_status(new QLabel),
      m_plot(new QCustomPlot),
      m_resultsView(new QTableView),
      m_results(new BenchResultModel(this)),
      m_process(new BenchProcess(this)),
      m_binary(BenchProcess::ragraphBinary()) {
  for (const PaperFigure& f : paperFigures()) {
    auto* item = new QListWidgetItem(f.title, m_figures);
    item->setData(Qt::UserRole, f.id);
    item->setToolTip(f.citation);
  }
  m_figures->setWordWrap(true);
  m_title->setWordWrap(true);
  QFont bold = m_title->font();
  bold.setBold(true);
  m_title->setFont(bold);
  m_citation->setWordWrap(true);
  m_command->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_command->setWordWrap(true);
  m_extraArgs->setPlaceholderText(tr("extra arguments, e.g. --corpus PATH --model DIR"));
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_cancel->setEnabled(false);
  m_progress->setRange(0, 100);
  m_progress->setValue(0);
  m_plot->setMinimumHeight(260);
  m_plot->legend->setVisible(true);
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  m_resultsView->setModel(m_results);
  m_resultsView->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_resultsView->setSelectionMode(QAbstractItemView::SingleSelection);
  m_resultsView->horizontalHeader()->setStretchLastSection(true);
  m_resultsView->verticalHeader()->hide();

  auto* controls = new QWidget;
  auto* cl = new QVBoxLayout(controls);
  cl->setContentsMargins(0, 0, 0, 0);
  cl->addWidget(m_title);
  cl->addWidget(m_citation);
  cl->addWidget(m_command);
  auto* row = new QHBoxLayout;
  row->addWidget(m_extraArgs, 1);
  row->addWidget(m_run);
  row->addWidget(m_cancel);
  cl->addLayout(row);
  cl->addWidget(m_progress);
  cl->addWidget(m_status);
  cl->addWidget(m_plot, 1);

  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(controls);
  auto* saved = new QWidget;
  auto* sl = new QVBoxLayout(saved);
  sl->setContentsMargins(0, 0, 0, 0);
  sl->addWidget(new QLabel(tr("Saved results (click one to plot it again)")));
  sl->addWidget(m_resultsView);
  right->addWidget(saved);
  right->setStretchFactor(0, 3);
  right->setStretchFactor(1, 1);

  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(m_figures);
  split->addWidget(right);
  split->setStretchFactor(1, 1);
  split->setSizes({260, 800});
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);

  connect(m_figures, &QListWidget::currentRowChanged, this, &ReproducePage::showFigure);
  connect(m_run, &QPushButton::clicked, this, &ReproducePage::start);
  connect(m_cancel, &QPushButton::clicked, this, &ReproducePage::cancel);
  connect(m_extraArgs, &QLineEdit::textChanged, this, [this] {
    m_command->setText(QStringLiteral("ragraph ") + arguments().join(QLatin1Char(' ')));
  });
  connect(m_process, &BenchProcess::progress, this, [this](int percent, double elapsed, const QString& line) {
    m_progress->setValue(percent);
    m_status->setText(tr("%1 s elapsed. %2").arg(elapsed, 0, 'f', 0).arg(line));
  });
  connect(m_process, &BenchProcess::finished, this, &ReproducePage::onFinished);
  // A user's pick only: the view also moves its current index by itself (on focus, after a
  // reset), which must not replace the figure being shown.
  connect(m_resultsView, &QTableView::clicked, this, [this](const QModelIndex& i) { openResult(i.row()); });
  connect(m_resultsView, &QTableView::activated, this, [this](const QModelIndex& i) { openResult(i.row()); });
  m_figures->setCurrentRow(0);
}

ReproducePage::~ReproducePage() = default;  // m_process kills a child still running

void ReproducePage::setStorePath(const QString& path) {
  m_storePath = path;
  refreshResults();
}

const PaperFigure* ReproducePage::currentFigure() const {
  const QListWidgetItem* item = m_figures->currentItem();
  return item ? findPaperFigure(item->data(Qt::UserRole).toString()) : nullptr;
}

bool ReproducePage::selectFigure(const QString& id) {
  for (int i = 0; i < m_figures->count(); ++i)
    if (m_figures->item(i)->data(Qt::UserRole).toString() == id) {
      m_figures->setCurrentRow(i);
      return true;
    }
  return false;
}

bool ReproducePage::busy() const { return m_process->running() || m_saving; }

QStringList ReproducePage::arguments() const {
  const PaperFigure* f = currentFigure();
  if (!f) return {};
  QStringList args = f->args;
  args += QProcess::splitCommand(m_extraArgs->text());
  return args;
}

void ReproducePage::showFigure() {
  const PaperFigure* f = currentFigure();
  if (!f) return;
  m_title->setText(f->title);
  m_citation->setText(tr("Reference: %1").arg(f->citation));
  m_command->setText(QStringLiteral("ragraph ") + arguments().join(QLatin1Char(' ')));
  if (!busy()) {
    m_progress->setValue(0);
    m_status->setText(tr("Expected to take about %1 s on a 2-core machine; the progress bar is the elapsed time against that.")
                          .arg(f->expectedSeconds, 0, 'f', 0));
  }
  plotResult(*f, {});
}

void ReproducePage::start() {
  const PaperFigure* f = currentFigure();
  if (busy()) {
    Q_EMIT runFinished(false, tr("a bench is running already"), -1);
    return;
  }
  if (!f) {
    Q_EMIT runFinished(false, tr("no figure is selected"), -1);
    return;
  }
  m_runningFigure = f->id;
  m_process->start(m_binary, arguments(), f->expectedSeconds);
  m_run->setEnabled(false);
  m_cancel->setEnabled(true);
  m_figures->setEnabled(false);
  m_extraArgs->setEnabled(false);
  Q_EMIT runStarted();
}

void ReproducePage::cancel() { m_process->cancel(); }

struct ReproducePage::StoreWork {
  rag::Status status;
  int64_t addedId = -1;
  std::vector<rag::BenchResult> results;
};

void ReproducePage::withStore(rag::BenchResult add, std::function<void(StoreWork&)> then) {
  auto* watcher = new QFutureWatcher<StoreWork>(this);
  connect(watcher, &QFutureWatcher<StoreWork>::finished, this, [watcher, then = std::move(then)] {
    watcher->deleteLater();
    StoreWork w = watcher->result();
    then(w);
  });
  watcher->setFuture(runInBackground([path = m_storePath.toStdString(), add = std::move(add)] {
    StoreWork w;
    auto store = rag::RunStore::open(path);
    if (!store) {
      w.status = store.status();
      return w;
    }
    if (!add.name.empty()) {
      auto id = store->addBenchResult(add);
      if (!id) {
        w.status = id.status();
        return w;
      }
      w.addedId = *id;
    }
    auto list = store->listBenchResults();
    if (!list) w.status = list.status();
    else w.results = std::move(*list);
    return w;
  }));
}

void ReproducePage::onFinished(const BenchOutcome& o) {
  auto done = [this] {
    m_run->setEnabled(true);
    m_cancel->setEnabled(false);
    m_figures->setEnabled(true);
    m_extraArgs->setEnabled(true);
  };
  const PaperFigure* f = findPaperFigure(m_runningFigure);
  auto fail = [this, done](const QString& why) {
    done();
    m_progress->setValue(0);
    m_status->setText(why);
    Q_EMIT runFinished(false, why, -1);
  };
  if (o.kind != BenchOutcome::Kind::Finished) return fail(o.message);
  if (!f) return fail(tr("unknown figure %1").arg(m_runningFigure));
  // Plot first: output that does not hold the figure's quantities is not saved as its result.
  if (QString why = plotResult(*f, o.json); !why.isEmpty()) return fail(why);
  if (m_storePath.isEmpty()) return fail(tr("no run history to save the result into"));
  rag::BenchResult r;
  r.name = f->id.toStdString();
  r.commandLine = o.commandLine.toStdString();
  r.startedAt = QDateTime::currentDateTimeUtc().addMSecs(-static_cast<qint64>(o.seconds * 1e3)).toString(Qt::ISODate).toStdString();
  r.seconds = o.seconds;
  r.json = o.json.toStdString();
  m_saving = true;
  m_status->setText(tr("%1 finished in %2 s; saving…").arg(f->id).arg(o.seconds, 0, 'f', 1));
  withStore(std::move(r), [this, id = f->id, seconds = o.seconds, done, fail](StoreWork& w) {
    m_saving = false;
    if (!w.status.isOk()) return fail(QString::fromStdString(w.status.message()));
    done();
    m_results->setResults(std::move(w.results));
    m_progress->setValue(100);
    const QString message = tr("%1 finished in %2 s; saved as result %3.").arg(id).arg(seconds, 0, 'f', 1).arg(w.addedId);
    m_status->setText(message);
    Q_EMIT runFinished(true, message, w.addedId);
  });
}

void ReproducePage::refreshResults() {
  if (m_storePath.isEmpty()) return;
  withStore({}, [this](StoreWork& w) {
    if (!w.status.isOk()) {
      m_status->setText(QString::fromStdString(w.status.message()));
      return;
    }
    m_results->setResults(std::move(w.results));
  });
}

void ReproducePage::openResult(int row) {
  const rag::BenchResult* r = m_results->result(row);
  if (!r || busy()) return;
  const QString id = QString::fromStdString(r->name);
  const PaperFigure* f = findPaperFigure(id);
  if (!f) {
    m_status->setText(tr("result %1 is of a figure this build does not know (%2)").arg(r->id).arg(id));
    return;
  }
  {
    const QSignalBlocker block(m_figures);
    selectFigure(id);
  }
  m_title->setText(f->title);
  m_citation->setText(tr("Reference: %1").arg(f->citation));
  m_command->setText(QString::fromStdString(r->commandLine));
  const QString why = plotResult(*f, QString::fromStdString(r->json));
  m_status->setText(why.isEmpty() ? tr("Result %1 of %2 (UTC), %3 s.").arg(r->id).arg(QString::fromStdString(r->startedAt)).arg(r->seconds, 0, 'f', 1)
                                  : why);
}

QString ReproducePage::plotResult(const PaperFigure& figure, const QString& json) {
  FigurePoints ours;
  QString why;
  if (!json.isEmpty()) {
    QJsonParseError err{};
    const QJsonDocument doc = QJsonDocument::fromJson(json.toUtf8(), &err);
    if (!doc.isObject()) {
      why = tr("the bench's output is not a JSON object (%1)").arg(err.errorString());
    } else if (auto got = figure.extract(doc.object()); !got) {
      why = QString::fromStdString(got.status().message());
    } else {
      ours = std::move(*got);
    }
  }
  m_ours = ours;
  m_paper = figure.paper;

  // Categories: ours in their order, then the paper's that we did not measure.
  QStringList categories;
  for (const FigurePoint& p : m_ours) categories << p.category;
  for (const FigurePoint& p : m_paper)
    if (!categories.contains(p.category)) categories << p.category;
  // Lengths ("512 tokens") in numeric order, ours and the paper's interleaved.
  auto leadingNumber = [](const QString& c, bool* ok) { return c.section(QLatin1Char(' '), 0, 0).toDouble(ok); };
  bool numeric = true;
  for (const QString& c : categories) {
    bool ok = false;
    leadingNumber(c, &ok);
    numeric = numeric && ok;
  }
  if (numeric)
    std::stable_sort(categories.begin(), categories.end(), [&](const QString& a, const QString& b) {
      bool ok = false;
      return leadingNumber(a, &ok) < leadingNumber(b, &ok);
    });

  m_plot->clearPlottables();
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (int i = 0; i < categories.size(); ++i) ticker->addTick(i + 1, categories[i]);
  m_plot->xAxis->setTicker(ticker);
  m_plot->xAxis->setTickLabelRotation(categories.size() > 3 ? 20 : 0);
  m_plot->xAxis->setRange(0.3, categories.size() + 0.7);
  m_plot->yAxis->setLabel(figure.unit);
  auto* group = new QCPBarsGroup(m_plot);
  auto bars = [&](const FigurePoints& pts, const QString& name, const QColor& color) {
    auto* b = new QCPBars(m_plot->xAxis, m_plot->yAxis);
    b->setName(name);
    b->setPen(QPen(color.darker(130)));
    b->setBrush(color);
    b->setWidth(0.35);
    b->setBarsGroup(group);
    QVector<double> x, y;
    for (const FigurePoint& p : pts) x << categories.indexOf(p.category) + 1, y << p.value;
    b->setData(x, y);
    return b;
  };
  QCPBars* paper = bars(m_paper, tr("paper (reported)"), QColor(160, 160, 160));
  bool ranged = false;
  for (const FigurePoint& p : m_paper) ranged |= p.high != p.value;
  if (ranged) {  // the paper's range: from its low end (the bar) to its high end
    auto* err = new QCPErrorBars(m_plot->xAxis, m_plot->yAxis);
    err->removeFromLegend();
    err->setDataPlottable(paper);
    QVector<double> minus, plus;
    for (const FigurePoint& p : m_paper) minus << 0, plus << p.high - p.value;
    err->setData(minus, plus);
  }
  if (!m_ours.empty()) bars(m_ours, tr("this run"), QColor(40, 110, 200));
  double lo = 0, hi = 1;
  for (const FigurePoints* pts : {&m_ours, &m_paper})
    for (const FigurePoint& p : *pts) lo = std::min(lo, p.value), hi = std::max(hi, p.high);
  m_plot->yAxis->setRange(lo - 0.05 * (hi - lo), hi + 0.1 * (hi - lo));
  m_plot->replot(QCustomPlot::rpQueuedReplot);
  return why;
}

}  // namespace ragwb
