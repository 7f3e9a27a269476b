// Retrieval nodes (StageExecutor): a node's query variable is embedded and searched in the
// passage index by the retrieval worker (step-wise IVF under the policy's pacing); the top
// passages become the node's output: their text, one passage per line, and the passages
// themselves (ids and text), so generation prompts can hold them as segments.
//
// Each finished retrieval of a request (real or speculative) leaves a local cache (§4.3: the
// larger top-k and its clusters) that orders the request's next retrieval when the policy
// reorders; speculative retrievals are Prefetches: they only warm that cache.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include "corpus/qa_prompt.h"
#include "rag/engine.h"
#include "retrieval/locality.h"
#include "sched/load_gauge.h"
#include "sched/mailbox.h"
#include "sched/retrieval_worker.h"
#include "sched/stage_executor.h"

namespace rag {
class ServingAssets;
}

namespace rag::sched {

class RetrievalExecutor final : public StageExecutor {
public:
  // `generationStepSeconds`: the generation sub-stage's length (a retrieval sub-stage is never
  // planned shorter); `wake` is called from the worker thread when updates wait for collect().
  static Result<std::unique_ptr<RetrievalExecutor>> create(const ServingAssets& assets, const ServingParams& params,
                                                           TurnLock* turns, TraceRing* ring,
                                                           std::function<double()> generationStepSeconds,
                                                           std::function<void()> wake);
  ~RetrievalExecutor() override;

  NodeKind kind() const override { return NodeKind::Retrieval; }
  Status start(const StageJob& job) override;
  void cancel(JobKey key) override;
  void collect(std::vector<StageUpdate>& out) override;
  void forget(uint32_t requestId) override { m_localCache.erase(requestId); }
  bool reads(const WorkflowNode& node, std::string_view var) const override;
  SpeculationKind speculation() const override { return SpeculationKind::Prefetch; }
  bool roomToSpeculate() const override;
  void sampleLoad(uint64_t nowNs) override {
    (void)m_load.load(nowNs);
    (void)m_embedLoad.load(nowNs);
  }

  const RetrievalWorker& worker() const { return *m_worker; }
  LoadGauge& load() { return m_load; }
  // The embedding thread's work (the policy's embedAhead; else nothing: the search thread embeds).
  const LoadGauge& embedLoad() const { return m_embedLoad; }

private:
  RetrievalExecutor(const ServingAssets& assets, const ServingParams& params, corpus::QaPromptReader reader);
  NodeOutput graphOutput(RetrievalUpdate& u);
  Result<NodeOutput> outputOf(const std::vector<retrieval::SearchHit>& hits, int64_t clustersSearched);

  const ServingAssets& m_assets;
  ServingParams m_params;
  LoadGauge m_load;       // the search thread (and, inline, its embedding)
  LoadGauge m_embedLoad;  // the embedding thread
  corpus::QaPromptReader m_reader;  // passage text, on the scheduler thread
  std::unordered_map<int64_t, std::string> m_passageText;
  Mailbox<RetrievalUpdate> m_updates;
  std::function<void()> m_wake;
  std::unordered_map<JobKey, uint32_t> m_live;  // key -> request
  std::unordered_map<uint32_t, retrieval::LocalCache> m_localCache;
  std::unique_ptr<RetrievalWorker> m_worker;  // last: stopped first
};

}  // namespace rag::sched
