// Measures how long the GUI thread's event loop goes without running: a 5 ms timer notes how
// late each tick arrives; the longest lateness is the longest stall a user could have felt
// (goal: at most one 16 ms frame). Cheap enough to leave on. Where the system can say (Linux),
// it also notes how much of the longest stall the GUI thread spent working: the rest it waited,
// for a core or on something else, which tells a slow handler from a busy machine. With an
// application that reports its events (noteEvent: the workbench's overrides notify()), it also
// keeps which events ran during the longest stall and for how long, as Tracy would show them.
#pragma once

#include <QElapsedTimer>
#include <QEvent>
#include <QObject>
#include <QStringList>
#include <QTimer>

#include <vector>

namespace ragwb {

class GuiStallMeter : public QObject {
  Q_OBJECT
public:
  explicit GuiStallMeter(QObject* parent = nullptr);
  // CPU time of the calling thread in ms (its own work, apart from waiting for a core on a busy
  // machine); -1 where there is no per-thread clock. The panels time their GUI-thread work with it.
  static double threadCpuMs();
  void start();
  void stop();
  void reset();
  double maxStallMs() const { return m_maxMs; }
  // CPU time the GUI thread used during the longest stall; -1 where it cannot be measured.
  double maxStallBusyMs() const { return m_maxBusyMs; }
  double meanTickMs() const { return m_ticks ? m_sumMs / static_cast<double>(m_ticks) : 0.0; }
  qint64 ticks() const { return m_ticks; }
  // The GUI thread's events that ran between the two ticks of the longest stall, longest first
  // ("9.1 ms Paint KgGraphView 'kgView'"), those of at least 0.5 ms; empty without noteEvent.
  QStringList maxStallEvents() const;

  // Called by the application after it dispatched `event` to `receiver` at the top of the GUI
  // thread's event loop (not for nested sends), with its duration; the running meter keeps it.
  // `className` and `objectName` are read before the dispatch (which may delete the receiver).
  static void noteEvent(const char* className, const QString& objectName, QEvent::Type type, qint64 ns);

private:
  struct Event {
    qint64 ns = 0;
    const char* className = nullptr;
    QString objectName;
    QEvent::Type type = QEvent::None;
  };
  void tick();
  QTimer m_timer;
  QElapsedTimer m_clock;
  qint64 m_lastNs = 0;
  double m_lastCpuMs = 0;
  double m_maxBusyMs = -1;
  double m_maxMs = 0, m_sumMs = 0;
  qint64 m_ticks = 0;
  std::vector<Event> m_pending, m_maxEvents;  // since the last tick; during the longest stall
  static constexpr int kIntervalMs = 5;
  static constexpr size_t kMaxEvents = 64;
  static GuiStallMeter* s_running;  // the meter noteEvent feeds (one runs at a time)
};

}  // namespace ragwb
