// RAGraph: a RAG workflow as a graph of Generation and Retrieval nodes (HedraRAG §4.1,
// Listing 1). A graph only describes a workflow; the scheduler runs it, and everything in it is
// data, so every graph round-trips through JSON (the built-ins are JSON files).
//
//   rag::WorkflowGraph g("hyde");                                  // Listing 1, g1
//   g.addGeneration("hypothesis", "Write a passage that answers: {question}\nPassage:",
//                   "hypothesis", {.maxTokens = 48, .stop = {"\n"}});
//   g.addRetrieval("retrieve", 5, "hypothesis", "docs");
//   g.addGeneration("answer", "{docs}Question: {question}\nAnswer:", "answer");
//   g.addEdge(rag::kStart, "hypothesis");
//   g.addEdge("hypothesis", "retrieve");
//   g.addEdge("retrieve", "answer");
//   g.addEdge("answer", rag::kEnd);
//   RAG_RETURN_IF_ERROR(g.validate());       // names the offending node or edge
//   std::string json = g.toJson();           // WorkflowGraph::fromJson(json) == g
//
// A loop (Listing 1, g2) is a cycle whose way out is a conditional edge:
//
//   g.addEdge("next", "final", rag::EdgeCondition::contains("subquestion", "DONE"));
//   g.addEdge("next", "retrieve", rag::EdgeCondition::runsBelow("next", 3));
//   g.addEdge("next", "final");              // unconditional: taken when neither matched
//
// Variables. A request carries a map of named text variables. `question` holds the request's
// input before the first node runs. A Generation node renders its prompt template ({name} is
// replaced by the variable, {{ and }} are literal braces) and stores the generated text in its
// output variable; a Retrieval node searches with the text of its query (a variable's name, or a
// template of variables such as IRG's "{answer} {question}": unset ones read as "") and stores the
// passages as text, one passage per line, each ending with '\n' (the prompt format of
// corpus/qa_prompt.h, so "{docs}Question: {question}\nAnswer:" reads like the prompts the
// shipped models were trained on). A node run again (in a loop) overwrites its output.
//
// Edges and the next node. START and END are pseudo-nodes: the edges leaving START choose the
// entry node, and a request finishes when it reaches END; its answer is the variable named by
// answerVar() ("answer" unless set). When a node finishes, the edges leaving it are checked in
// the order they were added and the FIRST one whose condition holds is taken (readySuccessor).
// First-match, not all-match, because:
//   - it is Listing 1's semantics: the conditional edge there is a function returning one node;
//   - an ordered list of guarded edges is an if / else-if / else, so "leave when the model says
//     DONE, else loop while fewer than 3 rounds, else leave" needs no AND/OR/NOT operators;
//   - exactly one successor means a request is always at exactly one node, so no join rules
//     are needed and the variables a node sees never depend on the timing of parallel
//     branches, which keeps speculation and rollback in the scheduler simple.
// Consequently an edge listed after an unconditional edge of the same node can never be taken,
// and validate() reports it.
//
// Loop counters. RunCounts holds, per node id, how many times that node has finished in this
// request; EdgeCondition::runsBelow(node, n) holds while that count is < n. The scheduler
// increments a node's count when it finishes, before choosing its successor. As a guard
// against loops whose exit condition never comes true, readySuccessor() refuses to start a node
// that has already run maxNodeRuns() times.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag {

// ---- the built-in workflows (HedraRAG §6.1) ----------------------------------------------

enum class Workflow { OneShot, Hyde, Multistep, Irg, Recomp, GraphRag };
inline constexpr std::array<Workflow, 6> kAllWorkflows = {Workflow::OneShot, Workflow::Hyde,   Workflow::Multistep,
                                                          Workflow::Irg,     Workflow::Recomp, Workflow::GraphRag};

// The lower-case words used on the command line, in trace files and as the built-in file
// names: "oneshot", "hyde", "multistep", "irg", "recomp", "graphrag" (DepCache's GraphRAG:
// knowledge-graph retrieval, then generation over the subgraphs).
std::string_view workflowName(Workflow w);
std::optional<Workflow> workflowFromName(std::string_view name);

// ---- graph parts -------------------------------------------------------------------------

inline constexpr std::string_view kStart = "START";
inline constexpr std::string_view kEnd = "END";
inline constexpr std::string_view kQuestionVar = "question";  // set from the request

// The JSON file format (toJson/fromJson): {"format": kWorkflowFormat, "version": ...}.
inline constexpr std::string_view kWorkflowFormat = "ragraph-workflow";
inline constexpr int64_t kWorkflowFormatVersion = 1;

using Variables = std::map<std::string, std::string, std::less<>>;
using RunCounts = std::map<std::string, int64_t, std::less<>>;  // node id -> finished runs

// Knowledge: knowledge-graph retrieval (GraphRAG, DepCache §2): the question's entities, the
// L-hop subgraph of each, its relation paths pruned to the top K by similarity to the question.
// Its output variable holds the subgraphs; a generation prompt that uses it lays them out as a
// dependency prompt (model/dep_prompt.h) or, under causal attention, as flat paths.
// Compression: RECOMP's extractive compressor (Xu et al. 2024): the sentences of a retrieved
// passages variable that best match the query, kept in passage order of relevance as a short
// summary (retrieval/extractive_summary.h). It runs on the CPU, beside the retrieval worker.
enum class NodeKind { Generation, Retrieval, Knowledge, Compression };
inline constexpr std::array<NodeKind, 4> kAllNodeKinds = {NodeKind::Generation, NodeKind::Retrieval,
                                                          NodeKind::Knowledge, NodeKind::Compression};
inline constexpr size_t kNodeKindCount = kAllNodeKinds.size();
std::string_view nodeKindName(NodeKind k);  // "generation" | "retrieval" | "knowledge" | "compression"
std::optional<NodeKind> nodeKindFromName(std::string_view name);
// What a run's StageTiming::work counts: "tokens" (generated), "clusters" (searched), "paths"
// (kept) or "sentences" (scored).
std::string_view nodeWorkUnit(NodeKind k);

struct GenerationOptions {
  int64_t maxTokens = 64;         // >= 1
  double temperature = 0.0;       // 0: greedy; finite and >= 0
  std::vector<std::string> stop = {};  // generation ends at the first of these (each non-empty)
  // Non-empty: extractive answers, the output must be a span of this variable's text (one of the
  // prompt's variables, e.g. "docs", or a template of several, "{docs}{hop}": copySourceText),
  // compared without case (copy-constrained decoding, model/span_constraint.h). Empty: free
  // generation.
  std::string copyFrom = {};
  // With copyFrom: when, within the answer's first word, the likeliest token that keeps a span
  // is less than this many times as probable as the model's likeliest token, the constraint
  // lifts and the node generates freely (the model answers from what it knows); in [0, 1].
  double copyFloor = kDefaultCopyFloor;
  static constexpr double kDefaultCopyFloor = 0.1;  // model::SamplingParams::kDefaultCopyFloor
  bool operator==(const GenerationOptions&) const = default;
};

// How a retrieval node finds passages.
enum class RetrievalMethod : uint8_t {
  Dense,   // the embedder's query vector, step-wise IVF search (HedraRAG's sub-stages)
  Bm25,    // BM25 over the passages' words (SQLite FTS5, retrieval/bm25_index.h)
  Hybrid,  // both, fused by reciprocal rank (the dense search still runs in sub-stages)
};
std::string_view retrievalMethodName(RetrievalMethod m);  // "dense" | "bm25" | "hybrid"
std::optional<RetrievalMethod> retrievalMethodFromName(std::string_view name);

// How a retrieval node orders the passages it found before they reach a prompt.
enum class RetrievalRerank : uint8_t {
  None,  // as the method ranks them
  Bm25,  // by their BM25 score for the node's query (retrieval/bm25_index.h rankAmong): the same
         // passages, the most lexically relevant first, where a reader trusts the first passage most
};
std::string_view retrievalRerankName(RetrievalRerank r);  // "none" | "bm25"
std::optional<RetrievalRerank> retrievalRerankFromName(std::string_view name);

struct RetrievalOptions {
  // Hybrid by measurement (README, "Retrieval methods, measured end to end"): the best recall@5
  // (0.977, BM25 0.968, dense 0.841 on 2,000 test questions), answers within 0.03 of BM25's
  // through every built-in and far above dense's, and the dense side keeps HedraRAG's sub-stage
  // search, speculation and cluster cache at work in every run.
  RetrievalMethod method = RetrievalMethod::Hybrid;
  int64_t nprobe = 0;  // IVF clusters to search (Dense, Hybrid); 0: the engine's setting
  RetrievalRerank rerank = RetrievalRerank::None;
  // The corpus's BM25 index is needed (the method's lexical side, or the rerank).
  bool usesBm25() const { return method != RetrievalMethod::Dense || rerank != RetrievalRerank::None; }
  bool operator==(const RetrievalOptions&) const = default;
};

// A knowledge-graph retrieval node's settings (its subgraph count is WorkflowNode::topk).
struct KnowledgeOptions {
  int64_t hops = 2;     // L: the subgraph's depth, in [1, 4]
  int64_t fanout = 8;   // out-edges followed per entity, in [1, 256]
  int64_t paths = 30;   // K: paths kept per subgraph, in [1, 1000]
  bool operator==(const KnowledgeOptions&) const = default;
};

// A compression node's settings (its sentence count is WorkflowNode::topk, its query the text the
// sentences are scored against).
struct CompressionOptions {
  std::string passages;  // the variable of retrieved passages it compresses (a retrieval node's output)
  bool operator==(const CompressionOptions&) const = default;
};

// One node. Fields of the other kinds stay at their defaults.
struct WorkflowNode {
  std::string id;  // letters, digits, '_', '-', '.'; not START or END
  NodeKind kind = NodeKind::Generation;
  std::string outputVar;
  // Generation
  std::string promptTemplate;
  GenerationOptions generation;
  // Retrieval, Knowledge and Compression
  int64_t topk = 0;  // >= 1: passages (Retrieval), subgraphs (Knowledge) or sentences (Compression)
  std::string query;  // a variable's name or a template of variables, or several separated by '|' (queryVariables)
  RetrievalOptions retrieval;
  KnowledgeOptions knowledge;
  CompressionOptions compression;
  bool operator==(const WorkflowNode&) const = default;
};

enum class ConditionKind {
  Always,     // no condition
  Empty,      // var is unset or only white space
  NonEmpty,   // the opposite of Empty
  Contains,   // var is set and contains `text` (case-sensitive, byte-wise)
  RunsBelow,  // node has finished fewer than `limit` times in this request
};
std::string_view conditionKindName(ConditionKind k);  // "always", "empty", "non_empty", ...

struct EdgeCondition {
  ConditionKind kind = ConditionKind::Always;
  std::string var;    // Empty, NonEmpty, Contains
  std::string text;   // Contains
  std::string node;   // RunsBelow
  int64_t limit = 0;  // RunsBelow; >= 1

  static EdgeCondition always() { return {}; }
  static EdgeCondition empty(std::string var);
  static EdgeCondition nonEmpty(std::string var);
  static EdgeCondition contains(std::string var, std::string text);
  static EdgeCondition runsBelow(std::string node, int64_t limit);
  bool operator==(const EdgeCondition&) const = default;
};

// "always", "if docs is empty", "if subquestion contains \"DONE\"", "while next ran < 3 times".
std::string describeCondition(const EdgeCondition& c);
bool evaluateCondition(const EdgeCondition& c, const Variables& vars, const RunCounts& runs);

struct WorkflowEdge {
  std::string from;  // a node id or kStart
  std::string to;    // a node id or kEnd
  EdgeCondition when;
  bool operator==(const WorkflowEdge&) const = default;
};

// One problem validate() found. `message` names the node or edge and says how to fix it.
struct WorkflowIssue {
  std::string node;   // the offending node id; empty for a graph-wide problem
  int64_t edge = -1;  // index into edges() when an edge is at fault, else -1
  std::string message;
};

// ---- prompt templates --------------------------------------------------------------------

// A template cut into literal text (braces unescaped) and variable references, in order.
struct TemplatePiece {
  bool isVariable = false;
  std::string text;  // the literal, or the variable's name
};
// InvalidArgument for a malformed template, as templateVariables says.
Result<std::vector<TemplatePiece>> parseTemplate(std::string_view tmpl);

// The variables a template uses, in order of first use, each once. InvalidArgument for a
// malformed template: an unclosed '{', a lone '}', or "{}"/"{not a name}" (names are letters,
// digits and '_', not starting with a digit; write {{ and }} for literal braces).
Result<std::vector<std::string>> templateVariables(std::string_view tmpl);
// The template with every {name} replaced. InvalidArgument naming the first variable that is
// not in `vars` (and the ones that are), or the template's syntax error.
Result<std::string> renderTemplate(std::string_view tmpl, const Variables& vars);

// A retrieval or knowledge node's query: one variable's name ("question": searches with its text)
// or a template of variables ("{answer} {question}": Iter-RetGen's query, the last generation
// and the question) -- or several of those separated by '|' ("{hypothesis} {question} |
// {question}"), which a retrieval node searches as one query: the dense vector is the mean of
// their embeddings (HyDE's), BM25's ranking the reciprocal-rank fusion of theirs. The variables
// it reads; InvalidArgument when a part is neither a name nor a template using at least one
// variable, or is empty.
Result<std::vector<std::string>> queryVariables(std::string_view query);
// Each part's text with `vars`; a variable that is not set reads as "" (the retrieval executor
// falls back to the question when nothing is left).
std::vector<std::string> queryTexts(std::string_view query, const Variables& vars);
// The parts' texts joined by a space (one text: what knowledge and compression nodes search).
std::string queryText(std::string_view query, const Variables& vars);

// A generation node's copy_from: one variable's name ("docs") or a template of variables
// ("{docs}{hop}": the answer may copy from either). The variables it reads; InvalidArgument when
// it is neither a name nor a template using at least one variable.
Result<std::vector<std::string>> copySourceVariables(std::string_view copyFrom);
// The text the answer copies from with `vars`; a variable that is not set reads as "".
std::string copySourceText(std::string_view copyFrom, const Variables& vars);

// ---- the graph ---------------------------------------------------------------------------

class WorkflowGraph {
public:
  WorkflowGraph() = default;
  explicit WorkflowGraph(std::string name, std::string description = {});

  // Builders mirroring Listing 1. They record what they are given; validate() checks it (so an
  // editor can hold a half-built graph).
  WorkflowGraph& addGeneration(std::string id, std::string promptTemplate, std::string outputVar,
                               GenerationOptions options = {});
  WorkflowGraph& addRetrieval(std::string id, int64_t topk, std::string query,
                              std::string outputVar, RetrievalOptions options = {});
  // A knowledge-graph retrieval node: `subgraphs` entities' subgraphs for the text of `query`.
  WorkflowGraph& addKnowledge(std::string id, int64_t subgraphs, std::string query, std::string outputVar,
                              KnowledgeOptions options = {});
  // Any node, stored as given (what an editor or a copy with changed options rebuilds from).
  WorkflowGraph& addNode(WorkflowNode node);
  // Keeps the `sentences` sentences of variable `passages` that best match `query`.
  WorkflowGraph& addCompression(std::string id, std::string passages, int64_t sentences, std::string query,
                                std::string outputVar);
  // Edges leaving one node are checked in the order they are added (first match wins).
  WorkflowGraph& addEdge(std::string from, std::string to, EdgeCondition when = {});

  const std::string& name() const { return m_name; }
  void setName(std::string name) { m_name = std::move(name); }
  const std::string& description() const { return m_description; }
  void setDescription(std::string d) { m_description = std::move(d); }
  // The variable holding the request's final answer once it reaches END.
  const std::string& answerVar() const { return m_answerVar; }
  void setAnswerVar(std::string var) { m_answerVar = std::move(var); }
  // How many times one node may run in one request (the runaway-loop guard); >= 1.
  int64_t maxNodeRuns() const { return m_maxNodeRuns; }
  void setMaxNodeRuns(int64_t n) { m_maxNodeRuns = n; }

  const std::vector<WorkflowNode>& nodes() const { return m_nodes; }
  // Sets every retrieval node's method (one workflow evaluated with each retriever, say).
  void setRetrievalMethod(RetrievalMethod m);
  void setRetrievalRerank(RetrievalRerank r);  // every retrieval node's rerank
  const std::vector<WorkflowEdge>& edges() const { return m_edges; }
  // The first node with this id, or nullptr.
  const WorkflowNode* findNode(std::string_view id) const;
  // Indexes into edges() of the edges leaving `id` (a node or kStart), in checking order.
  std::vector<size_t> edgesFrom(std::string_view id) const;

  // Every problem, in a stable order: malformed nodes and edges (bad ids, duplicate ids, edges
  // to unknown nodes, malformed templates and options, edges that can never be taken), no
  // entry edge, nodes unreachable from START, nodes with no path to END, loops with no exit
  // condition (a loop is fine only when an edge leaves it under a condition that can change
  // while it runs: runs_below on one of its nodes, or a variable one of its nodes writes), and
  // variables used (in a prompt, as a query, in a condition, or as the answer at END) before
  // every path from START has set them. Empty when the graph is valid.
  std::vector<WorkflowIssue> issues() const;
  // OK, or InvalidArgument with the first issue ("... (and 2 more problems)").
  Status validate() const;

  // The node to run after `finished` (a node id or kStart), or kEnd: the target of the first
  // edge leaving it whose condition holds under `vars` and `runs` (see the file comment).
  // `runs` already counts the run of `finished`. InvalidArgument when `finished` is unknown,
  // when no edge matches, or when the chosen node has already run maxNodeRuns() times.
  Result<std::string> readySuccessor(std::string_view finished, const Variables& vars,
                                     const RunCounts& runs) const;

  // Pretty-printed JSON (ending with a newline) in a canonical form: fromJson(toJson()) == *this
  // and toJson() of that is the same text. Doubles are written in the shortest form that reads
  // back exactly.
  std::string toJson() const;
  // Reads toJson()'s format. Checks structure and types only (validate() checks the graph).
  // InvalidArgument naming the JSON path ("$.nodes[2].topk") and the fix for a syntax error, a
  // missing or unknown key, a repeated key, a wrong type, or another format or a newer version.
  static Result<WorkflowGraph> fromJson(std::string_view text);
  // fromJson() of a file; errors name the file. NotFound when it does not exist.
  static Result<WorkflowGraph> load(const std::filesystem::path& path);
  // Writes toJson() atomically (temp file + rename).
  Status save(const std::filesystem::path& path) const;

  bool operator==(const WorkflowGraph&) const = default;

private:
  std::string m_name;
  std::string m_description;
  std::string m_answerVar = "answer";
  int64_t m_maxNodeRuns = 16;
  std::vector<WorkflowNode> m_nodes;
  std::vector<WorkflowEdge> m_edges;
};

// The built-in workflows, resources/workflows/<name>.json, compiled into the library (the CLI
// and tests need no install path). Each parses and validates (tests/engine/test_workflow.cpp).
std::string_view builtinWorkflowJson(Workflow w);
Result<WorkflowGraph> builtinWorkflow(Workflow w);
// Any compiled-in file by its name, the built-ins' and the variants' beside them:
// "recomp-abstractive" (RECOMP whose compressor is the model, HedraRAG's post-retrieval
// generation stage, where the built-in compresses extractively), "irg-bridge" (IRG whose later
// rounds read the question's top 3 beside the previous answer's own top 2).
inline constexpr std::string_view kRecompAbstractive = "recomp-abstractive";
inline constexpr std::string_view kIrgBridge = "irg-bridge";
// The variants, in the order the CLI's --builtin and the editor's template list show them.
inline constexpr std::array<std::string_view, 2> kWorkflowVariants = {kRecompAbstractive, kIrgBridge};
Result<WorkflowGraph> builtinWorkflowFile(std::string_view name);
// True when `name` is a compiled-in file's: a built-in's (workflowName) or a variant's.
bool isCompiledInWorkflow(std::string_view name);

}  // namespace rag
