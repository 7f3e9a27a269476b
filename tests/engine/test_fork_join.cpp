// ForkJoin: every index runs exactly once across the caller and the workers, small ranges stay
// on the caller, a second caller during a run goes serial instead of blocking, and an
// exception in any part reaches the caller.
#include <QtTest>

#include <atomic>
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
    QVERIFY2(ids.size() > 1, "a range of 1001 with grain 1 must be split over the team");
    QVERIFY(ids.count(std::this_thread::get_id()));  // the caller takes a part itself
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
};

QTEST_GUILESS_MAIN(TestForkJoin)
#include "test_fork_join.moc"
