#include "sched/compression_executor.h"

#include <algorithm>

#include "retrieval/extractive_summary.h"

namespace rag::sched {

NodeOutput CompressionExecutor::compress(const WorkflowNode& node, const RequestInputs& inputs) {
  const std::string& var = node.compression.passages;
  // The retrieved passages when the variable still holds them; else its text, a passage a line.
  std::vector<std::string_view> passages;
  if (auto p = inputs.passages.find(var); p != inputs.passages.end()) {
    for (const model::PassageText& t : p->second) passages.push_back(t.text);
  } else if (auto v = inputs.vars.find(var); v != inputs.vars.end()) {
    passages = retrieval::passageLines(v->second);
  }
  std::string query = trimmedText(queryText(node.query, inputs.vars));
  if (query.empty())
    if (auto q = inputs.vars.find(kQuestionVar); q != inputs.vars.end()) query = q->second;
  retrieval::ExtractiveSummary summary = retrieval::extractiveSummary(query, passages, node.topk);
  NodeOutput out;
  out.text = std::move(summary.text);
  out.work = summary.scored;
  return out;
}

Status CompressionExecutor::start(const StageJob& job) {
  StageUpdate u;
  u.key = job.key;
  u.final = true;
  u.output = compress(*job.node, *job.inputs);
  m_done.push_back(std::move(u));
  m_wake();
  return Status::ok();
}

void CompressionExecutor::cancel(JobKey key) {
  std::erase_if(m_done, [key](const StageUpdate& u) { return u.key == key; });
}

void CompressionExecutor::collect(std::vector<StageUpdate>& out) {
  for (StageUpdate& u : m_done) out.push_back(std::move(u));
  m_done.clear();
}

bool CompressionExecutor::reads(const WorkflowNode& node, std::string_view var) const {
  if (var == node.compression.passages) return true;
  Result<std::vector<std::string>> vars = queryVariables(node.query);
  return vars && std::find(vars->begin(), vars->end(), var) != vars->end();
}

}  // namespace rag::sched
