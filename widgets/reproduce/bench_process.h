// One `ragraph bench ...` run as a child process, for the Reproduce page: the GUI thread only
// reacts to the process's signals (stdout collected, stderr lines forwarded as progress, a
// timer for the elapsed time), so a bench of minutes never blocks it.
//
//   auto* run = new ragwb::BenchProcess(this);
//   connect(run, &BenchProcess::finished, this, [](const ragwb::BenchOutcome& o) { ... });
//   run->start(ragwb::BenchProcess::ragraphBinary(), {"bench", "dragon", "--quick", "--json"}, 150);
//   run->cancel();   // kills the child; finished() then reports Cancelled, with no output
//
// A GUI-thread object. The child's stdout must be one JSON document (every bench prints one).
//
// The child is started with posix_spawn (glibc: a vfork-style clone that shares the parent's
// memory until exec) rather than QProcess, whose fork copies the page tables of the whole
// workbench first: with the engine loaded that cost the GUI thread 60-80 ms of kernel time at
// each Run (a fork of a process with 1.2 GB resident took 13-57 ms here, posix_spawn 2-5 ms).
// Its pipes are read through QSocketNotifiers and it is reaped with waitpid(WNOHANG).
#pragma once

#include <sys/types.h>

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>

class QSocketNotifier;

namespace ragwb {

struct BenchOutcome {
  enum class Kind { Finished, Failed, Cancelled };
  Kind kind = Kind::Failed;
  QString json;         // Finished: the bench's stdout (parses as JSON)
  QString message;      // Failed: why, with the bench's last stderr lines
  QString commandLine;  // as run, for the history
  double seconds = 0;
};

class BenchProcess : public QObject {
  Q_OBJECT
public:
  explicit BenchProcess(QObject* parent = nullptr);
  ~BenchProcess() override;  // kills a child still running

  // The `ragraph` binary next to this executable (both are installed into one bin directory).
  static QString ragraphBinary();

  // Starts `program args...`; `expectedSeconds` scales the progress (elapsed / expected, held
  // below 100 % until the child exits). False (nothing started) while another run is in flight.
  bool start(const QString& program, const QStringList& args, double expectedSeconds);
  void cancel();
  bool running() const;

Q_SIGNALS:
  // percent 0..99 from the elapsed time; line: the bench's latest stderr line ("" if none yet).
  void progress(int percent, double elapsedSeconds, const QString& line);
  void finished(const ragwb::BenchOutcome& outcome);

private:
  struct Pipe {
    int fd = -1;
    QSocketNotifier* notifier = nullptr;
  };
  void drain(Pipe& pipe, bool isStdout);  // reads what is there; closes the pipe at EOF
  void closePipe(Pipe& pipe);
  void tryReap();  // finishes once the child has exited (its pipes drained first)
  void finish(int waitStatus, const QString& startError);
  void onStderr(const QByteArray& bytes);
  void report();

  pid_t m_pid = -1;  // the running child; -1 when none
  Pipe m_out, m_err;
  QTimer m_tick;
  QElapsedTimer m_clock;
  double m_expected = 60;
  QByteArray m_stdout;
  QStringList m_tail;  // the last stderr lines
  QString m_partialLine;
  QString m_commandLine;
  bool m_cancelled = false;
};

}  // namespace ragwb
