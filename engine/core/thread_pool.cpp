#include "core/thread_pool.h"

#include <pthread.h>

namespace rag {

void setCurrentThreadName(const std::string& name) {
  std::string shortName = name.substr(0, 15);
  pthread_setname_np(pthread_self(), shortName.c_str());
}

ThreadPool::ThreadPool(ThreadPoolParams params) : m_name(std::move(params.name)) {
  size_t n = params.threads ? params.threads : std::max(1u, std::thread::hardware_concurrency());
  m_workers.reserve(n);
  for (size_t i = 0; i < n; ++i) m_workers.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  for (auto& t : m_workers) t.join();
}

void ThreadPool::post(std::function<void()> fn) {
  {
    std::lock_guard lock(m_mutex);
    m_queue.push_back(std::move(fn));
  }
  m_wake.notify_one();
}

void ThreadPool::waitIdle() {
  std::unique_lock lock(m_mutex);
  m_idle.wait(lock, [this] { return m_queue.empty() && m_running == 0; });
}

size_t ThreadPool::pending() const {
  std::lock_guard lock(m_mutex);
  return m_queue.size();
}

size_t ThreadPool::failedTasks() const {
  std::lock_guard lock(m_mutex);
  return m_failed;
}

void ThreadPool::workerLoop(size_t index) {
  setCurrentThreadName(m_name + "-" + std::to_string(index));
  std::unique_lock lock(m_mutex);
  for (;;) {
    m_wake.wait(lock, [this] { return m_stop || !m_queue.empty(); });
    if (m_queue.empty()) return;  // m_stop and drained
    std::function<void()> fn = std::move(m_queue.front());
    m_queue.pop_front();
    ++m_running;
    lock.unlock();
    bool failed = false;
    try {
      fn();
    } catch (...) {
      failed = true;  // submit() tasks carry their exception in the future; post() ones are counted
    }
    lock.lock();
    --m_running;
    if (failed) ++m_failed;
    if (m_queue.empty() && m_running == 0) m_idle.notify_all();
  }
}

}  // namespace rag
