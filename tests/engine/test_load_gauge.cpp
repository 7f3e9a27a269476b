// The speculation gauge (sched/load_gauge.h): busy time reported by worker threads, over the
// threads they have, per window, smoothed; safe to feed from several threads at once.
#include <QtTest>

#include <thread>
#include <vector>

#include "sched/load_gauge.h"

using rag::sched::LoadGauge;

namespace {
constexpr uint64_t kMs = 1'000'000;
}

class TestLoadGauge : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void readsBusyShareOfTheCapacityPerWindow() {
    LoadGauge g(2, 100 * kMs);
    const uint64_t t0 = 1'000 * kMs;
    QCOMPARE(g.load(t0), 0.0);  // the first call starts the first window
    g.addBusy(100 * kMs);       // one of two threads busy for the whole window
    QCOMPARE(g.load(t0 + 50 * kMs), 0.0);  // the window is not over: the old value
    QCOMPARE(g.load(t0 + 100 * kMs), 0.5);
    QCOMPARE(g.last(), 0.5);
    g.addBusy(200 * kMs);  // both busy: the next window reads 1, averaged with 0.5
    QCOMPARE(g.load(t0 + 200 * kMs), 0.75);
    QCOMPARE(g.load(t0 + 300 * kMs), 0.375);  // idle: halves
    g.addBusy(900 * kMs);  // more than the threads can do (preempted mid-work): 1 at most
    QCOMPARE(g.load(t0 + 400 * kMs), 0.6875);
    QCOMPARE(g.busySeconds(), 1.2);  // every report, uncapped: 100 + 200 + 900 ms
  }

  void longerGapsAreOneWindow() {
    LoadGauge g(1, 100 * kMs);
    QCOMPARE(g.load(kMs), 0.0);
    g.addBusy(250 * kMs);
    QCOMPARE(g.load(kMs + 1000 * kMs), 0.25);  // 250 ms busy in a 1 s gap, the first sample
  }

  void capacityIsAtLeastOneThread() {
    LoadGauge g(0);
    QCOMPARE(g.capacity(), 1.0);
  }

  void workersMayReportConcurrently() {
    LoadGauge g(4, 100 * kMs);
    QCOMPARE(g.load(kMs), 0.0);
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&g] {
        for (int i = 0; i < 10000; ++i) g.addBusy(10'000);  // 4 x 100 ms in all
      });
    for (auto& t : ts) t.join();
    QCOMPARE(g.load(kMs + 200 * kMs), 0.5);
  }
};

QTEST_GUILESS_MAIN(TestLoadGauge)
#include "test_load_gauge.moc"
