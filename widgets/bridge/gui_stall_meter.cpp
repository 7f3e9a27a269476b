#include "bridge/gui_stall_meter.h"

#include <algorithm>

namespace ragwb {

GuiStallMeter::GuiStallMeter(QObject* parent) : QObject(parent) {
  m_timer.setInterval(kIntervalMs);
  m_timer.setTimerType(Qt::PreciseTimer);
  connect(&m_timer, &QTimer::timeout, this, &GuiStallMeter::tick);
}

void GuiStallMeter::start() {
  reset();
  m_clock.start();
  m_lastNs = m_clock.nsecsElapsed();
  m_timer.start();
}

void GuiStallMeter::stop() { m_timer.stop(); }

void GuiStallMeter::reset() {
  m_maxMs = m_sumMs = 0;
  m_ticks = 0;
  if (m_clock.isValid()) m_lastNs = m_clock.nsecsElapsed();
}

void GuiStallMeter::tick() {
  const qint64 now = m_clock.nsecsElapsed();
  const double gapMs = static_cast<double>(now - m_lastNs) * 1e-6;
  m_lastNs = now;
  ++m_ticks;
  m_sumMs += gapMs;
  m_maxMs = std::max(m_maxMs, gapMs - kIntervalMs);
}

}  // namespace ragwb
