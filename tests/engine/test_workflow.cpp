// RAGraph workflow graphs: builders, JSON round trip and errors, validation, templates,
// conditions, the choice of the next node, and the five built-in workflows.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "rag/workflow.h"
#include "retrieval/extractive_summary.h"
#include "status_checks.h"

using namespace rag;
namespace fs = std::filesystem;

namespace {

// The issues found for `node` whose message contains every part.
bool hasIssue(const WorkflowGraph& g, std::string_view node,
              std::initializer_list<std::string_view> parts) {
  std::vector<WorkflowIssue> issues = g.issues();
  for (const WorkflowIssue& i : issues) {
    if (i.node != node) continue;
    bool all = true;
    for (std::string_view p : parts) all = all && i.message.find(p) != std::string::npos;
    if (all) return true;
  }
  for (const WorkflowIssue& i : issues)
    qWarning("issue [%s] %s", i.node.c_str(), i.message.c_str());
  qWarning("no issue for node '%s' with the expected text", std::string(node).c_str());
  return false;
}

// A valid graph, START -> retrieve -> answer -> END, to break in the validation tests:
// `firstEdges` are added before its own edges (so they are checked first).
WorkflowGraph oneShot(const std::string& query = "question",
                      const std::vector<WorkflowEdge>& firstEdges = {}) {
  WorkflowGraph g("t");
  g.addRetrieval("retrieve", 3, query, "docs");
  g.addGeneration("answer", "{docs}Question: {question}\nAnswer:", "answer");
  for (const WorkflowEdge& e : firstEdges) g.addEdge(e.from, e.to, e.when);
  g.addEdge(std::string(kStart), "retrieve");
  g.addEdge("retrieve", "answer");
  g.addEdge("answer", std::string(kEnd));
  return g;
}

// START -> `first` (retrieves for the question) -> think (writes the answer), then think's
// own edges, in order: the shape of the loop tests.
WorkflowGraph retrieveThenThink(const std::string& first,
                                const std::vector<WorkflowEdge>& thinkEdges) {
  WorkflowGraph g("t");
  g.addRetrieval(first, 2, "question", "docs");
  g.addGeneration("think", "{docs}", "answer");
  g.addEdge(std::string(kStart), first);
  g.addEdge(first, "think");
  for (const WorkflowEdge& e : thinkEdges) g.addEdge(e.from, e.to, e.when);
  return g;
}

// A graph using every node kind, option and condition kind.
WorkflowGraph everything() {
  WorkflowGraph g("everything", "all kinds \"quoted\", tab\t, unicode \xc3\xa9\xe2\x82\xac");
  g.setAnswerVar("final");
  g.setMaxNodeRuns(7);
  g.addGeneration("draft", "Draft {{literal}} for {question}", "draft",
                  {.maxTokens = 12, .temperature = 0.1234567890123, .stop = {"\n", "END\"", "\\"}});
  g.addRetrieval("search", 4, "draft", "docs",
                 {.method = RetrievalMethod::Hybrid, .nprobe = 256, .rerank = RetrievalRerank::Bm25});
  g.addGeneration("final", "{draft}\nQ: {question}\nA:", "final",
                  {.maxTokens = 1, .temperature = 0.7, .stop = {}, .copyFrom = "draft"});
  g.addEdge(std::string(kStart), "draft");
  g.addEdge("draft", "final", EdgeCondition::empty("draft"));
  g.addEdge("draft", "search", EdgeCondition::nonEmpty("draft"));
  g.addEdge("search", "final", EdgeCondition::contains("docs", "needle"));
  g.addEdge("search", "draft", EdgeCondition::runsBelow("search", 2));
  g.addEdge("search", "final");
  g.addEdge("final", std::string(kEnd));
  return g;
}

std::string readText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a graph the way the scheduler will: START, then readySuccessor after each node, with
// fake generation and retrieval. Returns the nodes run, in order; `vars` ends with every
// variable.
struct FakeRun {
  std::vector<std::string> order;
  Variables vars;
  Status status;
};
FakeRun simulate(
    const WorkflowGraph& g, const std::string& question,
    const std::function<std::string(const WorkflowNode&, const std::string&)>& generate) {
  FakeRun run;
  run.vars[std::string(kQuestionVar)] = question;
  RunCounts runs;
  std::string at(kStart);
  for (int step = 0; step < 100; ++step) {
    Result<std::string> next = g.readySuccessor(at, run.vars, runs);
    if (!next) {
      run.status = next.status();
      return run;
    }
    if (*next == kEnd) return run;
    const WorkflowNode* n = g.findNode(*next);
    if (!n) {
      run.status = Status::internal("no node " + *next);
      return run;
    }
    std::string out;
    if (n->kind == NodeKind::Generation) {
      Result<std::string> prompt = renderTemplate(n->promptTemplate, run.vars);
      if (!prompt) {
        run.status = prompt.status();
        return run;
      }
      out = generate(*n, *prompt);
    } else if (n->kind == NodeKind::Compression) {
      out = retrieval::extractiveSummary(queryText(n->query, run.vars),
                                         retrieval::passageLines(run.vars[n->compression.passages]), n->topk)
                .text;
    } else {
      std::string query;  // the parts of a query searched as one, as written
      for (const std::string& part : queryTexts(n->query, run.vars)) query += (query.empty() ? "" : " | ") + part;
      out = "passage for [" + query + "]\n";
    }
    run.vars[n->outputVar] = out;
    runs[n->id]++;
    run.order.push_back(n->id);
    at = n->id;
  }
  run.status = Status::internal("simulation did not end");
  return run;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

}  // namespace

class TestWorkflow : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // ---- builders ------------------------------------------------------------------------

  void buildersRecordEveryKind() {
    WorkflowGraph g = everything();
    QCOMPARE(g.name(), std::string("everything"));
    QCOMPARE(g.answerVar(), std::string("final"));
    QCOMPARE(g.maxNodeRuns(), int64_t{7});
    QCOMPARE(g.nodes().size(), size_t{3});
    const WorkflowNode* draft = g.findNode("draft");
    QVERIFY(draft);
    QCOMPARE(draft->kind, NodeKind::Generation);
    QCOMPARE(draft->outputVar, std::string("draft"));
    QCOMPARE(draft->generation.maxTokens, int64_t{12});
    QCOMPARE(draft->generation.stop.size(), size_t{3});
    const WorkflowNode* search = g.findNode("search");
    QVERIFY(search);
    QCOMPARE(search->kind, NodeKind::Retrieval);
    QCOMPARE(search->topk, int64_t{4});
    QCOMPARE(search->query, std::string("draft"));
    QCOMPARE(search->retrieval.nprobe, int64_t{256});
    QVERIFY(!g.findNode("nope"));
    // Edges leaving a node keep the order they were added in.
    std::vector<size_t> out = g.edgesFrom("search");
    QCOMPARE(out.size(), size_t{3});
    QCOMPARE(g.edges()[out[0]].when.kind, ConditionKind::Contains);
    QCOMPARE(g.edges()[out[1]].when.kind, ConditionKind::RunsBelow);
    QCOMPARE(g.edges()[out[1]].when.limit, int64_t{2});
    QCOMPARE(g.edges()[out[2]].when.kind, ConditionKind::Always);
    QCOMPARE(g.edgesFrom(kStart).size(), size_t{1});
    QVERIFY2(g.validate().isOk(), g.validate().message().c_str());
  }

  // ---- JSON ----------------------------------------------------------------------------

  void jsonRoundTripIsExact() {
    for (const WorkflowGraph& g : {everything(), oneShot(), WorkflowGraph()}) {
      std::string json = g.toJson();
      Result<WorkflowGraph> back = WorkflowGraph::fromJson(json);
      QVERIFY2(back.isOk(), back.status().message().c_str());
      QVERIFY(*back == g);
      QCOMPARE(back->toJson(), json);
    }
    // The double survives to the last bit, not just 10 digits.
    Result<WorkflowGraph> back = WorkflowGraph::fromJson(everything().toJson());
    QVERIFY(back.isOk());
    QCOMPARE(back->findNode("draft")->generation.temperature, 0.1234567890123);
    // -0 reads back as 0, so it is written as 0 and the text is stable.
    WorkflowGraph negativeZero = oneShot();
    negativeZero.addGeneration("x", "{question}", "x", {.temperature = -0.0, .stop = {}});
    Result<WorkflowGraph> nz = WorkflowGraph::fromJson(negativeZero.toJson());
    QVERIFY(nz.isOk());
    QCOMPARE(nz->toJson(), negativeZero.toJson());
    // An unconditional edge is written without "when"; a conditional one with it.
    std::string json = oneShot().toJson();
    QVERIFY(json.find("\"when\"") == std::string::npos);
    QVERIFY(everything().toJson().find("\"kind\": \"runs_below\"") != std::string::npos);
    // A rerank is written only when a node has one, so files without it stay as they were.
    QVERIFY(everything().toJson().find("\"rerank\": \"bm25\"") != std::string::npos);
    QVERIFY(json.find("\"rerank\"") == std::string::npos);
  }

  void jsonOptionalKeysTakeDefaults() {
    Result<WorkflowGraph> g = WorkflowGraph::fromJson(R"({
      "format": "ragraph-workflow", "version": 1,
      "nodes": [{"id": "r", "kind": "retrieval", "query": "question", "output": "docs", "topk": 2},
                {"id": "a", "kind": "generation", "prompt": "{docs}", "output": "answer"}],
      "edges": [{"from": "START", "to": "r"}, {"from": "r", "to": "a", "when": {"kind": "always"}},
                {"from": "a", "to": "END"}]})");
    QVERIFY2(g.isOk(), g.status().message().c_str());
    QCOMPARE(g->answerVar(), std::string("answer"));
    QCOMPARE(g->maxNodeRuns(), WorkflowGraph().maxNodeRuns());
    QCOMPARE(g->findNode("a")->generation, GenerationOptions{});
    QCOMPARE(g->findNode("r")->retrieval.nprobe, int64_t{0});
    QCOMPARE(g->findNode("r")->retrieval.method, RetrievalMethod::Hybrid);  // chosen by measurement (RetrievalOptions)
    QCOMPARE(g->findNode("r")->retrieval.rerank, RetrievalRerank::None);
    QCOMPARE(g->edges()[1].when, EdgeCondition::always());
    QVERIFY(g->validate().isOk());
  }

  void badJsonNamesThePath() {
    const std::string head = R"({"format": "ragraph-workflow", "version": 1, )";
    const std::string nodes =
        R"("nodes": [{"id": "r", "kind": "retrieval", "query": "question", "output": "docs", "topk": 2}], )";
    struct Case {
      std::string json;
      std::vector<std::string_view> parts;
    };
    const std::vector<Case> cases = {
        {"{\"format\": ", {"line 1", "fix the syntax"}},
        {"[1, 2]", {"at $:", "expected an object", "got an array"}},
        {R"({"version": 1, "nodes": [], "edges": []})",
         {"$.format", "missing", "ragraph-workflow"}},
        {R"({"format": "other", "version": 1})", {"$.format", "\"other\"", "ragraph-workflow"}},
        {R"({"format": "ragraph-workflow", "version": 2, "future": 1})",
         {"$.version", "version 2", "newer", "update ragraph"}},
        {R"({"format": "ragraph-workflow", "version": "1"})",
         {"$.version", "expected an integer", "string"}},
        {R"({"format": "ragraph-workflow", "version": 0, "nodes": [], "edges": []})",
         {"$.version", "use 1"}},
        {head + R"("nodez": [], "nodes": [], "edges": []})", {"$.nodez", "unknown key", "nodes"}},
        {head + R"("edges": []})", {"$.nodes", "missing"}},
        {head + R"("nodes": {}, "edges": []})", {"$.nodes", "expected an array", "object"}},
        {head +
             R"("nodes": [{"id": "r", "kind": "retrieval", "query": "q", "output": "d", "topk": "5"}], "edges": []})",
         {"$.nodes[0].topk", "expected an integer", "\"5\""}},
        {head +
             R"("nodes": [{"id": "r", "kind": "retrieval", "query": "q", "output": "d", "topk": 2.5}], "edges": []})",
         {"$.nodes[0].topk", "expected an integer", "2.5"}},
        {head +
             R"("nodes": [{"id": "r", "kind": "retrieval", "query": "q", "output": "d", "topk": 2, "method": "sparse"}], "edges": []})",
         {"$.nodes[0].method", "\"sparse\"", "dense", "bm25", "hybrid"}},
        {head +
             R"("nodes": [{"id": "r", "kind": "retrieval", "query": "q", "output": "d", "topk": 2, "rerank": "cross"}], "edges": []})",
         {"$.nodes[0].rerank", "\"cross\"", "none", "bm25"}},
        {head + nodes.substr(0, nodes.size() - 3) +
             R"(, {"id": "g", "kind": "generation", "prompt": "p", "output": "o", "topK": 1}], "edges": []})",
         {"$.nodes[1].topK", "unknown key", "generation node", "max_tokens"}},
        {head +
             R"("nodes": [{"id": "g", "kind": "generation", "prompt": "p", "output": "o", "stop": ["\n", 3]}], "edges": []})",
         {"$.nodes[0].stop[1]", "expected a string", "number 3"}},
        {head + R"("nodes": [{"id": "g", "kind": "generation", "prompt": "p"}], "edges": []})",
         {"$.nodes[0].output", "missing"}},
        {head + R"("nodes": [{"id": "g", "kind": "ranker"}], "edges": []})",
         {"$.nodes[0].kind", "ranker", "generation", "retrieval"}},
        {head +
             R"("nodes": [{"id": "g", "id": "h", "kind": "generation", "prompt": "p", "output": "o"}], "edges": []})",
         {"$.nodes[0].id", "twice"}},
        {head + nodes +
             R"("edges": [{"from": "START", "to": "r"}, {"from": "r", "to": "END", "when": {"kind": "sometimes"}}]})",
         {"$.edges[1].when.kind", "sometimes", "runs_below"}},
        {head + nodes +
             R"("edges": [{"from": "r", "to": "END", "when": {"kind": "runs_below", "node": "r", "limit": "3"}}]})",
         {"$.edges[0].when.limit", "expected an integer"}},
        {head + nodes +
             R"("edges": [{"from": "r", "to": "END", "when": {"kind": "contains", "var": "docs"}}]})",
         {"$.edges[0].when.text", "missing"}},
        {head + nodes +
             R"("edges": [{"from": "r", "to": "END", "when": {"kind": "empty", "var": "docs", "text": "x"}}]})",
         {"$.edges[0].when.text", "unknown key", "'empty' condition"}},
        {head + nodes + R"("edges": [{"from": "r", "to": "END", "if": {}}]})",
         {"$.edges[0].if", "unknown key", "when"}},
        {head + nodes + R"("edges": [{"from": 1, "to": "END"}]})",
         {"$.edges[0].from", "expected a string"}},
        {head + R"("nodes": [], "edges": [], "max_node_runs": true})",
         {"$.max_node_runs", "expected an integer", "true"}},
    };
    for (const Case& c : cases) {
      Result<WorkflowGraph> g = WorkflowGraph::fromJson(c.json);
      QVERIFY2(!g.isOk(), c.json.c_str());
      QCOMPARE(g.status().code(), StatusCode::InvalidArgument);
      for (std::string_view p : c.parts)
        QVERIFY2(g.status().message().find(p) != std::string::npos,
                 (g.status().message() + "  [lacks: " + std::string(p) + "]").c_str());
    }
  }

  void loadAndSave() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const fs::path path = fs::path(dir.path().toStdString()) / "sub" / "g.json";
    WorkflowGraph g = everything();
    QVERIFY(g.save(path).isOk());
    QCOMPARE(readText(path), g.toJson());
    size_t files = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(path.parent_path())) ++files;
    QCOMPARE(files, size_t{1});  // no temp file left behind
    Result<WorkflowGraph> back = WorkflowGraph::load(path);
    QVERIFY2(back.isOk(), back.status().message().c_str());
    QVERIFY(*back == g);

    Result<WorkflowGraph> missing = WorkflowGraph::load(path.parent_path() / "missing.json");
    QVERIFY(!missing.isOk());
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(missing.status(), {"missing.json"}));

    std::ofstream(path)
        << R"({"format": "ragraph-workflow", "version": 1, "nodes": [], "edges": [], "colour": 1})";
    Result<WorkflowGraph> bad = WorkflowGraph::load(path);
    QVERIFY(!bad.isOk());
    QVERIFY(mentions(bad.status(), {path.string(), "$.colour", "unknown key"}));
  }

  // ---- validation ----------------------------------------------------------------------

  void validGraphsHaveNoIssues() {
    QVERIFY(oneShot().issues().empty());
    QVERIFY(oneShot().validate().isOk());
  }

  void duplicateIds() {
    WorkflowGraph g = oneShot();
    g.addGeneration("answer", "{question}", "other");
    QVERIFY(hasIssue(g, "answer", {"'answer' is used twice", "#1", "#2"}));
    Status s = g.validate();
    QVERIFY(!s.isOk());
    QCOMPARE(s.code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s, {"workflow 't' is invalid", "answer"}));
  }

  void badIdsAndReservedNames() {
    WorkflowGraph g = oneShot();
    g.addGeneration("END", "{question}", "x");
    g.addGeneration("two words", "{question}", "y");
    g.addGeneration("z", "{question}", "question");
    QVERIFY(hasIssue(g, "END", {"pseudo-node"}));
    QVERIFY(hasIssue(g, "two words", {"letters, digits"}));
    QVERIFY(hasIssue(g, "z", {"writes 'question'"}));
  }

  void edgesToAndFromUnknownNodes() {
    WorkflowGraph g = oneShot();
    g.addEdge("retrieve", "anwser", EdgeCondition::empty("docs"));
    QVERIFY(hasIssue(g, "anwser", {"edge #3", "retrieve -> anwser", "not a node", "answer"}));
    WorkflowGraph h = oneShot();
    h.addEdge("ghost", "answer");
    QVERIFY(hasIssue(h, "ghost", {"edge #3", "leaves 'ghost'", "not a node"}));
    WorkflowGraph k = oneShot();
    k.addEdge(std::string(kEnd), "answer");
    k.addEdge("answer", std::string(kStart));
    QVERIFY(hasIssue(k, std::string(kEnd), {"leaves END"}));
    QVERIFY(hasIssue(k, "answer", {"enters START"}));
  }

  void noEntry() {
    WorkflowGraph g("t");
    g.addGeneration("answer", "{question}", "answer");
    g.addEdge("answer", std::string(kEnd));
    QVERIFY(hasIssue(g, "", {"no edge leaves START"}));
    QVERIFY(hasIssue(g, "answer", {"unreachable"}));
  }

  void unreachableNode() {
    WorkflowGraph g = oneShot();
    g.addGeneration("orphan", "{question}", "x");
    g.addEdge("orphan", std::string(kEnd));
    QVERIFY(hasIssue(g, "orphan", {"'orphan' is unreachable", "no path from START"}));
    QCOMPARE(g.issues().size(), size_t{1});
  }

  void noPathToEnd() {
    WorkflowGraph g("t");
    g.addGeneration("a", "{question}", "answer");
    g.addGeneration("dead", "{question}", "x");
    g.addEdge(std::string(kStart), "a");
    g.addEdge("a", "dead", EdgeCondition::contains("answer", "?"));
    g.addEdge("a", std::string(kEnd));
    QVERIFY(hasIssue(g, "dead", {"'dead' has no path to END"}));
    QCOMPARE(g.issues().size(), size_t{1});
  }

  void shadowedEdge() {
    WorkflowGraph g = oneShot();
    g.addEdge("retrieve", std::string(kEnd), EdgeCondition::empty("docs"));
    QVERIFY(hasIssue(g, "retrieve", {"edge #3", "can never be taken", "edge #1"}));
  }

  void loopWithoutExitIsRejected() {
    const std::string end(kEnd);
    // retrieve -> think -> retrieve, unconditionally: nothing can end it.
    WorkflowGraph g = retrieveThenThink("retrieve", {{"think", "retrieve", {}}});
    QVERIFY(hasIssue(g, "retrieve", {"loop through retrieve, think", "no exit condition"}));
    QVERIFY(!g.validate().isOk());

    // An exit whose condition cannot change inside the loop (the question never changes) is no
    // exit either.
    WorkflowGraph h = retrieveThenThink(
        "retrieve",
        {{"think", end, EdgeCondition::contains("question", "stop")}, {"think", "retrieve", {}}});
    QVERIFY(hasIssue(h, "retrieve", {"loop through retrieve, think", "no exit condition"}));

    // Nor is a loop counter of a node outside the loop.
    WorkflowGraph k = retrieveThenThink(
        "first", {{"think", "think", EdgeCondition::runsBelow("first", 3)}, {"think", end, {}}});
    QVERIFY(hasIssue(k, "think", {"loop through think", "no exit condition"}));

    // The same loops with a counter on a loop node, or a test of what the loop writes, are fine.
    WorkflowGraph ok1 = retrieveThenThink(
        "first", {{"think", "think", EdgeCondition::runsBelow("think", 3)}, {"think", end, {}}});
    QVERIFY2(ok1.validate().isOk(), ok1.validate().message().c_str());
    WorkflowGraph ok2 = retrieveThenThink(
        "retrieve",
        {{"think", end, EdgeCondition::contains("answer", "DONE")}, {"think", "retrieve", {}}});
    QVERIFY2(ok2.validate().isOk(), ok2.validate().message().c_str());
  }

  void multistepLoopIsAccepted() {
    Result<WorkflowGraph> g = builtinWorkflow(Workflow::Multistep);
    QVERIFY(g.isOk());
    QVERIFY2(g->validate().isOk(), g->validate().message().c_str());
    // Without its exits (the counter and the DONE test) the same loop is rejected.
    WorkflowGraph broken(g->name());
    for (const WorkflowNode& n : g->nodes()) {
      if (n.kind == NodeKind::Generation)
        broken.addGeneration(n.id, n.promptTemplate, n.outputVar, n.generation);
      else
        broken.addRetrieval(n.id, n.topk, n.query, n.outputVar, n.retrieval);
    }
    for (const WorkflowEdge& e : g->edges())
      if (e.when.kind == ConditionKind::Always && e.to != "answer") broken.addEdge(e.from, e.to);
    broken.addEdge("subanswer", "next");
    QVERIFY(hasIssue(broken, "retrieve_next", {"loop through retrieve_next, subanswer, next", "no exit"}));
  }

  void variableUsedBeforeItIsSet() {
    // The answer node reads {summary}, which only one branch writes.
    WorkflowGraph g("t");
    g.addRetrieval("retrieve", 3, "question", "docs");
    g.addGeneration("compress", "{docs}", "summary");
    g.addGeneration("answer", "{summary}{question}", "answer");
    g.addEdge(std::string(kStart), "retrieve");
    g.addEdge("retrieve", "compress", EdgeCondition::nonEmpty("docs"));
    g.addEdge("retrieve", "answer");
    g.addEdge("compress", "answer");
    g.addEdge("answer", std::string(kEnd));
    QVERIFY(hasIssue(g, "answer",
                     {"prompt uses the variable 'summary' before it is set",
                      "START -> retrieve -> answer", "'compress'"}));

    // A query variable nobody writes.
    WorkflowGraph h = oneShot("hypothesis");
    QVERIFY(hasIssue(h, "retrieve",
                     {"queries with the variable 'hypothesis'", "no node writes it", "question"}));

    // A query template reading a variable nobody has written yet, and a query that is neither a
    // name nor a template.
    WorkflowGraph t = oneShot("{draft} {question}");
    QVERIFY(hasIssue(t, "retrieve", {"queries with the variable 'draft'", "no node writes it"}));
    QVERIFY(!hasIssue(t, "retrieve", {"queries with the variable 'question'"}));
    for (const char* bad : {"two words", "{question", "no {{variables}}"}) {
      WorkflowGraph b = oneShot(bad);
      QVERIFY2(hasIssue(b, "retrieve", {"neither a variable's name", "{answer} {question}"}), bad);
    }

    // A condition that tests a variable not yet set, and an answer variable END may lack.
    WorkflowGraph k =
        oneShot("question", {{"retrieve", std::string(kEnd), EdgeCondition::empty("answer")}});
    QVERIFY(hasIssue(k, "retrieve",
                     {"edge #0", "condition tests the variable 'answer' before it is set"}));
    QVERIFY(hasIssue(
        k, "",
        {"END returns the answer variable 'answer' before it is set", "START -> retrieve -> END"}));
    // A START edge may only test the question.
    WorkflowGraph s =
        oneShot("question", {{std::string(kStart), "answer", EdgeCondition::nonEmpty("docs")}});
    QVERIFY(hasIssue(s, "answer", {"edge #0", "tests 'docs'", "only 'question'"}));
  }

  void variableSetInsideALoopBeforeUse() {
    // IRG's shape: the second retrieval reads the answer that the generation before it wrote.
    Result<WorkflowGraph> g = builtinWorkflow(Workflow::Irg);
    QVERIFY(g.isOk());
    QVERIFY(g->issues().empty());
  }

  // A compression node: JSON both ways, stored as given by addNode, checked like the other kinds.
  void compressionNodes() {
    WorkflowGraph g("squeeze");
    g.addRetrieval("retrieve", 5, "question", "docs");
    g.addCompression("compress", "docs", 2, "{question}", "summary");
    g.addGeneration("answer", "{summary}\nQuestion: {question}\nAnswer:", "answer");
    g.addEdge(std::string(kStart), "retrieve");
    g.addEdge("retrieve", "compress");
    g.addEdge("compress", "answer");
    g.addEdge("answer", std::string(kEnd));
    QVERIFY2(g.validate().isOk(), g.validate().message().c_str());
    const std::string json = g.toJson();
    QVERIFY(json.find("\"kind\": \"compression\"") != std::string::npos);
    QVERIFY(json.find("\"sentences\": 2") != std::string::npos);
    Result<WorkflowGraph> back = WorkflowGraph::fromJson(json);
    QVERIFY2(back.isOk(), back.status().message().c_str());
    QVERIFY(*back == g);
    QCOMPARE(back->findNode("compress")->compression.passages, std::string("docs"));
    WorkflowGraph copy("copy");
    for (const WorkflowNode& n : g.nodes()) copy.addNode(n);
    QVERIFY(copy.nodes() == g.nodes());
    QCOMPARE(nodeKindFromName("compression"), std::optional<NodeKind>(NodeKind::Compression));
    QCOMPARE(nodeWorkUnit(NodeKind::Compression), std::string_view("sentences"));
    QVERIFY(!nodeKindFromName("compressor"));

    // A passages variable nobody writes, a bad name, a sentence count out of range.
    WorkflowGraph h("bad");
    h.addRetrieval("retrieve", 5, "question", "docs");
    h.addCompression("c1", "passages", 1, "question", "s1");
    h.addCompression("c2", "not a name", 0, "question", "s2");
    h.addCompression("c3", "docs", 65, "question", "answer");
    h.addEdge(std::string(kStart), "retrieve");
    h.addEdge("retrieve", "c1");
    h.addEdge("c1", "c2");
    h.addEdge("c2", "c3");
    h.addEdge("c3", std::string(kEnd));
    QVERIFY(hasIssue(h, "c1", {"node 'c1'", "compresses the variable 'passages'", "no node writes it"}));
    QVERIFY(hasIssue(h, "c2", {"passages variable 'not a name' is not a variable name"}));
    QVERIFY(hasIssue(h, "c2", {"sentences is 0", "[1, 64]"}));
    QVERIFY(hasIssue(h, "c3", {"sentences is 65"}));
    // Unknown keys and a missing count name the node kind and the key.
    Result<WorkflowGraph> extra = WorkflowGraph::fromJson(std::string(R"({"format": "ragraph-workflow", "version": 1,
      "nodes": [{"id": "c", "kind": "compression", "passages": "docs", "query": "question", "output": "s",
                 "sentences": 1, "topk": 5}], "edges": []})"));
    QVERIFY(!extra.isOk());
    QVERIFY(mentions(extra.status(), {"topk", "compression node"}));
    Result<WorkflowGraph> missing = WorkflowGraph::fromJson(std::string(R"({"format": "ragraph-workflow", "version": 1,
      "nodes": [{"id": "c", "kind": "compression", "passages": "docs", "query": "question", "output": "s"}],
      "edges": []})"));
    QVERIFY(!missing.isOk());
    QVERIFY(mentions(missing.status(), {"sentences"}));
    Result<WorkflowGraph> kind = WorkflowGraph::fromJson(std::string(R"({"format": "ragraph-workflow", "version": 1,
      "nodes": [{"id": "c", "kind": "summarise"}], "edges": []})"));
    QVERIFY(mentions(kind.status(), {"\"summarise\" is not a node kind", "\"compression\""}));
  }

  void malformedTemplateAndOptions() {
    WorkflowGraph g = oneShot();
    g.addGeneration("broken", "Answer {question", "x");
    QVERIFY(hasIssue(g, "broken", {"node 'broken'", "unclosed '{'", "character 7"}));
    WorkflowGraph h("t");
    h.addRetrieval("r", 0, "question", "docs", {.nprobe = -1});
    h.addGeneration("g", "{docs}", "answer", {.maxTokens = 0, .temperature = -1, .stop = {""}});
    h.addEdge(std::string(kStart), "r");
    h.addEdge("r", "g");
    h.addEdge("g", std::string(kEnd), EdgeCondition::runsBelow("g", 0));
    h.setMaxNodeRuns(0);
    QVERIFY(hasIssue(h, "r", {"topk is 0"}));
    QVERIFY(hasIssue(h, "r", {"nprobe is -1"}));
    QVERIFY(hasIssue(h, "g", {"max_tokens is 0"}));
    QVERIFY(hasIssue(h, "g", {"temperature"}));
    QVERIFY(hasIssue(h, "g", {"stop sequence #0 is empty"}));
    QVERIFY(hasIssue(h, "g", {"runs_below limit is 0"}));
    // copy_from names a variable the prompt does not show, or a template of several of them.
    for (const std::string from : {"hypothesis", "docs", "{docs}{hop}", "{docs}{hypothesis}", "the docs"}) {
      WorkflowGraph c("t");
      c.addRetrieval("retrieve", 3, "question", "docs");
      c.addRetrieval("retrieve_hop", 2, "question", "hop");
      c.addGeneration("answer", "{docs}{hop}Question: {question}\nAnswer:", "answer",
                      {.stop = {"\n"}, .copyFrom = from});
      c.addEdge(std::string(kStart), "retrieve");
      c.addEdge("retrieve", "retrieve_hop");
      c.addEdge("retrieve_hop", "answer");
      c.addEdge("answer", std::string(kEnd));
      if (from == "docs" || from == "{docs}{hop}") QVERIFY(c.validate().isOk());
      else if (from == "the docs") QVERIFY(hasIssue(c, "answer", {"copy_from 'the docs'", "neither a variable's name"}));
      else QVERIFY(hasIssue(c, "answer", {"copy_from names 'hypothesis'", "does not use", "docs"}));
    }
    QVERIFY(hasIssue(h, "", {"max_node_runs is 0"}));
    QVERIFY(mentions(h.validate(), {"more problems"}));
  }

  // ---- templates -----------------------------------------------------------------------

  void templateVariablesInOrder() {
    Result<std::vector<std::string>> v =
        templateVariables("{docs}Q: {question} {{not_a_var}} {docs} {sub_q2}}}");
    QVERIFY2(v.isOk(), v.status().message().c_str());
    QCOMPARE(*v, (std::vector<std::string>{"docs", "question", "sub_q2"}));
    QCOMPARE(templateVariables("no variables").value(), std::vector<std::string>{});
    QCOMPARE(templateVariables("").value(), std::vector<std::string>{});
  }

  void malformedTemplates() {
    struct Case {
      const char* tmpl;
      const char* part;
    };
    for (const Case& c :
         {Case{"Answer {question", "unclosed '{' at character 7"},
          Case{"{a{b}", "unclosed '{' at character 0"}, Case{"a } b", "lone '}' at character 2"},
          Case{"{}", "'{}'"}, Case{"{two words}", "'{two words}'"},
          Case{"{2x}", "not a variable name"}}) {
      Result<std::vector<std::string>> v = templateVariables(c.tmpl);
      QVERIFY2(!v.isOk(), c.tmpl);
      QCOMPARE(v.status().code(), StatusCode::InvalidArgument);
      QVERIFY(mentions(v.status(), {c.part, "{{ and }}"}));
      QVERIFY(!renderTemplate(c.tmpl, {}).isOk());
    }
  }

  void renderTemplates() {
    Variables vars{{"docs", "p1\np2\n"}, {"question", "What is a cat?"}};
    Result<std::string> s = renderTemplate("{docs}Question: {question}\nAnswer: {{x}}", vars);
    QVERIFY2(s.isOk(), s.status().message().c_str());
    QCOMPARE(*s, std::string("p1\np2\nQuestion: What is a cat?\nAnswer: {x}"));
    // A value is inserted verbatim, even when it looks like a template.
    vars["docs"] = "{question}";
    QCOMPARE(renderTemplate("{docs}", vars).value(), std::string("{question}"));

    Result<std::string> missing = renderTemplate("{summary} {question}", vars);
    QVERIFY(!missing.isOk());
    QCOMPARE(missing.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(missing.status(), {"{summary}", "not set", "docs, question"}));
  }

  // A retrieval node's query: a variable's text, or a template with unset variables read as "".
  void queriesAreVariablesOrTemplates() {
    QCOMPARE(queryVariables("question").value(), std::vector<std::string>{"question"});
    QCOMPARE(queryVariables("{answer} {question}").value(), (std::vector<std::string>{"answer", "question"}));
    QVERIFY(mentions(queryVariables("").status(), {"neither a variable's name"}));
    QVERIFY(mentions(queryVariables("{a").status(), {"unclosed '{'"}));
    const Variables vars{{"question", "What is a cat?"}, {"answer", "a feline"}};
    QCOMPARE(queryText("question", vars), std::string("What is a cat?"));
    QCOMPARE(queryText("{answer} {question}", vars), std::string("a feline What is a cat?"));
    QCOMPARE(queryText("{draft} {question}", vars), std::string(" What is a cat?"));
    QCOMPARE(queryText("draft", vars), std::string());
  }

  // Several queries in one, separated by '|': each a name or a template; their variables once each.
  void queriesMayHaveSeveralParts() {
    QCOMPARE(queryVariables("{answer} {question} | question").value(), (std::vector<std::string>{"answer", "question"}));
    QCOMPARE(queryVariables("answer|question").value(), (std::vector<std::string>{"answer", "question"}));
    QVERIFY(mentions(queryVariables("{answer} || {question}").status(), {"empty part", "single '|'"}));
    QVERIFY(mentions(queryVariables("{answer} |").status(), {"empty part"}));
    QVERIFY(mentions(queryVariables("{answer} | the topic").status(), {"'the topic'", "neither a variable's name"}));
    // copy_from: a name or a template of names; what is not set reads as "".
    QCOMPARE(copySourceVariables("docs").value(), std::vector<std::string>{"docs"});
    QCOMPARE(copySourceVariables("{docs}{hop}").value(), (std::vector<std::string>{"docs", "hop"}));
    QVERIFY(mentions(copySourceVariables("{docs").status(), {"unclosed '{'"}));
    const Variables texts{{"docs", "Dog: a canine.\n"}, {"hop", "Canine: a carnivore.\n"}};
    QCOMPARE(copySourceText("docs", texts), std::string("Dog: a canine.\n"));
    QCOMPARE(copySourceText("{docs}{hop}", texts), std::string("Dog: a canine.\nCanine: a carnivore.\n"));
    QCOMPARE(copySourceText("{hop}{unset}", texts), std::string("Canine: a carnivore.\n"));
    QCOMPARE(copySourceText("unset", texts), std::string());
    const Variables vars{{"question", "What is a cat?"}, {"hypothesis", "A cat is | a feline."}};
    // A value's own '|' is text, never a separator.
    QCOMPARE(queryTexts("{hypothesis} {question} | question", vars),
             (std::vector<std::string>{"A cat is | a feline. What is a cat?", "What is a cat?"}));
    QCOMPARE(queryTexts("{draft} | question", vars), (std::vector<std::string>{"", "What is a cat?"}));
    QCOMPARE(queryTexts("question", vars), std::vector<std::string>{"What is a cat?"});
    QCOMPARE(queryText("hypothesis | question", vars), std::string("A cat is | a feline. What is a cat?"));
  }

  // ---- conditions and the next node ----------------------------------------------------

  void conditions() {
    Variables vars{{"blank", " \n\t"}, {"text", "sub-question: DONE."}, {"empty", ""}};
    RunCounts runs{{"loop", 2}};
    QVERIFY(evaluateCondition(EdgeCondition::always(), vars, runs));
    QVERIFY(evaluateCondition(EdgeCondition::empty("unset"), vars, runs));
    QVERIFY(evaluateCondition(EdgeCondition::empty("empty"), vars, runs));
    QVERIFY(evaluateCondition(EdgeCondition::empty("blank"), vars, runs));
    QVERIFY(!evaluateCondition(EdgeCondition::empty("text"), vars, runs));
    QVERIFY(evaluateCondition(EdgeCondition::nonEmpty("text"), vars, runs));
    QVERIFY(!evaluateCondition(EdgeCondition::nonEmpty("blank"), vars, runs));
    QVERIFY(!evaluateCondition(EdgeCondition::nonEmpty("unset"), vars, runs));
    QVERIFY(evaluateCondition(EdgeCondition::contains("text", "DONE"), vars, runs));
    QVERIFY(
        !evaluateCondition(EdgeCondition::contains("text", "done"), vars, runs));  // case matters
    QVERIFY(!evaluateCondition(EdgeCondition::contains("unset", "DONE"), vars, runs));
    QVERIFY(evaluateCondition(EdgeCondition::runsBelow("loop", 3), vars, runs));
    QVERIFY(!evaluateCondition(EdgeCondition::runsBelow("loop", 2), vars, runs));
    QVERIFY(evaluateCondition(EdgeCondition::runsBelow("never_ran", 1), vars, runs));
    QCOMPARE(describeCondition(EdgeCondition::contains("x", "DONE")),
             std::string("if x contains \"DONE\""));
    QCOMPARE(describeCondition(EdgeCondition::runsBelow("loop", 3)),
             std::string("while loop ran < 3 times"));
  }

  void firstMatchingEdgeWins() {
    WorkflowGraph g("t");
    g.addGeneration("a", "{question}", "out");
    g.addGeneration("b", "{out}", "answer");
    g.addGeneration("c", "{out}", "answer");
    g.addEdge(std::string(kStart), "a");
    g.addEdge("a", "b", EdgeCondition::contains("out", "B"));
    g.addEdge("a", "c", EdgeCondition::contains("out", "C"));
    g.addEdge("a", std::string(kEnd), EdgeCondition::empty("out"));
    g.addEdge("b", std::string(kEnd));
    g.addEdge("c", std::string(kEnd));
    RunCounts runs{{"a", 1}};
    QCOMPARE(g.readySuccessor(kStart, {}, {}).value(), std::string("a"));
    // Both conditions hold: the first edge added is taken, and only it.
    QCOMPARE(g.readySuccessor("a", {{"out", "B and C"}}, runs).value(), std::string("b"));
    QCOMPARE(g.readySuccessor("a", {{"out", "only C"}}, runs).value(), std::string("c"));
    QCOMPARE(g.readySuccessor("a", {{"out", ""}}, runs).value(), std::string(kEnd));
    QCOMPARE(g.readySuccessor("b", {}, runs).value(), std::string(kEnd));
    // Nothing matches: an error naming the node and what was tried.
    Result<std::string> none = g.readySuccessor("a", {{"out", "neither"}}, runs);
    QVERIFY(!none.isOk());
    QVERIFY(mentions(none.status(), {"none of the 3 edges leaving 'a' matched", "contains \"B\"",
                                     "unconditional edge"}));
    Result<std::string> unknown = g.readySuccessor("zz", {}, runs);
    QVERIFY(!unknown.isOk());
    QVERIFY(mentions(unknown.status(), {"no node 'zz'"}));
  }

  void loopCounterAndRunawayGuard() {
    WorkflowGraph g("t");
    g.addGeneration("think", "{question}", "answer");
    g.addEdge(std::string(kStart), "think");
    g.addEdge("think", "think", EdgeCondition::runsBelow("think", 3));
    g.addEdge("think", std::string(kEnd));
    QVERIFY(g.validate().isOk());
    QCOMPARE(g.readySuccessor("think", {}, {{"think", 1}}).value(), std::string("think"));
    QCOMPARE(g.readySuccessor("think", {}, {{"think", 2}}).value(), std::string("think"));
    QCOMPARE(g.readySuccessor("think", {}, {{"think", 3}}).value(), std::string(kEnd));
    FakeRun run = simulate(g, "q", [](const WorkflowNode&, const std::string&) { return "x"; });
    QVERIFY(run.status.isOk());
    QCOMPARE(joined(run.order), std::string("think think think"));

    // A data-driven loop whose condition never comes true stops at max_node_runs.
    WorkflowGraph h("t");
    h.setMaxNodeRuns(5);
    h.addGeneration("think", "{question}", "answer");
    h.addEdge(std::string(kStart), "think");
    h.addEdge("think", std::string(kEnd), EdgeCondition::contains("answer", "DONE"));
    h.addEdge("think", "think");
    QVERIFY(h.validate().isOk());
    FakeRun stuck =
        simulate(h, "q", [](const WorkflowNode&, const std::string&) { return "more"; });
    QCOMPARE(stuck.order.size(), size_t{5});
    QVERIFY(!stuck.status.isOk());
    QVERIFY(mentions(stuck.status, {"'think' has already run 5 times", "max_node_runs"}));
  }

  // ---- built-in workflows --------------------------------------------------------------

  void builtinsAreCanonicalAndValid() {
    for (Workflow w : kAllWorkflows) {
      const std::string name(workflowName(w));
      QCOMPARE(workflowFromName(name), std::optional<Workflow>(w));
      Result<WorkflowGraph> g = builtinWorkflow(w);
      QVERIFY2(g.isOk(), g.status().message().c_str());
      QCOMPARE(g->name(), name);
      QVERIFY2(g->validate().isOk(), g->validate().message().c_str());
      // The compiled-in text is the file, and the file is in toJson's canonical form.
      const std::string file =
          readText(fs::path(RAGWB_SOURCE_DIR) / "resources/workflows" / (name + ".json"));
      QCOMPARE(std::string(builtinWorkflowJson(w)), file);
      QCOMPARE(g->toJson(), file);
      Result<WorkflowGraph> back = WorkflowGraph::fromJson(g->toJson());
      QVERIFY(back.isOk());
      QVERIFY(*back == *g);
    }
    QVERIFY(!workflowFromName("oneShot"));
  }

  void builtinShapesFollowThePaper() {
    auto answerFor = [](const WorkflowNode& n, const std::string& prompt) -> std::string {
      return n.id + "(" + std::to_string(prompt.size()) + ")";
    };
    // One-shot: retrieve with the question, then answer.
    FakeRun one = simulate(builtinWorkflow(Workflow::OneShot).value(), "what?", answerFor);
    QVERIFY(one.status.isOk());
    QCOMPARE(joined(one.order), std::string("retrieve answer"));
    QCOMPARE(one.vars["docs"], std::string("passage for [what?]\n"));

    // HyDE: the hypothetical passage with the question, and the question, searched as one query.
    FakeRun hyde = simulate(builtinWorkflow(Workflow::Hyde).value(), "what?", answerFor);
    QVERIFY(hyde.status.isOk());
    QCOMPARE(joined(hyde.order), std::string("hypothesis retrieve answer"));
    QVERIFY(hyde.vars["docs"].find("[hypothesis(") != std::string::npos);
    QVERIFY(hyde.vars["docs"].find(") what? | what?]") != std::string::npos);

    // Multistep: stops when the model says DONE ...
    WorkflowGraph multistep = builtinWorkflow(Workflow::Multistep).value();
    FakeRun done = simulate(multistep, "what?", [](const WorkflowNode& n, const std::string&) {
      return n.id == "next" ? std::string("DONE") : n.id;
    });
    QVERIFY(done.status.isOk());
    QCOMPARE(joined(done.order), std::string("decompose retrieve subanswer next answer"));
    // ... or after three sub-questions, each retrieved for.
    FakeRun limit = simulate(multistep, "what?", [](const WorkflowNode& n, const std::string&) {
      return n.id == "next" ? std::string("another sub-question") : n.id;
    });
    QVERIFY(limit.status.isOk());
    QCOMPARE(joined(limit.order),
             std::string("decompose retrieve subanswer next retrieve_next subanswer next retrieve_next "
                         "subanswer answer"));
    // Each retrieval searches for the sub-question and the question; a later one for the fact
    // learnt before it too.
    QCOMPARE(limit.vars["docs"], std::string("passage for [another sub-question subanswer what?]\n"));
    QCOMPARE(done.vars["docs"], std::string("passage for [decompose what?]\n"));

    // IRG: three generations; each later retrieval queries with the previous generation and the
    // question (Iter-RetGen's y_{t-1} || q).
    FakeRun irg = simulate(builtinWorkflow(Workflow::Irg).value(), "what?",
                           [n = 0](const WorkflowNode&, const std::string&) mutable {
                             return "gen" + std::to_string(++n);
                           });
    QVERIFY(irg.status.isOk());
    QCOMPARE(joined(irg.order),
             std::string("retrieve generate retrieve_again generate retrieve_again generate"));
    QCOMPARE(irg.vars["answer"], std::string("gen3"));
    QCOMPARE(irg.vars["docs"], std::string("passage for [gen2 what?]\n"));

    // RECOMP: the passages are compressed extractively (no model), and the answer sees the
    // summary, not the passages.
    WorkflowGraph recomp = builtinWorkflow(Workflow::Recomp).value();
    FakeRun r = simulate(recomp, "what?", answerFor);
    QVERIFY(r.status.isOk());
    QCOMPARE(joined(r.order), std::string("retrieve compress answer"));
    const WorkflowNode* compress = recomp.findNode("compress");
    QCOMPARE(compress->kind, NodeKind::Compression);
    QCOMPARE(compress->compression.passages, std::string("docs"));
    QCOMPARE(compress->topk, int64_t{1});
    QCOMPARE(r.vars["summary"], std::string("passage for [what?].\n"));
    std::vector<std::string> answerVars =
        templateVariables(recomp.findNode("answer")->promptTemplate).value();
    QCOMPARE(answerVars, (std::vector<std::string>{"summary", "question"}));
    // Its abstractive variant, compiled in beside it, has the model write the summary.
    WorkflowGraph abstractive = builtinWorkflowFile(kRecompAbstractive).value();
    QVERIFY2(abstractive.validate().isOk(), abstractive.validate().message().c_str());
    QCOMPARE(abstractive.toJson(),
             readText(fs::path(RAGWB_SOURCE_DIR) / "resources/workflows" / (std::string(kRecompAbstractive) + ".json")));
    QCOMPARE(joined(simulate(abstractive, "what?", answerFor).order), std::string("retrieve compress answer"));
    QCOMPARE(abstractive.findNode("compress")->kind, NodeKind::Generation);
    QCOMPARE(templateVariables(abstractive.findNode("compress")->promptTemplate).value().front(), std::string("docs"));
    // IRG's bridge variant: the later rounds read two searches, and copy from both.
    WorkflowGraph bridge = builtinWorkflowFile(kIrgBridge).value();
    QVERIFY2(bridge.validate().isOk(), bridge.validate().message().c_str());
    QCOMPARE(bridge.toJson(),
             readText(fs::path(RAGWB_SOURCE_DIR) / "resources/workflows" / (std::string(kIrgBridge) + ".json")));
    QCOMPARE(joined(simulate(bridge, "what?", answerFor).order),
             std::string("retrieve generate retrieve_question retrieve_answer regenerate retrieve_answer regenerate"));
    QCOMPARE(bridge.findNode("retrieve_answer")->query, std::string("answer"));
    QCOMPARE(bridge.findNode("regenerate")->generation.copyFrom, std::string("{top}{hop}"));
    QVERIFY(!builtinWorkflowFile("no-such-file").isOk());
  }
};

QTEST_GUILESS_MAIN(TestWorkflow)
#include "test_workflow.moc"
