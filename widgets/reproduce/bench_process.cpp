#include "reproduce/bench_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QFile>
#include <QSocketNotifier>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonParseError>
#include <QRegularExpression>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "bridge/background.h"

extern char** environ;

namespace ragwb {

namespace {
constexpr int kTailLines = 8;
}

BenchProcess::BenchProcess(QObject* parent) : QObject(parent) {
  m_tick.setInterval(250);
  connect(&m_tick, &QTimer::timeout, this, [this] {
    tryReap();  // a grandchild holding the pipes open must not hold the result back
    report();
  });
}

BenchProcess::~BenchProcess() {
  if (m_pid > 0) {
    ::kill(m_pid, SIGKILL);
    while (::waitpid(m_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  closePipe(m_out);
  closePipe(m_err);
}

QString BenchProcess::ragraphBinary() {
  return QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("ragraph"));
}

bool BenchProcess::running() const { return m_pid > 0; }

bool BenchProcess::start(const QString& program, const QStringList& args, double expectedSeconds) {
  if (m_pid > 0) return false;
  m_expected = std::max(1.0, expectedSeconds);
  m_stdout.clear();
  m_tail.clear();
  m_partialLine.clear();
  m_cancelled = false;
  m_commandLine = QFileInfo(program).fileName() + QLatin1Char(' ') + args.join(QLatin1Char(' '));
  m_clock.start();

  std::vector<QByteArray> argv8 = {QFile::encodeName(program)};
  for (const QString& a : args) argv8.push_back(a.toLocal8Bit());
  std::vector<char*> argv;
  for (QByteArray& a : argv8) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  QString startError;
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    startError = QString::fromLocal8Bit(std::strerror(errno));
  } else {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
    pid_t pid = -1;
    // The bench runs below the GUI thread, as the engine does (bridge/background.h). A new
    // process inherits the nice value of the thread that spawns it, so a short-lived thread
    // lowers itself and spawns: the child is lowered from its first instruction. (Lowering the
    // child after posix_spawn raced with it: a quick child ran a command at the GUI's priority.)
    int rc = 0;
    std::thread([&] {
      runBelowTheGuiThread();
      rc = ::posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    }).join();
    posix_spawn_file_actions_destroy(&fa);
    if (rc == 0) {
      m_pid = pid;
    } else {
      startError = QString::fromLocal8Bit(std::strerror(rc));
    }
  }
  for (int fd : {out[1], err[1]})
    if (fd >= 0) ::close(fd);
  if (m_pid <= 0) {
    for (int fd : {out[0], err[0]})
      if (fd >= 0) ::close(fd);
    // Reported from the event loop, as a started run's end is.
    QTimer::singleShot(0, this, [this, startError] { finish(-1, startError); });
    return true;
  }
  auto watch = [this](Pipe& p, int fd, bool isStdout) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    p.fd = fd;
    p.notifier = new QSocketNotifier(fd, QSocketNotifier::Read, this);
    connect(p.notifier, &QSocketNotifier::activated, this, [this, &p, isStdout] {
      drain(p, isStdout);
      if (m_out.fd < 0 && m_err.fd < 0) tryReap();
    });
  };
  watch(m_out, out[0], true);
  watch(m_err, err[0], false);
  m_tick.start();
  report();
  return true;
}

void BenchProcess::cancel() {
  if (m_pid <= 0) return;
  m_cancelled = true;
  ::kill(m_pid, SIGKILL);  // reaped from the event loop, then finished() reports Cancelled
}

void BenchProcess::drain(Pipe& pipe, bool isStdout) {
  if (pipe.fd < 0) return;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(pipe.fd, buf, sizeof buf);
    if (n > 0) {
      if (isStdout) m_stdout.append(buf, n);
      else onStderr(QByteArray(buf, static_cast<qsizetype>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    closePipe(pipe);  // EOF (or an error: nothing more will come)
    return;
  }
}

void BenchProcess::closePipe(Pipe& pipe) {
  if (pipe.notifier) {
    pipe.notifier->setEnabled(false);
    pipe.notifier->deleteLater();  // this may run inside its own activated() signal
  }
  pipe.notifier = nullptr;
  if (pipe.fd >= 0) ::close(pipe.fd);
  pipe.fd = -1;
}

void BenchProcess::tryReap() {
  if (m_pid <= 0) return;
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(m_pid, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == 0) {
    // Still running: its pipes closed early, so look again shortly.
    if (m_out.fd < 0 && m_err.fd < 0) QTimer::singleShot(5, this, &BenchProcess::tryReap);
    return;
  }
  m_pid = -1;
  drain(m_out, true);
  drain(m_err, false);
  closePipe(m_out);
  closePipe(m_err);
  finish(r < 0 ? -1 : status, r < 0 ? QString::fromLocal8Bit(std::strerror(errno)) : QString());
}

void BenchProcess::onStderr(const QByteArray& bytes) {
  m_partialLine += QString::fromUtf8(bytes);
  // Benches redraw progress with '\r' as well as writing lines.
  QStringList lines = m_partialLine.split(QRegularExpression(QStringLiteral("[\r\n]")));
  m_partialLine = lines.takeLast();
  for (const QString& l : lines)
    if (!l.trimmed().isEmpty()) m_tail << l.trimmed();
  while (m_tail.size() > kTailLines) m_tail.removeFirst();
  report();
}

void BenchProcess::report() {
  if (m_pid <= 0) return;
  const double elapsed = static_cast<double>(m_clock.elapsed()) / 1e3;
  const int percent = std::min(99, static_cast<int>(100.0 * elapsed / m_expected));
  Q_EMIT progress(percent, elapsed, m_tail.isEmpty() ? QString() : m_tail.last());
}

void BenchProcess::finish(int waitStatus, const QString& startError) {
  m_tick.stop();
  if (!m_partialLine.trimmed().isEmpty()) m_tail << m_partialLine.trimmed();
  BenchOutcome o;
  o.commandLine = m_commandLine;
  o.seconds = static_cast<double>(m_clock.elapsed()) / 1e3;
  const bool exited = waitStatus >= 0 && WIFEXITED(waitStatus);
  if (m_cancelled) {
    o.kind = BenchOutcome::Kind::Cancelled;
    o.message = tr("cancelled after %1 s; nothing was saved").arg(o.seconds, 0, 'f', 0);
  } else if (!startError.isEmpty()) {
    o.message = tr("%1 did not start: %2 (is ragraph built next to ragraph-workbench?)").arg(m_commandLine, startError);
  } else if (!exited || WEXITSTATUS(waitStatus) != 0) {
    o.message = tr("%1 %2:\n%3")
                    .arg(m_commandLine,
                         exited ? tr("exited with status %1").arg(WEXITSTATUS(waitStatus))
                                : tr("crashed (signal %1)").arg(WIFSIGNALED(waitStatus) ? WTERMSIG(waitStatus) : 0),
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
