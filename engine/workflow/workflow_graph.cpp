// WorkflowGraph: builders, conditions and the choice of the next node.
#include <string>

#include "rag/workflow.h"

namespace rag {

std::string_view workflowName(Workflow w) {
  switch (w) {
    case Workflow::OneShot: return "oneshot";
    case Workflow::Hyde: return "hyde";
    case Workflow::Multistep: return "multistep";
    case Workflow::Irg: return "irg";
    case Workflow::Recomp: return "recomp";
    case Workflow::GraphRag: return "graphrag";
  }
  return "unknown";
}

std::optional<Workflow> workflowFromName(std::string_view name) {
  for (Workflow w : kAllWorkflows)
    if (workflowName(w) == name) return w;
  return std::nullopt;
}

std::string_view nodeKindName(NodeKind k) {
  switch (k) {
    case NodeKind::Generation: return "generation";
    case NodeKind::Retrieval: return "retrieval";
    case NodeKind::Knowledge: return "knowledge";
    case NodeKind::Compression: return "compression";
  }
  return "unknown";
}

std::optional<NodeKind> nodeKindFromName(std::string_view name) {
  for (NodeKind k : kAllNodeKinds)
    if (nodeKindName(k) == name) return k;
  return std::nullopt;
}

std::string_view nodeWorkUnit(NodeKind k) {
  switch (k) {
    case NodeKind::Generation: return "tokens";
    case NodeKind::Retrieval: return "clusters";
    case NodeKind::Knowledge: return "paths";
    case NodeKind::Compression: return "sentences";
  }
  return "work";
}

std::string_view retrievalMethodName(RetrievalMethod m) {
  switch (m) {
    case RetrievalMethod::Dense: return "dense";
    case RetrievalMethod::Bm25: return "bm25";
    case RetrievalMethod::Hybrid: return "hybrid";
  }
  return "dense";
}

std::optional<RetrievalMethod> retrievalMethodFromName(std::string_view name) {
  for (RetrievalMethod m : {RetrievalMethod::Dense, RetrievalMethod::Bm25, RetrievalMethod::Hybrid})
    if (retrievalMethodName(m) == name) return m;
  return std::nullopt;
}

std::string_view retrievalRerankName(RetrievalRerank r) { return r == RetrievalRerank::Bm25 ? "bm25" : "none"; }

std::optional<RetrievalRerank> retrievalRerankFromName(std::string_view name) {
  for (RetrievalRerank r : {RetrievalRerank::None, RetrievalRerank::Bm25})
    if (retrievalRerankName(r) == name) return r;
  return std::nullopt;
}

void WorkflowGraph::setRetrievalMethod(RetrievalMethod m) {
  for (WorkflowNode& n : m_nodes)
    if (n.kind == NodeKind::Retrieval) n.retrieval.method = m;
}

void WorkflowGraph::setRetrievalRerank(RetrievalRerank r) {
  for (WorkflowNode& n : m_nodes)
    if (n.kind == NodeKind::Retrieval) n.retrieval.rerank = r;
}

std::string_view conditionKindName(ConditionKind k) {
  switch (k) {
    case ConditionKind::Always: return "always";
    case ConditionKind::Empty: return "empty";
    case ConditionKind::NonEmpty: return "non_empty";
    case ConditionKind::Contains: return "contains";
    case ConditionKind::RunsBelow: return "runs_below";
  }
  return "unknown";
}

EdgeCondition EdgeCondition::empty(std::string var) {
  EdgeCondition c;
  c.kind = ConditionKind::Empty;
  c.var = std::move(var);
  return c;
}

EdgeCondition EdgeCondition::nonEmpty(std::string var) {
  EdgeCondition c;
  c.kind = ConditionKind::NonEmpty;
  c.var = std::move(var);
  return c;
}

EdgeCondition EdgeCondition::contains(std::string var, std::string text) {
  EdgeCondition c;
  c.kind = ConditionKind::Contains;
  c.var = std::move(var);
  c.text = std::move(text);
  return c;
}

EdgeCondition EdgeCondition::runsBelow(std::string node, int64_t limit) {
  EdgeCondition c;
  c.kind = ConditionKind::RunsBelow;
  c.node = std::move(node);
  c.limit = limit;
  return c;
}

std::string describeCondition(const EdgeCondition& c) {
  switch (c.kind) {
    case ConditionKind::Always: return "always";
    case ConditionKind::Empty: return "if " + c.var + " is empty";
    case ConditionKind::NonEmpty: return "if " + c.var + " is not empty";
    case ConditionKind::Contains: return "if " + c.var + " contains \"" + c.text + "\"";
    case ConditionKind::RunsBelow:
      return "while " + c.node + " ran < " + std::to_string(c.limit) + " times";
  }
  return "unknown condition";
}

namespace {

bool isBlank(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') return false;
  return true;
}

int64_t runsOf(const RunCounts& runs, std::string_view node) {
  auto it = runs.find(node);
  return it == runs.end() ? 0 : it->second;
}

}  // namespace

bool evaluateCondition(const EdgeCondition& c, const Variables& vars, const RunCounts& runs) {
  auto var = vars.find(c.var);
  switch (c.kind) {
    case ConditionKind::Always: return true;
    case ConditionKind::Empty: return var == vars.end() || isBlank(var->second);
    case ConditionKind::NonEmpty: return var != vars.end() && !isBlank(var->second);
    case ConditionKind::Contains:
      return var != vars.end() && var->second.find(c.text) != std::string::npos;
    case ConditionKind::RunsBelow: return runsOf(runs, c.node) < c.limit;
  }
  return false;
}

WorkflowGraph::WorkflowGraph(std::string name, std::string description)
    : m_name(std::move(name)), m_description(std::move(description)) {}

WorkflowGraph& WorkflowGraph::addGeneration(std::string id, std::string promptTemplate,
                                            std::string outputVar, GenerationOptions options) {
  WorkflowNode n;
  n.id = std::move(id);
  n.kind = NodeKind::Generation;
  n.promptTemplate = std::move(promptTemplate);
  n.outputVar = std::move(outputVar);
  n.generation = std::move(options);
  m_nodes.push_back(std::move(n));
  return *this;
}

WorkflowGraph& WorkflowGraph::addRetrieval(std::string id, int64_t topk, std::string query,
                                           std::string outputVar, RetrievalOptions options) {
  WorkflowNode n;
  n.id = std::move(id);
  n.kind = NodeKind::Retrieval;
  n.topk = topk;
  n.query = std::move(query);
  n.outputVar = std::move(outputVar);
  n.retrieval = options;
  m_nodes.push_back(std::move(n));
  return *this;
}

WorkflowGraph& WorkflowGraph::addKnowledge(std::string id, int64_t subgraphs, std::string query,
                                           std::string outputVar, KnowledgeOptions options) {
  WorkflowNode n;
  n.id = std::move(id);
  n.kind = NodeKind::Knowledge;
  n.topk = subgraphs;
  n.query = std::move(query);
  n.outputVar = std::move(outputVar);
  n.knowledge = options;
  m_nodes.push_back(std::move(n));
  return *this;
}

WorkflowGraph& WorkflowGraph::addNode(WorkflowNode node) {
  m_nodes.push_back(std::move(node));
  return *this;
}

WorkflowGraph& WorkflowGraph::addCompression(std::string id, std::string passages, int64_t sentences,
                                             std::string query, std::string outputVar) {
  WorkflowNode n;
  n.id = std::move(id);
  n.kind = NodeKind::Compression;
  n.topk = sentences;
  n.query = std::move(query);
  n.outputVar = std::move(outputVar);
  n.compression.passages = std::move(passages);
  m_nodes.push_back(std::move(n));
  return *this;
}

WorkflowGraph& WorkflowGraph::addEdge(std::string from, std::string to, EdgeCondition when) {
  m_edges.push_back({std::move(from), std::move(to), std::move(when)});
  return *this;
}

const WorkflowNode* WorkflowGraph::findNode(std::string_view id) const {
  for (const WorkflowNode& n : m_nodes)
    if (n.id == id) return &n;
  return nullptr;
}

std::vector<size_t> WorkflowGraph::edgesFrom(std::string_view id) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < m_edges.size(); ++i)
    if (m_edges[i].from == id) out.push_back(i);
  return out;
}

Result<std::string> WorkflowGraph::readySuccessor(std::string_view finished, const Variables& vars,
                                                  const RunCounts& runs) const {
  if (finished != kStart && !findNode(finished))
    return Status::invalidArgument("workflow '" + m_name + "' has no node '" +
                                   std::string(finished) + "'");
  std::vector<size_t> out = edgesFrom(finished);
  for (size_t i : out) {
    const WorkflowEdge& e = m_edges[i];
    if (!evaluateCondition(e.when, vars, runs)) continue;
    if (e.to != kEnd && runsOf(runs, e.to) >= m_maxNodeRuns)
      return Status::invalidArgument(
          "workflow '" + m_name + "': node '" + e.to + "' has already run " +
          std::to_string(m_maxNodeRuns) +
          " times (max_node_runs), so the loop through it is not ending; check the exit "
          "condition of its loop or raise max_node_runs");
    return e.to;
  }
  std::string tried;
  for (size_t i : out)
    tried += (tried.empty() ? "" : "; ") + m_edges[i].to + " " + describeCondition(m_edges[i].when);
  return Status::invalidArgument(
      "workflow '" + m_name + "': none of the " + std::to_string(out.size()) + " edges leaving '" +
      std::string(finished) + "' matched (" + (tried.empty() ? std::string("it has none") : tried) +
      "); add an unconditional edge as its last");
}

}  // namespace rag
