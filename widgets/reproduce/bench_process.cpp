#include "reproduce/bench_process.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonParseError>
#include <QRegularExpression>
#include <algorithm>

namespace ragwb {

namespace {
constexpr int kTailLines = 8;
}

BenchProcess::BenchProcess(QObject* parent) : QObject(parent) {
  m_tick.setInterval(250);
  connect(&m_tick, &QTimer::timeout, this, &BenchProcess::report);
}

BenchProcess::~BenchProcess() {
  if (m_process) {
    m_process->disconnect(this);
    m_process->kill();
    m_process->waitForFinished(3000);
  }
}

QString BenchProcess::ragraphBinary() {
  return QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("ragraph"));
}

bool BenchProcess::running() const { return m_process != nullptr; }

bool BenchProcess::start(const QString& program, const QStringList& args, double expectedSeconds) {
  if (m_process) return false;
  m_expected = std::max(1.0, expectedSeconds);
  m_stdout.clear();
  m_tail.clear();
  m_partialLine.clear();
  m_cancelled = false;
  m_commandLine = QFileInfo(program).fileName() + QLatin1Char(' ') + args.join(QLatin1Char(' '));
  m_process = new QProcess(this);
  connect(m_process, &QProcess::readyReadStandardOutput, this, [this] { m_stdout += m_process->readAllStandardOutput(); });
  connect(m_process, &QProcess::readyReadStandardError, this, &BenchProcess::onStderr);
  connect(m_process, &QProcess::finished, this, &BenchProcess::onFinished);
  connect(m_process, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) onFinished(-1, QProcess::CrashExit);
  });
  m_clock.start();
  m_tick.start();
  m_process->start(program, args);
  report();
  return true;
}

void BenchProcess::cancel() {
  if (!m_process) return;
  m_cancelled = true;
  m_process->kill();  // finished() follows from the event loop
}

void BenchProcess::onStderr() {
  m_partialLine += QString::fromUtf8(m_process->readAllStandardError());
  // Benches redraw progress with '\r' as well as writing lines.
  QStringList lines = m_partialLine.split(QRegularExpression(QStringLiteral("[\r\n]")));
  m_partialLine = lines.takeLast();
  for (const QString& l : lines)
    if (!l.trimmed().isEmpty()) m_tail << l.trimmed();
  while (m_tail.size() > kTailLines) m_tail.removeFirst();
  report();
}

void BenchProcess::report() {
  if (!m_process) return;
  const double elapsed = static_cast<double>(m_clock.elapsed()) / 1e3;
  const int percent = std::min(99, static_cast<int>(100.0 * elapsed / m_expected));
  Q_EMIT progress(percent, elapsed, m_tail.isEmpty() ? QString() : m_tail.last());
}

void BenchProcess::onFinished(int exitCode, QProcess::ExitStatus status) {
  if (!m_process) return;  // errorOccurred and finished may both arrive
  QProcess* p = m_process;
  m_process = nullptr;
  m_tick.stop();
  m_stdout += p->readAllStandardOutput();
  const QString startError = p->error() == QProcess::FailedToStart ? p->errorString() : QString();
  p->disconnect(this);
  p->deleteLater();

  BenchOutcome o;
  o.commandLine = m_commandLine;
  o.seconds = static_cast<double>(m_clock.elapsed()) / 1e3;
  if (m_cancelled) {
    o.kind = BenchOutcome::Kind::Cancelled;
    o.message = tr("cancelled after %1 s; nothing was saved").arg(o.seconds, 0, 'f', 0);
  } else if (!startError.isEmpty()) {
    o.message = tr("%1 did not start: %2 (is ragraph built next to ragraph-workbench?)").arg(m_commandLine, startError);
  } else if (status != QProcess::NormalExit || exitCode != 0) {
    o.message = tr("%1 %2:\n%3")
                    .arg(m_commandLine,
                         status == QProcess::NormalExit ? tr("exited with status %1").arg(exitCode) : tr("crashed"),
                         m_tail.join(QLatin1Char('\n')));
  } else {
    QJsonParseError err{};
    QJsonDocument::fromJson(m_stdout, &err);
    if (err.error != QJsonParseError::NoError) {
      o.message = tr("%1 printed no JSON document on stdout (%2 at byte %3)").arg(m_commandLine, err.errorString()).arg(err.offset);
    } else {
      o.kind = BenchOutcome::Kind::Finished;
      o.json = QString::fromUtf8(m_stdout);
    }
  }
  Q_EMIT finished(o);
}

}  // namespace ragwb
