// Compression nodes (StageExecutor): RECOMP's extractive compressor. A node's passages variable
// (what a retrieval node found) is split into sentences, each scored against the node's query,
// and the best `topk` (with a bridge sentence for a two-hop question) become its output, a
// summary of a sentence or two (retrieval/extractive_summary.h).
//
// Scoring a few dozen sentences by their query words takes microseconds, so a job is done in
// start(), on the scheduler's thread, and its result handed back at the next collect() (the
// scheduler is woken for it): a worker thread and a mailbox would cost more than the work.
#pragma once

#include <functional>
#include <vector>

#include "sched/stage_executor.h"

namespace rag::sched {

class CompressionExecutor final : public StageExecutor {
public:
  // `wake` asks the scheduler for another cycle, in which collect() hands the results over.
  explicit CompressionExecutor(std::function<void()> wake) : m_wake(std::move(wake)) {}

  NodeKind kind() const override { return NodeKind::Compression; }
  Status start(const StageJob& job) override;
  void cancel(JobKey key) override;
  void collect(std::vector<StageUpdate>& out) override;
  bool reads(const WorkflowNode& node, std::string_view var) const override;

  // The summary `node` makes of `inputs` (what start() computes).
  static NodeOutput compress(const WorkflowNode& node, const RequestInputs& inputs);

private:
  std::function<void()> m_wake;
  std::vector<StageUpdate> m_done;  // finished in start(), not collected yet
};

}  // namespace rag::sched
