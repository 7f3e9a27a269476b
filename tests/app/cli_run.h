// Runs the built `ragraph` binary as a user would, for the app tests.
#pragma once

#include <QProcess>
#include <cstdlib>
#include <functional>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

struct CliRun {
  int code = -1;  // -1: crashed or timed out
  QString out;
  QString err;
};

// Timeouts are multiplied by $RAGWB_TEST_TIMEOUT_SCALE (the sanitizer test presets set it: an
// instrumented `ragraph index build` over the whole corpus takes minutes, not seconds).
inline int scaledTimeoutMs(int ms) {
  const char* s = std::getenv("RAGWB_TEST_TIMEOUT_SCALE");
  const double scale = s ? std::atof(s) : 1.0;
  return scale > 1.0 ? static_cast<int>(ms * scale) : ms;
}

// `inChild` runs in the child between fork and exec (e.g. to set a resource limit).
inline CliRun runRagraph(const QStringList& args, int timeoutMs = 120000,
                         const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment(),
                         const std::function<void()>& inChild = {}) {
  QProcess p;
  p.setProcessEnvironment(env);
  if (inChild) p.setChildProcessModifier(inChild);
  p.start(QStringLiteral(RAGWB_BIN_DIR "/ragraph"), args);
  CliRun r;
  if (!p.waitForFinished(scaledTimeoutMs(timeoutMs))) {
    p.kill();
    p.waitForFinished();
    r.err = QStringLiteral("ragraph %1 timed out after %2 s; its stderr so far:\n%3")
                .arg(args.join(QLatin1Char(' ')))
                .arg(scaledTimeoutMs(timeoutMs) / 1000)
                .arg(QString::fromUtf8(p.readAllStandardError()));
    return r;
  }
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

// Starts `ragraph serve --listen 127.0.0.1:0 ARGS` in `server`; the URL it listens on once it says
// so (at most 2 minutes to load), empty if it exited or never did.
inline QString startRagraphServe(QProcess& server, const QStringList& args) {
  server.start(QStringLiteral(RAGWB_BIN_DIR "/ragraph"), QStringList{"serve", "--listen", "127.0.0.1:0"} + args);
  for (int i = 0; i < 240; ++i) {
    if (server.state() == QProcess::NotRunning) return {};
    server.waitForReadyRead(500);
    const QString out = QString::fromUtf8(server.peek(4096));
    const int at = out.indexOf("listening on ");
    const int nl = out.indexOf('\n', at);
    if (at >= 0 && nl > at) return out.mid(at + 13, nl - at - 13).trimmed();
  }
  return {};
}
