// Routes the engine's request events (EngineParams::onEvent, called on the scheduler thread) to
// the HTTP threads streaming those requests. A stream is registered in the same critical section
// as its submit(), so no event of a streamed request is missed; events of requests nobody
// streams are dropped at once. Each stream's queue holds at most the events of one request.
//
//   RequestEventHub hub;
//   params.onEvent = hub.callback();                     // before Engine::create
//   auto [handle, stream] = hub.submit(engine, question, graph, /*streamed=*/true);
//   while (auto e = stream->next(std::chrono::milliseconds(100))) ...   // on the HTTP thread
//   hub.forget(handle->id());
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "rag/engine.h"

namespace rag::server {

// The events of one request, in order, for one consumer.
class EventQueue {
public:
  void push(RequestEvent e);
  // The next event, or nullopt after `timeout` without one.
  std::optional<RequestEvent> next(std::chrono::milliseconds timeout);

private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<RequestEvent> m_events;
};

class RequestEventHub {
public:
  // The function to give EngineParams::onEvent. The hub must outlive the engine.
  RequestEventFn callback();

  struct Submitted {
    Result<RequestHandle> handle = Status::internal("not submitted");
    std::shared_ptr<EventQueue> events;  // null unless streamed and submitted
  };
  // engine.submit(question, graph); with `streamed`, the request's events from its first on.
  Submitted submit(Engine& engine, std::string question, const WorkflowGraph& graph, bool streamed);
  // Stops routing events of `requestId` (after its last one was read, or when its client left).
  void forget(uint32_t requestId);

private:
  void route(const RequestEvent& e);
  std::mutex m_mutex;
  std::map<uint32_t, std::shared_ptr<EventQueue>> m_streams;
};

}  // namespace rag::server
