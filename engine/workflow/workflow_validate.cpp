// WorkflowGraph::issues(): everything that would make a workflow fail or hang at run time,
// found before it runs, each naming the node or edge at fault.
//
// The graph analyses work on the edges that can be taken: those leaving a node up to and
// including its first unconditional edge (first-match semantics, rag/workflow.h).
#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rag/workflow.h"
#include "workflow/workflow_names.h"

namespace rag {

namespace {

using workflow::isNodeId;
using workflow::isVariableName;

const char* const kNameRule = " (letters, digits and '_', not starting with a digit)";

class Validator {
public:
  explicit Validator(const WorkflowGraph& g) : m_g(g) {}

  std::vector<WorkflowIssue> run() {
    checkGraph();
    checkNodes();
    checkEdges();
    buildAdjacency();
    if (m_g.edgesFrom(kStart).empty())
      add("", -1,
          "no edge leaves START, so no node ever runs; add one to the first node, e.g. "
          "{\"from\": \"START\", \"to\": \"<first node>\"}");
    checkReachable();
    checkLoops();
    checkPathsToEnd();
    checkVariables();
    return std::move(m_issues);
  }

private:
  const WorkflowGraph& m_g;
  std::vector<WorkflowIssue> m_issues;
  // Vertices: the nodes whose id is valid and first of its kind (by node index), then START
  // and END.
  std::map<std::string, int, std::less<>> m_vertexOf;
  std::vector<const WorkflowNode*> m_vertexNode;  // nullptr for START and END
  std::vector<size_t> m_nodeIndex;                // vertex -> index into nodes()
  int m_start = -1;
  int m_end = -1;
  struct Arc {
    int to;
    size_t edge;
  };
  std::vector<std::vector<Arc>> m_out;  // takeable edges between known vertices
  std::vector<bool> m_reachable;        // from START
  std::set<int> m_inReportedLoop;

  void add(std::string node, int64_t edge, std::string message) {
    m_issues.push_back({std::move(node), edge, std::move(message)});
  }

  std::string edgeLabel(size_t i) const {
    const WorkflowEdge& e = m_g.edges()[i];
    return "edge #" + std::to_string(i) + " (" + e.from + " -> " + e.to + ")";
  }

  int vertex(std::string_view id) const {
    auto it = m_vertexOf.find(id);
    return it == m_vertexOf.end() ? -1 : it->second;
  }

  const std::string& idOf(int v) const {
    static const std::string start(kStart), end(kEnd);
    if (v == m_start) return start;
    if (v == m_end) return end;
    return m_vertexNode[v]->id;
  }

  // ---- local checks ----------------------------------------------------------------------

  void checkGraph() {
    if (!isVariableName(m_g.answerVar()))
      add("", -1,
          "the answer variable '" + m_g.answerVar() + "' is not a variable name" + kNameRule +
              "; name the variable the last generation writes, e.g. answer");
    if (m_g.maxNodeRuns() < 1)
      add("", -1,
          "max_node_runs is " + std::to_string(m_g.maxNodeRuns()) +
              "; it must be >= 1 (how often one node may run in a request, e.g. 16)");
  }

  void checkNodes() {
    const std::vector<WorkflowNode>& nodes = m_g.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const WorkflowNode& n = nodes[i];
      const std::string at = "node '" + n.id + "'";
      if (n.id == kStart || n.id == kEnd) {
        add(n.id, -1,
            "node #" + std::to_string(i) + " is called '" + n.id +
                "', the name of a pseudo-node; give it another id");
      } else if (!isNodeId(n.id)) {
        add(n.id, -1,
            "node #" + std::to_string(i) + " has the id '" + n.id +
                "'; ids are non-empty and use letters, digits, '_', '-' and '.'");
      } else if (auto it = m_vertexOf.find(n.id); it != m_vertexOf.end()) {
        add(n.id, -1,
            "node id '" + n.id + "' is used twice (nodes #" +
                std::to_string(m_nodeIndex[it->second]) + " and #" + std::to_string(i) +
                "); give each node its own id");
      } else {
        m_vertexOf.emplace(n.id, static_cast<int>(m_vertexNode.size()));
        m_vertexNode.push_back(&n);
        m_nodeIndex.push_back(i);
      }
      if (!isVariableName(n.outputVar))
        add(n.id, -1,
            at + ": its output variable '" + n.outputVar + "' is not a variable name" + kNameRule);
      else if (n.outputVar == kQuestionVar)
        add(n.id, -1, at + " writes 'question', the request's input; give its output another name");
      if (n.kind == NodeKind::Generation)
        checkGeneration(n, at);
      else if (n.kind == NodeKind::Knowledge)
        checkKnowledge(n, at);
      else if (n.kind == NodeKind::Compression)
        checkCompression(n, at);
      else
        checkRetrieval(n, at);
    }
    m_start = static_cast<int>(m_vertexNode.size());
    m_end = m_start + 1;
    m_vertexNode.push_back(nullptr);
    m_vertexNode.push_back(nullptr);
  }

  // copy_from reads only variables the prompt shows the model (the answer copies what it read).
  void checkCopySource(const WorkflowNode& n, const std::string& at, const std::vector<std::string>& promptVars) {
    const std::string& from = n.generation.copyFrom;
    Result<std::vector<std::string>> names = copySourceVariables(from);
    if (!names) {
      add(n.id, -1, at + ": " + names.status().message() + "; name one of the prompt's variables or leave copy_from out");
      return;
    }
    for (const std::string& name : *names)
      if (std::find(promptVars.begin(), promptVars.end(), name) == promptVars.end())
        add(n.id, -1, at + ": copy_from names '" + name +
                          "', which its prompt does not use; name the prompt's variables (the text the answer "
                          "copies from, e.g. \"docs\" or \"{docs}{hop}\") or leave copy_from out");
  }

  void checkGeneration(const WorkflowNode& n, const std::string& at) {
    const GenerationOptions& o = n.generation;
    if (Result<std::vector<std::string>> vars = templateVariables(n.promptTemplate); !vars)
      add(n.id, -1, at + ": " + vars.status().message());
    else if (!o.copyFrom.empty())
      checkCopySource(n, at, *vars);
    if (!(o.copyFloor >= 0 && o.copyFloor <= 1))
      add(n.id, -1, at + ": copy_floor is " + std::to_string(o.copyFloor) +
                        "; it must be in [0, 1] (the share of the model's probability below which it stops copying)");
    if (o.maxTokens < 1)
      add(n.id, -1, at + ": max_tokens is " + std::to_string(o.maxTokens) + "; it must be >= 1");
    if (!std::isfinite(o.temperature) || o.temperature < 0)
      add(n.id, -1,
          at + ": temperature is " + std::to_string(o.temperature) +
              "; it must be a finite number >= 0 (0 is greedy)");
    for (size_t s = 0; s < o.stop.size(); ++s)
      if (o.stop[s].empty())
        add(n.id, -1, at + ": stop sequence #" + std::to_string(s) + " is empty; remove it");
  }

  // A retrieval or knowledge node's query: a variable's name or a template of variables.
  void checkQuery(const WorkflowNode& n, const std::string& at) {
    if (Result<std::vector<std::string>> vars = queryVariables(n.query); !vars) add(n.id, -1, at + ": " + vars.status().message());
  }

  void checkRetrieval(const WorkflowNode& n, const std::string& at) {
    if (n.topk < 1)
      add(n.id, -1,
          at + ": topk is " + std::to_string(n.topk) + "; it must be >= 1 (passages to retrieve)");
    checkQuery(n, at);
    if (n.retrieval.nprobe < 0)
      add(n.id, -1,
          at + ": nprobe is " + std::to_string(n.retrieval.nprobe) +
              "; it must be >= 0 (0 uses the engine's setting)");
  }

  void checkCompression(const WorkflowNode& n, const std::string& at) {
    if (n.topk < 1 || n.topk > 64)
      add(n.id, -1, at + ": sentences is " + std::to_string(n.topk) + "; it must be in [1, 64] (sentences to keep)");
    checkQuery(n, at);
    if (!isVariableName(n.compression.passages))
      add(n.id, -1,
          at + ": its passages variable '" + n.compression.passages + "' is not a variable name" + kNameRule +
              " (name a retrieval node's output, e.g. \"docs\")");
  }

  void checkKnowledge(const WorkflowNode& n, const std::string& at) {
    if (n.topk < 1 || n.topk > 64)
      add(n.id, -1, at + ": subgraphs is " + std::to_string(n.topk) + "; it must be in [1, 64] (entities to expand)");
    checkQuery(n, at);
    const KnowledgeOptions& o = n.knowledge;
    if (o.hops < 1 || o.hops > 4)
      add(n.id, -1, at + ": hops is " + std::to_string(o.hops) + "; it must be in [1, 4] (the subgraph's depth)");
    if (o.fanout < 1 || o.fanout > 256)
      add(n.id, -1, at + ": fanout is " + std::to_string(o.fanout) + "; it must be in [1, 256] (edges followed per entity)");
    if (o.paths < 1 || o.paths > 1000)
      add(n.id, -1, at + ": paths is " + std::to_string(o.paths) + "; it must be in [1, 1000] (paths kept per subgraph)");
  }

  void checkEdges() {
    const std::vector<WorkflowEdge>& edges = m_g.edges();
    std::map<std::string, size_t, std::less<>> firstAlways;  // from -> its first unconditional edge
    for (size_t i = 0; i < edges.size(); ++i) {
      const WorkflowEdge& e = edges[i];
      const std::string label = edgeLabel(i);
      const std::string node = e.from == kStart ? e.to : e.from;
      if (e.from == kEnd)
        add(e.from, i, label + " leaves END; END finishes the request, so nothing can follow it");
      else if (e.from != kStart && !m_g.findNode(e.from))
        add(e.from, i, label + " leaves '" + e.from + "', which is not a node; " + knownNodes());
      if (e.to == kStart)
        add(node, i, label + " enters START; START only has edges leaving it (to the entry node)");
      else if (e.to != kEnd && !m_g.findNode(e.to))
        add(e.to, i, label + " leads to '" + e.to + "', which is not a node; " + knownNodes());
      checkCondition(e, i, label);
      if (auto it = firstAlways.find(e.from); it != firstAlways.end())
        add(e.from, i,
            label + " can never be taken: " + edgeLabel(it->second) +
                " before it has no condition, and the first edge whose condition "
                "holds wins; move this edge above it or remove it");
      else if (e.when.kind == ConditionKind::Always)
        firstAlways.emplace(e.from, i);
    }
  }

  void checkCondition(const WorkflowEdge& e, size_t i, const std::string& label) {
    const EdgeCondition& c = e.when;
    switch (c.kind) {
      case ConditionKind::Always: return;
      case ConditionKind::Contains:
        if (c.text.empty())
          add(e.from, i,
              label +
                  ": its 'contains' condition has empty text, which every value "
                  "contains; give the text to look for");
        [[fallthrough]];
      case ConditionKind::Empty:
      case ConditionKind::NonEmpty:
        if (!isVariableName(c.var))
          add(e.from, i,
              label + ": its condition tests '" + c.var + "', which is not a variable name" +
                  kNameRule);
        return;
      case ConditionKind::RunsBelow:
        if (!m_g.findNode(c.node))
          add(e.from, i,
              label + ": its runs_below condition counts the runs of '" + c.node +
                  "', which is not a node; " + knownNodes());
        if (c.limit < 1)
          add(e.from, i,
              label + ": its runs_below limit is " + std::to_string(c.limit) +
                  ", so it never holds; use a limit >= 1");
        return;
    }
  }

  std::string knownNodes() const {
    std::string ids;
    for (const WorkflowNode& n : m_g.nodes()) ids += (ids.empty() ? "" : ", ") + n.id;
    return ids.empty() ? "the graph has no nodes yet" : "the nodes are: " + ids;
  }

  // ---- graph analyses --------------------------------------------------------------------

  void buildAdjacency() {
    m_out.assign(m_vertexNode.size(), {});
    std::set<int> closed;  // vertices whose unconditional edge has been seen
    const std::vector<WorkflowEdge>& edges = m_g.edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const WorkflowEdge& e = edges[i];
      int from = e.from == kStart ? m_start : vertex(e.from);
      int to = e.to == kEnd ? m_end : vertex(e.to);
      if (from < 0 || to < 0 || closed.count(from)) continue;
      m_out[from].push_back({to, i});
      if (e.when.kind == ConditionKind::Always) closed.insert(from);
    }
  }

  void checkReachable() {
    m_reachable.assign(m_vertexNode.size(), false);
    std::deque<int> queue{m_start};
    m_reachable[m_start] = true;
    while (!queue.empty()) {
      int u = queue.front();
      queue.pop_front();
      for (const Arc& a : m_out[u])
        if (!m_reachable[a.to]) {
          m_reachable[a.to] = true;
          queue.push_back(a.to);
        }
    }
    for (int v = 0; v < m_start; ++v)
      if (!m_reachable[v])
        add(idOf(v), -1,
            "node '" + idOf(v) +
                "' is unreachable: no path from START leads to it; "
                "add an edge to it or remove it");
  }

  // Loops are the strongly connected components (Tarjan) of the node vertices that contain a
  // cycle. A loop can end when one of its nodes has an edge leaving the loop such that the
  // choice among that node's edges up to it can change while the loop runs: some condition up
  // to and including that edge is runs_below on a loop node, or tests a variable a loop node
  // writes. Otherwise the first pass through the loop decides the same way forever.
  void checkLoops() {
    const int n = m_start;
    std::vector<int> index(n, -1), low(n, 0), component(n, -1);
    std::vector<bool> onStack(n, false);
    std::vector<int> stack;
    std::vector<std::vector<int>> components;
    int counter = 0;
    std::function<void(int)> strongConnect = [&](int v) {
      index[v] = low[v] = counter++;
      stack.push_back(v);
      onStack[v] = true;
      for (const Arc& a : m_out[v]) {
        if (a.to >= n) continue;  // END
        if (index[a.to] < 0) {
          strongConnect(a.to);
          low[v] = std::min(low[v], low[a.to]);
        } else if (onStack[a.to]) {
          low[v] = std::min(low[v], index[a.to]);
        }
      }
      if (low[v] != index[v]) return;
      std::vector<int> members;
      int w;
      do {
        w = stack.back();
        stack.pop_back();
        onStack[w] = false;
        component[w] = static_cast<int>(components.size());
        members.push_back(w);
      } while (w != v);
      std::sort(members.begin(), members.end());
      components.push_back(std::move(members));
    };
    for (int v = 0; v < n; ++v)
      if (index[v] < 0) strongConnect(v);

    std::sort(components.begin(), components.end());  // by the lowest node index
    for (const std::vector<int>& members : components) {
      bool cyclic = members.size() > 1;
      for (const Arc& a : m_out[members[0]]) cyclic = cyclic || a.to == members[0];
      if (!cyclic || loopCanEnd(members, component)) continue;
      std::string names;
      for (int v : members) {
        names += (names.empty() ? "" : ", ") + idOf(v);
        m_inReportedLoop.insert(v);
      }
      add(idOf(members[0]), -1,
          "the loop through " + names +
              " has no exit condition: no edge leaves it under a condition that can change while "
              "it runs; give one of its nodes an edge out of the loop after (or with) a condition "
              "on a variable a loop node writes or runs_below on a loop node, e.g. "
              "{\"from\": \"" +
              idOf(members.back()) + "\", \"to\": \"" + idOf(members[0]) +
              "\", \"when\": {\"kind\": \"runs_below\", \"node\": \"" + idOf(members.back()) +
              "\", \"limit\": 3}} followed by an edge out of the loop");
    }
  }

  bool loopCanEnd(const std::vector<int>& members, const std::vector<int>& component) const {
    const int self = component[members[0]];
    std::set<std::string, std::less<>> written;
    for (int v : members) written.insert(m_vertexNode[v]->outputVar);
    auto live = [&](const EdgeCondition& c) {
      switch (c.kind) {
        case ConditionKind::Always: return false;
        case ConditionKind::RunsBelow: {
          int v = vertex(c.node);
          return v >= 0 && v < m_start && component[v] == self;
        }
        default: return written.count(c.var) > 0;
      }
    };
    for (int v : members) {
      bool changes = false;
      for (const Arc& a : m_out[v]) {
        changes = changes || live(m_g.edges()[a.edge].when);
        bool leaves = a.to >= m_start || component[a.to] != self;
        if (leaves && changes) return true;
      }
    }
    return false;
  }

  void checkPathsToEnd() {
    std::vector<std::vector<int>> in(m_vertexNode.size());
    for (int u = 0; u < static_cast<int>(m_out.size()); ++u)
      for (const Arc& a : m_out[u]) in[a.to].push_back(u);
    std::vector<bool> reachesEnd(m_vertexNode.size(), false);
    std::deque<int> queue{m_end};
    reachesEnd[m_end] = true;
    while (!queue.empty()) {
      int v = queue.front();
      queue.pop_front();
      for (int u : in[v])
        if (!reachesEnd[u]) {
          reachesEnd[u] = true;
          queue.push_back(u);
        }
    }
    for (int v = 0; v < m_start; ++v)
      if (!reachesEnd[v] && !m_inReportedLoop.count(v))
        add(idOf(v), -1,
            "node '" + idOf(v) +
                "' has no path to END, so a request that runs it "
                "never finishes; add an edge from it (or from a node after it) to END");
  }

  // A path START -> ... -> target on which no node before target writes `var`, or empty when
  // every path to target passes a node that writes it.
  std::vector<int> pathWithout(const std::string& var, int target) const {
    std::vector<int> parent(m_vertexNode.size(), -2);
    std::deque<int> queue{m_start};
    parent[m_start] = -1;
    auto writes = [&](int v) { return v < m_start && m_vertexNode[v]->outputVar == var; };
    while (!queue.empty()) {
      int u = queue.front();
      queue.pop_front();
      for (const Arc& a : m_out[u]) {
        if (a.to == target) {
          std::vector<int> path{target};
          for (int p = u; p != -1; p = parent[p]) path.push_back(p);
          std::reverse(path.begin(), path.end());
          return path;
        }
        if (parent[a.to] != -2 || writes(a.to)) continue;
        parent[a.to] = u;
        queue.push_back(a.to);
      }
    }
    return {};
  }

  std::string pathText(const std::vector<int>& path) const {
    std::string s;
    for (int v : path) s += (s.empty() ? "" : " -> ") + idOf(v);
    return s;
  }

  std::string writersOf(const std::string& var) const {
    std::string s;
    for (int v = 0; v < m_start; ++v)
      if (m_vertexNode[v]->outputVar == var) s += (s.empty() ? "'" : ", '") + idOf(v) + "'";
    return s;
  }

  std::string writtenVariables() const {
    std::set<std::string> vars{std::string(kQuestionVar)};
    for (int v = 0; v < m_start; ++v) vars.insert(m_vertexNode[v]->outputVar);
    std::string s;
    for (const std::string& v : vars) s += (s.empty() ? "" : ", ") + v;
    return s;
  }

  // Is `var` set whenever `target` is reached? `what` says where target uses it.
  void requireSet(const std::string& var, int target, const std::string& owner, int64_t edge,
                  const std::string& what) {
    if (var == kQuestionVar || !isVariableName(var)) return;
    std::string writers = writersOf(var);
    if (writers.empty()) {
      add(owner, edge,
          what + " '" + var + "', but no node writes it (variables written: " + writtenVariables() +
              "); fix the name or add a node that writes it");
      return;
    }
    std::vector<int> path = pathWithout(var, target);
    if (!path.empty())
      add(owner, edge,
          what + " '" + var + "' before it is set: on the path " + pathText(path) +
              " no node writes it (it is written by " + writers + "); make every path to " +
              idOf(target) + " pass one of those first");
  }

  void checkVariables() {
    for (int v = 0; v < m_start; ++v) {
      if (!m_reachable[v]) continue;
      const WorkflowNode& n = *m_vertexNode[v];
      const std::string at = "node '" + n.id + "'";
      if (n.kind == NodeKind::Generation) {
        if (Result<std::vector<std::string>> vars = templateVariables(n.promptTemplate); vars)
          for (const std::string& var : *vars)
            requireSet(var, v, n.id, -1, at + ": its prompt uses the variable");
      } else if (Result<std::vector<std::string>> vars = queryVariables(n.query); vars) {
        for (const std::string& var : *vars) requireSet(var, v, n.id, -1, at + ": it queries with the variable");
      }
      if (n.kind == NodeKind::Compression)
        requireSet(n.compression.passages, v, n.id, -1, at + ": it compresses the variable");
      for (const Arc& a : m_out[v]) {
        const EdgeCondition& c = m_g.edges()[a.edge].when;
        bool testsVar = c.kind == ConditionKind::Empty || c.kind == ConditionKind::NonEmpty ||
                        c.kind == ConditionKind::Contains;
        if (testsVar && c.var != n.outputVar)
          requireSet(c.var, v, n.id, static_cast<int64_t>(a.edge),
                     edgeLabel(a.edge) + ": its condition tests the variable");
      }
    }
    for (const Arc& a : m_out[m_start]) {
      const EdgeCondition& c = m_g.edges()[a.edge].when;
      bool testsVar = c.kind == ConditionKind::Empty || c.kind == ConditionKind::NonEmpty ||
                      c.kind == ConditionKind::Contains;
      if (testsVar && c.var != kQuestionVar)
        add(idOf(a.to), static_cast<int64_t>(a.edge),
            edgeLabel(a.edge) + ": its condition tests '" + c.var +
                "', but only 'question' is set when a request starts");
    }
    if (m_reachable[m_end])
      requireSet(m_g.answerVar(), m_end, "", -1, "END returns the answer variable");
  }
};

}  // namespace

std::vector<WorkflowIssue> WorkflowGraph::issues() const { return Validator(*this).run(); }

Status WorkflowGraph::validate() const {
  std::vector<WorkflowIssue> found = issues();
  if (found.empty()) return Status::ok();
  std::string m = "workflow" + (m_name.empty() ? std::string() : " '" + m_name + "'") +
                  " is invalid: " + found.front().message;
  if (found.size() > 1)
    m += " (and " + std::to_string(found.size() - 1) + " more problem" +
         (found.size() > 2 ? "s" : "") + "; `ragraph workflow validate` lists them)";
  return Status::invalidArgument(m);
}

}  // namespace rag
