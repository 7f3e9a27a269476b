#include "server/request_events.h"

namespace rag::server {

void EventQueue::push(RequestEvent e) {
  {
    std::lock_guard lock(m_mutex);
    m_events.push_back(std::move(e));
  }
  m_cv.notify_one();
}

std::optional<RequestEvent> EventQueue::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  if (!m_cv.wait_for(lock, timeout, [&] { return !m_events.empty(); })) return std::nullopt;
  RequestEvent e = std::move(m_events.front());
  m_events.pop_front();
  return e;
}

RequestEventFn RequestEventHub::callback() {
  return [this](const RequestEvent& e) { route(e); };
}

void RequestEventHub::route(const RequestEvent& e) {
  // Waits at most for a submit() in progress (it never waits on the scheduler): short.
  std::lock_guard lock(m_mutex);
  auto it = m_streams.find(e.requestId);
  if (it != m_streams.end()) it->second->push(e);
}

RequestEventHub::Submitted RequestEventHub::submit(Engine& engine, std::string question, const WorkflowGraph& graph,
                                                   bool streamed) {
  Submitted out;
  if (!streamed) {
    out.handle = engine.submit(std::move(question), graph);
    return out;
  }
  // Engine::submit only queues the request for the scheduler thread, so holding the lock across
  // it cannot deadlock with route(), and the stream exists before the request's first event.
  std::lock_guard lock(m_mutex);
  out.handle = engine.submit(std::move(question), graph);
  if (out.handle) {
    out.events = std::make_shared<EventQueue>();
    m_streams[out.handle->id()] = out.events;
  }
  return out;
}

void RequestEventHub::forget(uint32_t requestId) {
  std::lock_guard lock(m_mutex);
  m_streams.erase(requestId);
}

}  // namespace rag::server
