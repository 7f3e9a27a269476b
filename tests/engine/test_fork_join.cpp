// ForkJoin: every index runs exactly once across the caller and the workers, small ranges stay
// on the caller, a second caller during a run goes serial instead of blocking, and an
// exception in any part reaches the caller.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "core/fork_join.h"

using namespace rag;

class TestForkJoin : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void everyIndexRunsOnceOnSeveralThreads() {
    ForkJoin team(3);
    QCOMPARE(team.size(), 3);
    std::set<std::thread::id> ids;
    std::mutex m;
    for (int64_t n : {1, 2, 3, 7, 64, 1001}) {
      for (int rep = 0; rep < 200; ++rep) {  // many forks in a row: workers spin, then reuse
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        team.run(n, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          std::lock_guard lock(m);
          ids.insert(std::this_thread::get_id());
        });
        for (int64_t i = 0; i < n; ++i) QCOMPARE(hits[static_cast<size_t>(i)].load(), 1);
      }
    }
    QVERIFY(ids.count(std::this_thread::get_id()));  // the caller takes parts itself
    // Parts slow enough that a worker wakes before the caller has claimed them all.
    std::set<std::thread::id> slowIds;
    for (int attempt = 0; attempt < 20 && slowIds.size() < 2; ++attempt)
      team.run(12, 1, [&](int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::lock_guard lock(m);
        slowIds.insert(std::this_thread::get_id());
      });
    QVERIFY2(slowIds.size() > 1, "the workers never took a part");
  }

  // A worker held up inside its part (as a descheduled one would be) leaves every other part to
  // the caller: the run needs nothing more from it than the part it claimed.
  void unclaimedPartsAreTakenByTheCaller() {
    ForkJoin team(2);
    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> parts{0}, byCaller{0};
    std::atomic<bool> workerStarted{false}, release{false};
    team.run(8, 1, [&](int64_t, int64_t) {
      parts++;
      if (std::this_thread::get_id() != caller) {
        workerStarted = true;
        while (!release) std::this_thread::yield();
        return;
      }
      if (byCaller == 0)  // let the worker claim one part first (it is awake: it was just notified)
        for (int i = 0; i < 2000 && !workerStarted; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (++byCaller == 7) release = true;
    });
    if (!workerStarted) QSKIP("the worker thread was not scheduled within 2 s");
    QCOMPARE(parts.load(), 8);
    QCOMPARE(byCaller.load(), 7);  // everything but the one part the worker holds
  }

  void smallRangesStayOnTheCaller() {
    ForkJoin team(2);
    std::thread::id ran;
    int calls = 0;
    team.run(100, 100, [&](int64_t b, int64_t e) {
      QCOMPARE(b, int64_t{0});
      QCOMPARE(e, int64_t{100});
      ran = std::this_thread::get_id();
      ++calls;
    });
    QCOMPARE(calls, 1);
    QCOMPARE(ran, std::this_thread::get_id());
    team.run(0, 1, [&](int64_t, int64_t) { ++calls; });
    QCOMPARE(calls, 1);
  }

  void aSecondCallerRunsSeriallyInsteadOfWaiting() {
    ForkJoin team(2);
    std::atomic<bool> inside{false}, release{false};
    std::thread first([&] {
      team.run(2, 1, [&](int64_t b, int64_t) {
        if (b == 0) {
          inside = true;
          while (!release) std::this_thread::yield();
        }
      });
    });
    while (!inside) std::this_thread::yield();
    int64_t covered = 0;
    int parts = 0;
    team.run(10, 1, [&](int64_t b, int64_t e) {  // would deadlock if it waited for `first`
      covered += e - b;
      ++parts;
    });
    QCOMPARE(covered, int64_t{10});
    QCOMPARE(parts, 1);
    release = true;
    first.join();
  }

  void exceptionsReachTheCaller() {
    ForkJoin team(2);
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, team.run(10, 1, [](int64_t b, int64_t) {
      if (b > 0) throw std::runtime_error("worker part");
    }));
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, team.run(10, 1, [](int64_t b, int64_t) {
      if (b == 0) throw std::runtime_error("caller part");
    }));
    int64_t covered = 0;  // still usable afterwards
    std::mutex m;
    team.run(10, 1, [&](int64_t b, int64_t e) {
      std::lock_guard lock(m);
      covered += e - b;
    });
    QCOMPARE(covered, int64_t{10});
  }

  // A worker that read the claim counter of a finished run must not take a part of the next
  // one: runs of 2 parts alternate with runs of 32, on more threads than cores (so workers are
  // preempted between their reads), and every index of every run must run exactly once and
  // never after its run returned. Before the fix, a stale worker could claim part k (>= 2) of
  // the 2-part run under the 32-part run's part count, run the new run's function, and count
  // it as done: the new run returned with a part still running on its dead stack frame (the
  // retrieval worker's encoder crashed so on a 16-core machine).
  void noPartRunsOutsideItsRun() {
    ForkJoin team(8);
    struct Run {
      std::atomic<bool> returned{false};
      std::vector<std::atomic<int>> hits;
      explicit Run(int64_t n) : hits(static_cast<size_t>(n)) {}
    };
    // The last 4096 runs stay alive, so that a late part (microseconds late) still finds its own.
    std::vector<std::unique_ptr<Run>> runs(4096);
    std::atomic<int> late{0}, twice{0};
    int64_t count = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    for (; std::chrono::steady_clock::now() < until && count < 1000000; ++count) {
      const int64_t n = count % 2 ? 64 : 2;
      std::unique_ptr<Run>& slot = runs[static_cast<size_t>(count) % runs.size()];
      slot = std::make_unique<Run>(n);
      Run& r = *slot;
      team.run(n, 1, [&r, &late, &twice](int64_t b, int64_t e) {
        if (r.returned.load()) late++;
        for (int64_t i = b; i < e; ++i)
          if (r.hits[static_cast<size_t>(i)]++ > 0) twice++;
      });
      r.returned.store(true);
      for (const std::atomic<int>& h : r.hits)
        if (h.load() != 1) twice++;
    }
    qInfo("%lld runs", static_cast<long long>(count));
    QCOMPARE(late.load(), 0);
    QCOMPARE(twice.load(), 0);
  }
};

QTEST_GUILESS_MAIN(TestForkJoin)
#include "test_fork_join.moc"
