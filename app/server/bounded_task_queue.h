// cpp-httplib's task queue with a bound (its own ThreadPool queues every accepted connection
// without limit). enqueue() is called by the accepting thread; while `maxQueued` connections
// already wait for a worker it waits, so accepted-but-unserved connections never pile up in
// memory, and the kernel's listen backlog holds (or refuses) the rest meanwhile.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rag::server {

class BoundedThreadPool final : public httplib::TaskQueue {
public:
  // `queued` (optional) follows the number of waiting connections, for /metrics.
  BoundedThreadPool(size_t threads, size_t maxQueued, std::atomic<int64_t>* queued);
  ~BoundedThreadPool() override = default;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;  // runs what is queued, then joins the threads

private:
  void work();

  size_t m_maxQueued;
  std::atomic<int64_t>* m_queued;
  std::mutex m_mutex;
  std::condition_variable m_ready, m_space;
  std::deque<std::function<void()>> m_jobs;
  std::vector<std::thread> m_threads;
  bool m_shutdown = false;
};

}  // namespace rag::server
