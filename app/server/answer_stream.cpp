#include "server/answer_stream.h"

namespace rag::server {

namespace {
constexpr std::string_view kWhiteSpace = " \t\r\n";
}  // namespace

std::set<std::string> AnswerStream::terminalAnswerNodes(const WorkflowGraph& graph) {
  std::set<std::string> out;
  for (const WorkflowNode& n : graph.nodes()) {
    if (n.kind != NodeKind::Generation || n.outputVar != graph.answerVar()) continue;
    const std::vector<size_t> edges = graph.edgesFrom(n.id);
    if (edges.size() != 1) continue;
    const WorkflowEdge& e = graph.edges()[edges.front()];
    if (e.to == kEnd && e.when.kind == ConditionKind::Always) out.insert(n.id);
  }
  return out;
}

AnswerStream::AnswerStream(const WorkflowGraph& graph) : m_live(terminalAnswerNodes(graph)) {}

std::string AnswerStream::onEvent(const RequestEvent& e) {
  using K = RequestEvent::Kind;
  switch (e.kind) {
    case K::Speculation:
      m_speculated = e.text;  // the node the speculative run is for
      return {};
    case K::Rollback:
      m_speculated.clear();
      return {};
    case K::NodeStarted:
      m_currentLive = m_live.count(e.node) > 0 && m_speculated != e.node;
      m_speculated.clear();
      return {};
    case K::Tokens: {
      if (!m_currentLive || e.text.empty()) return {};
      // The engine's answer is the node's text without leading and trailing white space
      // (sched/stage_executor.h trimmedText): drop the leading run and hold back a trailing
      // one until something follows it.
      std::string_view text = e.text;
      if (m_sentRaw.empty()) {
        const size_t b = text.find_first_not_of(kWhiteSpace);
        if (b == std::string_view::npos) return {};
        text.remove_prefix(b);
      }
      std::string piece = std::move(m_heldWhiteSpace);
      m_heldWhiteSpace.clear();
      piece.append(text);
      const size_t end = piece.find_last_not_of(kWhiteSpace);  // npos (+1 = 0) when all white space
      m_heldWhiteSpace = piece.substr(end + 1);
      piece.resize(end + 1);
      m_sentRaw += piece;
      std::string out = m_utf8.push(piece);
      if (!out.empty()) m_streamedLive = true;
      return out;
    }
    case K::NodeFinished:
      m_currentLive = false;
      return {};
    case K::Finished: {
      const std::string& answer = e.text;
      std::string out;
      if (answer.compare(0, m_sentRaw.size(), m_sentRaw) == 0 && answer.size() >= m_sentRaw.size()) {
        out = m_utf8.push(std::string_view(answer).substr(m_sentRaw.size()));
      } else {
        m_consistent = false;
      }
      m_sentRaw = answer;
      return out + m_utf8.flush();
    }
    case K::Submitted:
    case K::Failed:
      return {};
  }
  return {};
}

}  // namespace rag::server
