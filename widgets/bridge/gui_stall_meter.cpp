#include "bridge/gui_stall_meter.h"

#include <QMetaEnum>
#include <QThread>

#include <algorithm>

#ifdef __linux__
#include <time.h>
#endif

namespace ragwb {

double GuiStallMeter::threadCpuMs() {
#ifdef __linux__
  timespec t{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0) return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
#endif
  return -1;
}

GuiStallMeter* GuiStallMeter::s_running = nullptr;

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
  s_running = this;
}

void GuiStallMeter::stop() {
  m_timer.stop();
  if (s_running == this) s_running = nullptr;
}

void GuiStallMeter::reset() {
  m_maxMs = m_sumMs = 0;
  m_maxBusyMs = -1;
  m_ticks = 0;
  m_pending.clear();
  m_maxEvents.clear();
  if (m_clock.isValid()) m_lastNs = m_clock.nsecsElapsed();
  m_lastCpuMs = threadCpuMs();
}

void GuiStallMeter::tick() {
  const qint64 now = m_clock.nsecsElapsed();
  const double gapMs = static_cast<double>(now - m_lastNs) * 1e-6;
  m_lastNs = now;
  const double cpuMs = threadCpuMs();
  ++m_ticks;
  m_sumMs += gapMs;
  if (gapMs - kIntervalMs > m_maxMs || m_ticks == 1) {
    m_maxMs = std::max(0.0, gapMs - kIntervalMs);
    m_maxBusyMs = cpuMs >= 0 && m_lastCpuMs >= 0 ? cpuMs - m_lastCpuMs : -1;
    m_maxEvents = m_pending;
  }
  m_pending.clear();
  m_lastCpuMs = cpuMs;
}

void GuiStallMeter::noteEvent(const char* className, const QString& objectName, QEvent::Type type, qint64 ns) {
  GuiStallMeter* m = s_running;
  if (!m || ns < 500'000 || m->m_pending.size() >= kMaxEvents || QThread::currentThread() != m->thread()) return;
  m->m_pending.push_back({ns, className, objectName, type});
}

QStringList GuiStallMeter::maxStallEvents() const {
  std::vector<Event> events = m_maxEvents;
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.ns > b.ns; });
  const QMetaEnum types = QMetaEnum::fromType<QEvent::Type>();
  QStringList out;
  for (const Event& e : events) {
    const char* type = types.valueToKey(e.type);
    QString line = QStringLiteral("%1 ms %2 %3").arg(static_cast<double>(e.ns) * 1e-6, 0, 'f', 1)
                       .arg(type ? QString::fromLatin1(type) : QString::number(e.type), QString::fromLatin1(e.className));
    if (!e.objectName.isEmpty()) line += QStringLiteral(" '%1'").arg(e.objectName);
    out << line;
  }
  return out;
}

}  // namespace ragwb
