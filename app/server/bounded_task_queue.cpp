#include "server/bounded_task_queue.h"

namespace rag::server {

BoundedThreadPool::BoundedThreadPool(size_t threads, size_t maxQueued, std::atomic<int64_t>* queued)
    : m_maxQueued(maxQueued), m_queued(queued) {
  for (size_t i = 0; i < threads; ++i) m_threads.emplace_back([this] { work(); });
}

void BoundedThreadPool::enqueue(std::function<void()> fn) {
  std::unique_lock lock(m_mutex);
  m_space.wait(lock, [&] { return m_jobs.size() < m_maxQueued || m_shutdown; });
  m_jobs.push_back(std::move(fn));
  if (m_queued) m_queued->store(static_cast<int64_t>(m_jobs.size()));
  m_ready.notify_one();
}

void BoundedThreadPool::shutdown() {
  {
    std::lock_guard lock(m_mutex);
    m_shutdown = true;
  }
  m_ready.notify_all();
  m_space.notify_all();
  for (std::thread& t : m_threads) t.join();
}

void BoundedThreadPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(m_mutex);
      m_ready.wait(lock, [&] { return !m_jobs.empty() || m_shutdown; });
      if (m_jobs.empty()) return;  // shut down and drained
      fn = std::move(m_jobs.front());
      m_jobs.pop_front();
      if (m_queued) m_queued->store(static_cast<int64_t>(m_jobs.size()));
    }
    m_space.notify_one();
    fn();
  }
}

}  // namespace rag::server
