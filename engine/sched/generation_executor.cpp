#include "sched/generation_executor.h"

#include <algorithm>

#include "memory/block_store.h"
#include "model/model_config.h"
#include "model/runner.h"
#include "model/tokenizer.h"
#include "sched/serving_assets.h"
#include "sched/step_device.h"

namespace rag::sched {

namespace {

// Block-Attention's disk tier for this model: <dir>/<fingerprint>.kvblocks.
Result<std::shared_ptr<memory::BlockStore>> openBlockStore(const std::filesystem::path& modelDir, std::string_view dtype,
                                                           const std::filesystem::path& dir,
                                                           model::ModelRunner& runner, int64_t maxBytes) {
  RAG_ASSIGN_OR_RETURN(std::string fp, model::llamaFingerprint(modelDir, dtype));
  const memory::KvPoolParams& pp = runner.kvPool().params();
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<memory::BlockStore> s,
                       memory::BlockStore::open({.file = dir / (fp + ".kvblocks"),
                                                 .fingerprint = fp,
                                                 .layers = pp.layers,
                                                 .kvHeads = pp.kvHeads,
                                                 .headDim = pp.headDim,
                                                 .elementBytes = pp.elementBytes,
                                                 .maxBytes = maxBytes}));
  return std::shared_ptr<memory::BlockStore>(std::move(s));
}

}  // namespace

GenerationExecutor::GenerationExecutor(const ServingAssets& assets, const ServingParams& params)
    : m_assets(assets), m_params(params), m_load(kWorkerLoopThreads) {}

GenerationExecutor::~GenerationExecutor() { m_worker.reset(); }

Result<std::unique_ptr<GenerationExecutor>> GenerationExecutor::create(const ServingAssets& assets,
                                                                       const ServingParams& params, TurnLock* turns,
                                                                       TraceRing* ring, std::function<void()> wake) {
  std::unique_ptr<GenerationExecutor> ex(new GenerationExecutor(assets, params));
  ex->m_elementTokens = std::make_unique<model::ElementTokens>(*assets.tokenizer);
  ex->m_wake = std::move(wake);
  model::RunnerParams rp;
  rp.deterministic = params.deterministic;
  rp.maxRunning = params.runningSequences();
  rp.maxBatchTokens = params.batchTokens();
  rp.kvBudgetBytes = params.kvBudgetBytes;
  rp.prefixCache = params.prefixCache;
  rp.evictionPolicy = params.evictionPolicy;
  rp.lacrAlpha = params.lacrAlpha;
  rp.hostKvBytes = params.hostKvBytes;
  rp.ring = ring;
  RAG_ASSIGN_OR_RETURN(rp.backend, stepBackendFor(params.device));
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelRunner> runner,
                       model::ModelRunner::create(assets.model, rp, assets.tokenizer));
  std::shared_ptr<memory::BlockStore> store;
  if (params.blockAttention && params.prefixCache && params.blockStoreBytes > 0) {
    std::filesystem::path dir = params.blockStoreDir;
    if (dir.empty()) (dir = assets.corpus) += ".blocks";
    RAG_ASSIGN_OR_RETURN(store, openBlockStore(params.modelDir, params.dtype, dir, *runner, params.blockStoreBytes));
    ex->m_blockStoreReport = store->openReport();
  }
  GenerationExecutor* self = ex.get();
  ex->m_worker = std::make_unique<GenerationWorker>(
      std::move(runner), GenerationWorkerParams{.threads = params.generationThreads,
                                                .pacing = params.policy.generation,
                                                .turns = turns,
                                                .ring = ring,
                                                .load = &ex->m_load,
                                                .post = [self](std::vector<GenerationUpdate> us) {
                                                  for (GenerationUpdate& u : us) self->m_updates.push(std::move(u));
                                                  self->m_wake();
                                                },
                                                .graphReencode = params.graphReencode,
                                                .blockStore = std::move(store)});
  return ex;
}

Result<model::SequenceRequest> GenerationExecutor::sequenceFor(const StageJob& job,
                                                                std::optional<model::SegmentedPrompt>* segmented) const {
  const WorkflowNode& node = *job.node;
  model::SequenceRequest q;
  std::optional<model::SegmentedPrompt> p;
  if (m_params.dependencyAttention && !job.inputs->graphs.empty()) {
    RAG_ASSIGN_OR_RETURN(p, model::dependencyPrompt(*m_elementTokens, node.promptTemplate, job.inputs->vars,
                                                    job.inputs->graphs));
  }
  if (!p) {
    RAG_ASSIGN_OR_RETURN(std::vector<model::PromptPiece> pieces,
                         model::promptPieces(node.promptTemplate, job.inputs->vars, job.inputs->passages));
    model::PromptTokens prompt = model::tokenizePieces(*m_assets.tokenizer, pieces);
    if (prompt.tokens.empty()) return Status::invalidArgument("its prompt renders to no tokens");
    if (m_params.blockAttention) p = model::blockPrompt(prompt);
    if (!p) q.prompt = std::move(prompt.tokens);
  }
  if (p) {
    q.prompt = p->tokens();
    q.mask = p->mask();
    if (segmented) *segmented = std::move(p);
  }
  q.sampling.maxTokens = static_cast<int32_t>(node.generation.maxTokens);
  q.sampling.temperature = static_cast<float>(node.generation.temperature);
  q.sampling.seed = job.requestId;
  q.sampling.stop = node.generation.stop;
  // rag/workflow.h cannot see the sampler; the two defaults must agree.
  static_assert(static_cast<float>(GenerationOptions::kDefaultCopyFloor) == model::SamplingParams::kDefaultCopyFloor);
  if (!node.generation.copyFrom.empty()) {
    q.sampling.copyFrom = copySourceText(node.generation.copyFrom, job.inputs->vars);
    q.sampling.copyFloor = static_cast<float>(node.generation.copyFloor);
  }
  return q;
}

Status GenerationExecutor::start(const StageJob& job) {
  std::optional<model::SegmentedPrompt> segmented;
  RAG_ASSIGN_OR_RETURN(model::SequenceRequest seq, sequenceFor(job, &segmented));
  Live& l = m_live[job.key];
  const char* attention = !segmented ? "causal"
                          : segmented->attention == model::SegmentAttention::Block ? "block"
                                                                                   : "dependency";
  l = Live{.requestId = job.requestId, .speculative = job.speculative, .segmented = segmented.has_value(),
           .attention = attention, .prompt = std::make_shared<const std::vector<int32_t>>(seq.prompt)};
  ++m_running;
  m_worker->add(GenerationJob{.key = job.key, .requestId = job.requestId, .request = std::move(seq),
                              .speculative = job.speculative, .segmented = std::move(segmented)});
  return Status::ok();
}

void GenerationExecutor::cancel(JobKey key) {
  auto it = m_live.find(key);
  if (it == m_live.end()) return;
  if (!it->second.done) {
    --m_running;
    m_worker->cancel(key);
  }
  m_live.erase(it);
}

void GenerationExecutor::collect(std::vector<StageUpdate>& out) {
  std::vector<GenerationUpdate> raw;
  m_updates.takeAll(raw);
  for (GenerationUpdate& u : raw) {
    auto it = m_live.find(u.key);
    if (it == m_live.end() || it->second.done || u.epoch != it->second.epoch) continue;  // cancelled or retargeted
    Live& l = it->second;
    StageUpdate s;
    s.key = u.key;
    const bool failed = !u.error.isOk() || u.reason == model::FinishReason::Error;
    if (!failed) {
      s.text = std::move(u.text);
      s.newTokens = u.newTokens;
      l.tokens += u.newTokens;
      l.text += s.text;
      if (u.promptCachedTokens >= 0) {
        s.firstToken = true;
        l.cachedPromptTokens = u.promptCachedTokens;
        l.segments = std::move(u.segments);
      }
      if (!u.finished && l.tokens >= m_params.specRetrievalMinTokens) s.partial = NodeOutput{.text = trimmedText(l.text)};
    }
    if (u.finished) {
      s.final = true;
      if (!u.error.isOk()) s.error = u.error;
      else if (u.reason == model::FinishReason::Error)
        s.error = Status::internal("the model produced no valid token (NaN logits)");
      s.output = NodeOutput{.text = trimmedText(u.output),
                            .work = u.generatedTokens,
                            .promptTokens = static_cast<int64_t>(l.prompt->size()),
                            .cachedPromptTokens = l.cachedPromptTokens,
                            .promptTokenIds = l.prompt,
                            .attention = l.attention,
                            .segments = std::move(l.segments)};
      --m_running;
      if (l.speculative && !failed) l.done = true;  // adopt() may still take it
      else m_live.erase(it);
    }
    out.push_back(std::move(s));
  }
}

bool GenerationExecutor::reads(const WorkflowNode& node, std::string_view var) const {
  Result<std::vector<std::string>> vars = templateVariables(node.promptTemplate);
  return vars && std::find(vars->begin(), vars->end(), var) != vars->end();
}

bool GenerationExecutor::roomToSpeculate() const {
  return m_running < m_params.specGenerationLimit && loadAllowsSpeculation(m_load.last(), m_params.specLoadThreshold);
}

Adoption GenerationExecutor::adopt(const StageJob& real) {
  auto it = m_live.find(real.key);
  if (it == m_live.end() || it->second.segmented) return Adoption::None;  // a rollback would keep the old mask
  Result<model::SequenceRequest> seq = sequenceFor(real);
  if (!seq || !seq->mask.isCausal()) return Adoption::None;  // an error is reported by the real run
  Live& l = it->second;
  if (seq->prompt == *l.prompt) {
    l.speculative = false;
    if (l.done) m_live.erase(it);
    return Adoption::Exact;
  }
  if (l.done) return Adoption::None;
  const auto diverge = std::mismatch(l.prompt->begin(), l.prompt->end(), seq->prompt.begin(), seq->prompt.end());
  const auto keep = static_cast<int64_t>(diverge.first - l.prompt->begin());
  if (keep == 0) return Adoption::None;
  l = Live{.requestId = l.requestId, .attention = "causal", .epoch = l.epoch + 1,
           .prompt = std::make_shared<const std::vector<int32_t>>(seq->prompt)};
  m_worker->retarget(GenerationJob{.key = real.key, .requestId = real.requestId, .request = std::move(*seq)}, keep,
                     l.epoch);
  return Adoption::Retargeted;
}

}  // namespace rag::sched
