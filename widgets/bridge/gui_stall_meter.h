// Measures how long the GUI thread's event loop goes without running: a 5 ms timer notes how
// late each tick arrives; the longest lateness is the longest stall a user could have felt
// (goal: at most one 16 ms frame). Cheap enough to leave on. Where the system can say (Linux),
// it also notes how much of the longest stall the GUI thread spent working: the rest it waited,
// for a core or on something else, which tells a slow handler from a busy machine.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

namespace ragwb {

class GuiStallMeter : public QObject {
  Q_OBJECT
public:
  explicit GuiStallMeter(QObject* parent = nullptr);
  void start();
  void stop();
  void reset();
  double maxStallMs() const { return m_maxMs; }
  // CPU time the GUI thread used during the longest stall; -1 where it cannot be measured.
  double maxStallBusyMs() const { return m_maxBusyMs; }
  double meanTickMs() const { return m_ticks ? m_sumMs / static_cast<double>(m_ticks) : 0.0; }
  qint64 ticks() const { return m_ticks; }

private:
  void tick();
  QTimer m_timer;
  QElapsedTimer m_clock;
  qint64 m_lastNs = 0;
  double m_lastCpuMs = 0;
  double m_maxBusyMs = -1;
  double m_maxMs = 0, m_sumMs = 0;
  qint64 m_ticks = 0;
  static constexpr int kIntervalMs = 5;
};

}  // namespace ragwb
