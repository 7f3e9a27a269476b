// A fixed-size pool of named worker threads with a FIFO task queue.
//
//   ThreadPool pool({.threads = 4, .name = "retrieval"});
//   std::future<int> f = pool.submit([] { return 42; });
//   pool.waitIdle();        // every submitted task has finished
//
// The destructor finishes the tasks already queued, then joins. Exceptions thrown by a task
// reach the caller through its future.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace rag {

struct ThreadPoolParams {
  size_t threads = 0;          // 0: std::thread::hardware_concurrency()
  std::string name = "pool";   // thread names are "<name>-<i>" (15 chars max on Linux)
};

class ThreadPool {
public:
  explicit ThreadPool(ThreadPoolParams params = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  template <typename F>
  auto submit(F&& fn) -> std::future<std::invoke_result_t<F>> {
    using R = std::invoke_result_t<F>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> fut = task->get_future();
    post([task] { (*task)(); });
    return fut;
  }

  // Fire-and-forget; exceptions are swallowed and counted (see failedTasks()).
  void post(std::function<void()> fn);

  // Blocks until the queue is empty and no task is running.
  void waitIdle();

  size_t size() const { return m_workers.size(); }
  size_t pending() const;
  size_t failedTasks() const;

private:
  void workerLoop(size_t index);

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::condition_variable m_idle;
  std::deque<std::function<void()>> m_queue;
  std::vector<std::thread> m_workers;
  size_t m_running = 0;
  size_t m_failed = 0;
  bool m_stop = false;
  std::string m_name;
};

// Sets the calling thread's name as seen by debuggers, `top -H` and trace exports.
void setCurrentThreadName(const std::string& name);

}  // namespace rag
