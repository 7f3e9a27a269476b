#include <QtTest>

#include <atomic>
#include <set>

#include "core/thread_pool.h"

using namespace rag;

class TestThreadPool : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void runsEveryTaskOnWorkers() {
    ThreadPool pool({.threads = 3, .name = "t"});
    QCOMPARE(pool.size(), size_t{3});
    std::atomic<int> sum{0};
    std::mutex m;
    std::set<std::thread::id> ids;
    std::vector<std::future<int>> futures;
    for (int i = 1; i <= 1000; ++i)
      futures.push_back(pool.submit([i, &sum, &m, &ids] {
        sum += i;
        std::lock_guard lock(m);
        ids.insert(std::this_thread::get_id());
        return i * i;
      }));
    long long squares = 0;
    for (auto& f : futures) squares += f.get();
    QCOMPARE(sum.load(), 500500);
    QCOMPARE(squares, 333833500LL);
    QVERIFY(!ids.count(std::this_thread::get_id()));
    QVERIFY(ids.size() <= 3);
  }

  void exceptionsReachTheFuture() {
    ThreadPool pool({.threads = 2});
    auto f = pool.submit([]() -> int { throw std::runtime_error("boom"); });
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, f.get());
    pool.post([] { throw std::runtime_error("lost"); });
    pool.waitIdle();
    QCOMPARE(pool.failedTasks(), size_t{1});
  }

  void waitIdleWaitsForRunningTasks() {
    ThreadPool pool({.threads = 2});
    std::atomic<int> done{0};
    for (int i = 0; i < 8; ++i)
      pool.post([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++done;
      });
    pool.waitIdle();
    QCOMPARE(done.load(), 8);
    QCOMPARE(pool.pending(), size_t{0});
  }

  void destructorDrainsQueue() {
    std::atomic<int> done{0};
    {
      ThreadPool pool({.threads = 1});
      for (int i = 0; i < 50; ++i) pool.post([&] { ++done; });
    }
    QCOMPARE(done.load(), 50);
  }
};

QTEST_GUILESS_MAIN(TestThreadPool)
#include "test_thread_pool.moc"
