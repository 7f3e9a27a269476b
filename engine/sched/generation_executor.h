// Generation nodes (StageExecutor): a node's prompt template over the request's inputs becomes a
// token-segment prompt (model/prompt.h) and a sequence in the generation worker's ModelRunner
// (continuous batching, the prefix cache, the KV pool). Its runs stream text, report their
// first token and prompt-cache hits, and post their text so far as a partial output once
// specRetrievalMinTokens tokens are out (speculative retrieval reads it).
//
// Speculation: a speculative run is a Candidate. When its node's real prompt arrives, an
// identical prompt adopts it; a different one retargets it: the sequence is truncated to the
// longest common token prefix of the two prompts (its KV kept) and continues on the real prompt.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>

#include "rag/engine.h"
#include "sched/generation_worker.h"
#include "sched/load_gauge.h"
#include "sched/mailbox.h"
#include "sched/stage_executor.h"

namespace rag {
class ServingAssets;
}

namespace rag::sched {

class GenerationExecutor final : public StageExecutor {
public:
  // `wake` is called from the worker thread whenever updates are waiting for collect().
  static Result<std::unique_ptr<GenerationExecutor>> create(const ServingAssets& assets, const ServingParams& params,
                                                            TurnLock* turns, TraceRing* ring, std::function<void()> wake);
  ~GenerationExecutor() override;

  NodeKind kind() const override { return NodeKind::Generation; }
  Status start(const StageJob& job) override;
  void cancel(JobKey key) override;
  void collect(std::vector<StageUpdate>& out) override;
  bool reads(const WorkflowNode& node, std::string_view var) const override;
  SpeculationKind speculation() const override { return SpeculationKind::Candidate; }
  bool roomToSpeculate() const override;
  void sampleLoad(uint64_t nowNs) override { (void)m_load.load(nowNs); }
  Adoption adopt(const StageJob& real) override;

  const GenerationWorker& worker() const { return *m_worker; }
  // Why an old block store file was set aside when serving started (empty: it was not).
  const std::string& blockStoreReport() const { return m_blockStoreReport; }
  LoadGauge& load() { return m_load; }

private:
  GenerationExecutor(const ServingAssets& assets, const ServingParams& params);
  // The node's sequence; a prompt over a knowledge node's subgraphs under dependency attention,
  // or over passages under Block-Attention, also gives its SegmentedPrompt in `segmented` (the
  // worker builds its KV through the prefix cache).
  Result<model::SequenceRequest> sequenceFor(const StageJob& job,
                                             std::optional<model::SegmentedPrompt>* segmented = nullptr) const;

  struct Live {
    uint32_t requestId = 0;
    bool speculative = false;
    bool done = false;       // reported final (kept for adopt() while speculative)
    bool segmented = false;  // a segmented prompt (never retargeted)
    std::string attention;   // StageTiming::attention
    uint32_t epoch = 0;
    std::shared_ptr<const std::vector<int32_t>> prompt;  // shared with the stage's NodeOutput
    int64_t tokens = 0;
    std::string text = {};
    int64_t cachedPromptTokens = 0;
    std::vector<SegmentKvUse> segments = {};
  };
  const ServingAssets& m_assets;
  ServingParams m_params;
  LoadGauge m_load;
  Mailbox<GenerationUpdate> m_updates;
  std::function<void()> m_wake;
  std::unordered_map<JobKey, Live> m_live;
  std::unique_ptr<model::ElementTokens> m_elementTokens;  // scheduler thread only
  int32_t m_running = 0;  // live entries not yet done: the stage's T_curr
  std::string m_blockStoreReport;
  std::unique_ptr<GenerationWorker> m_worker;  // last: stopped first
};

}  // namespace rag::sched
