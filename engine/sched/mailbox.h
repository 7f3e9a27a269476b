// A many-producer, one-consumer queue with blocking take: how the scheduler and its workers
// talk. Producers never block; the consumer takes everything queued at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace rag::sched {

template <typename T>
class Mailbox {
public:
  void push(T item) {
    {
      std::lock_guard lock(m_mutex);
      m_items.push_back(std::move(item));
    }
    m_cv.notify_one();
  }
  // Wakes a consumer blocked in takeAll without an item (shutdown, new work elsewhere).
  void poke() {
    {
      std::lock_guard lock(m_mutex);
      m_poked = true;
    }
    m_cv.notify_one();
  }
  // Appends every queued item to `out`; waits up to `timeout` for the first one (or a poke).
  template <typename Rep, typename Period>
  void takeAll(std::vector<T>& out, std::chrono::duration<Rep, Period> timeout) {
    std::unique_lock lock(m_mutex);
    if (m_items.empty() && !m_poked) m_cv.wait_for(lock, timeout, [&] { return !m_items.empty() || m_poked; });
    m_poked = false;
    for (T& t : m_items) out.push_back(std::move(t));
    m_items.clear();
  }
  void takeAll(std::vector<T>& out) { takeAll(out, std::chrono::seconds(0)); }

private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<T> m_items;
  bool m_poked = false;
};

// First come, first served turns on one resource: the Sequential policy makes its generation
// and retrieval workers take turns so that stages never overlap (HedraRAG Fig. 5a).
class TurnLock {
public:
  void acquire() {
    std::unique_lock lock(m_mutex);
    const unsigned long long ticket = m_next++;
    m_cv.wait(lock, [&] { return m_serving == ticket; });
  }
  void release() {
    {
      std::lock_guard lock(m_mutex);
      ++m_serving;
    }
    m_cv.notify_all();
  }

private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  unsigned long long m_next = 0, m_serving = 0;
};

// Holds a TurnLock for a scope when one is given (null: no turns, the asynchronous policies).
class TurnGuard {
public:
  explicit TurnGuard(TurnLock* lock) : m_lock(lock) { if (m_lock) m_lock->acquire(); }
  ~TurnGuard() { if (m_lock) m_lock->release(); }
  TurnGuard(const TurnGuard&) = delete;
  TurnGuard& operator=(const TurnGuard&) = delete;

private:
  TurnLock* m_lock;
};

}  // namespace rag::sched
