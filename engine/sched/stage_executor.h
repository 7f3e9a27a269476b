// How the scheduler runs one kind of RAGraph node: a StageExecutor per NodeKind, each owning the
// worker that does the work (generation_executor.h, retrieval_executor.h). The scheduler knows
// graphs, variables, speculation and request life cycles; an executor knows how to turn a node
// and a request's inputs into work, and the work's reports into a node's output. A new node kind
// is a new executor registered in Scheduler::start, not a new branch in the scheduler.
//
// Threading: every method runs on the scheduler thread. Executors' workers post from their own
// threads into the executor and poke the scheduler, which then calls collect().
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/dep_prompt.h"
#include "model/prompt.h"
#include "rag/request.h"
#include "rag/status.h"
#include "rag/workflow.h"

namespace rag::sched {

using JobKey = uint64_t;  // names one unit of work (one node run, or one speculation) of a request

// What a request holds for its nodes: text variables (templates, conditions, answers) and, for
// the variables a retrieval node wrote, the passages behind the text (prompt segments).
struct RequestInputs {
  Variables vars;
  model::PassageVariables passages;
  model::GraphVariables graphs;  // the variables a knowledge node wrote: its subgraphs
};

// What a node run produced.
struct NodeOutput {
  std::string text;                           // the node's output variable
  std::vector<model::PassageText> passages = {};  // retrieval: the passages behind `text`, best first
  std::vector<model::SubgraphText> graphs = {};   // knowledge: the subgraphs behind `text`
  int64_t work = 0;                           // tokens generated, or clusters searched
  int64_t promptTokens = 0;                   // generation: the prompt, and the part of it the
  int64_t cachedPromptTokens = 0;             // prefix cache supplied
  std::shared_ptr<const std::vector<int32_t>> promptTokenIds = {};  // generation: StageTiming::promptTokenIds
  std::string attention = {};                 // generation: StageTiming::attention
  std::vector<SegmentKvUse> segments = {};    // generation: StageTiming::segments
  std::shared_ptr<const KnowledgeUse> knowledge = {};  // knowledge: StageTiming::knowledge
};

struct StageJob {
  JobKey key = 0;
  uint32_t requestId = 0;
  const WorkflowNode* node = nullptr;
  const RequestInputs* inputs = nullptr;  // read during start()/adopt() only
  bool speculative = false;
};

struct StageUpdate {
  JobKey key = 0;
  std::string text;                   // streamed text since the last update
  int32_t newTokens = 0;
  bool firstToken = false;            // this update carries the run's first token
  std::optional<NodeOutput> partial;  // an early output a following node may speculate on
  bool final = false;
  NodeOutput output;                  // final
  Status error;                       // final, failed
};

// What speculative work of a kind is for (HedraRAG §4.3).
enum class SpeculationKind : uint8_t {
  None,
  Candidate,  // may become the node's run once its real input is known (generation)
  Prefetch,   // only warms the executor for the real run (retrieval: the local cache)
};

// What became of a Candidate when its node's real input arrived.
enum class Adoption : uint8_t {
  None,        // discarded: the scheduler cancels it and starts the node afresh
  Exact,       // it ran on exactly the real input: it is the node's run
  Retargeted,  // rolled back to where the inputs diverge and continued on the real input
};

class StageExecutor {
public:
  virtual ~StageExecutor() = default;
  virtual NodeKind kind() const = 0;

  // Starts `job`. An error (the node cannot run on these inputs) fails the request; nothing was
  // started then.
  virtual Status start(const StageJob& job) = 0;
  virtual void cancel(JobKey key) = 0;
  // Appends what the worker reported since the last call, in order; updates of cancelled or
  // retargeted-over work are dropped here.
  virtual void collect(std::vector<StageUpdate>& out) = 0;
  // The request ended: drop whatever was kept for it.
  virtual void forget(uint32_t /*requestId*/) {}

  // Does `node` read variable `var`? (A partial value of a variable no node reads is not worth
  // speculating on.)
  virtual bool reads(const WorkflowNode& node, std::string_view var) const = 0;
  virtual SpeculationKind speculation() const { return SpeculationKind::None; }
  // T_curr < τ·T_max (§4.3): the stage has room for speculative work now.
  virtual bool roomToSpeculate() const { return false; }
  // A Candidate's node now has its real input (`real.key` is the candidate's key).
  virtual Adoption adopt(const StageJob& /*real*/) { return Adoption::None; }
  // Samples the stage's load gauge (once per scheduler cycle; roomToSpeculate reads it).
  virtual void sampleLoad(uint64_t /*nowNs*/) {}
};

// What executors share: a node's text without the white space around it (a query, an answer).
inline std::string trimmedText(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}
// Speculative work goes to a worker only while it idles enough: its busy share below `threshold`
// (above 1: whatever the load).
inline bool loadAllowsSpeculation(double busyShare, double threshold) { return threshold > 1.0 || busyShare < threshold; }
// A worker's LoadGauge counts the wall time of its one loop thread, whose steps use all of the
// worker's compute threads (OpenMP, torch) at once: the busy share is over that one loop, not
// over the threads. (Measured over the threads, as it was, a worker of 8 threads never read
// above 1/8, so on the 16-core GPU machine hedra kept speculating on saturated workers:
// multistep at 94.5 rps against 128 without the GPU cluster cache, `bench serve`, 2026-11-26.)
inline constexpr double kWorkerLoopThreads = 1.0;

}  // namespace rag::sched
