// Which generated text of a workflow run is the answer, as it arrives. The engine publishes the
// tokens of every generation node (RequestEvent::Tokens); only the answer belongs in an OpenAI
// stream's content, and a stream cannot take back what it sent. AnswerStream therefore sends
// tokens live only from a run that is certainly the answer's last write:
//   - a generation node that writes the answer variable and whose only edge leads, without a
//     condition, to END ("terminal answer node": the answer nodes of oneshot, hyde, multistep,
//     recomp);
//   - and whose run the engine started itself: a run adopted from a speculative generation
//     (Speculation for the node, then NodeStarted without a Rollback) streamed its first
//     tokens before it was adopted, and the engine does not publish those, so that run's text is
//     sent when the request finishes.
// Live text is trimmed as the engine trims a node's output (no leading white space; trailing
// white space waits for what follows it). Everything not sent live (irg's answer node, which loops, and adopted runs) is sent as one
// piece at Finished: the content of a stream always concatenates to the final answer (made valid
// UTF-8 by utf8_stream.h).
//
// Threading: one AnswerStream per request, used by one thread (the one writing the response).
#pragma once

#include <set>
#include <string>

#include "rag/request.h"
#include "rag/workflow.h"
#include "server/utf8_stream.h"

namespace rag::server {

class AnswerStream {
public:
  explicit AnswerStream(const WorkflowGraph& graph);

  // The content to send for this event (possibly empty). Finished: the rest of the answer.
  std::string onEvent(const RequestEvent& e);
  // False when the live tokens sent were not a prefix of the final answer (a broken engine
  // contract: the content sent then differs from the answer); reported, never expected.
  bool consistent() const { return m_consistent; }
  // Whether any content went out live, before Finished.
  bool streamedLive() const { return m_streamedLive; }

  // The generation nodes whose runs may stream live (see above).
  static std::set<std::string> terminalAnswerNodes(const WorkflowGraph& graph);

private:
  std::set<std::string> m_live;
  std::string m_speculated;  // the node a speculative run was started for, until adopted or rolled back
  bool m_currentLive = false;
  std::string m_sentRaw;     // the answer bytes sent so far
  std::string m_heldWhiteSpace;  // trailing white space of the live text, sent once text follows
  Utf8Assembler m_utf8;
  bool m_consistent = true;
  bool m_streamedLive = false;
};

}  // namespace rag::server
