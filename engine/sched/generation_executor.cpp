#include "sched/generation_executor.h"

#include <algorithm>
#include <thread>

#include "model/runner.h"
#include "model/tokenizer.h"
#include "sched/serving_assets.h"

namespace rag::sched {

GenerationExecutor::GenerationExecutor(const ServingAssets& assets, const ServingParams& params)
    : m_assets(assets), m_params(params), m_load(usableCores(params.generationThreads)) {}

GenerationExecutor::~GenerationExecutor() { m_worker.reset(); }

Result<std::unique_ptr<GenerationExecutor>> GenerationExecutor::create(const ServingAssets& assets,
                                                                       const ServingParams& params, TurnLock* turns,
                                                                       TraceRing* ring, std::function<void()> wake) {
  std::unique_ptr<GenerationExecutor> ex(new GenerationExecutor(assets, params));
  ex->m_elementTokens = std::make_unique<model::ElementTokens>(*assets.tokenizer);
  ex->m_wake = std::move(wake);
  model::RunnerParams rp;
  rp.deterministic = params.deterministic;
  rp.maxRunning = params.maxRunningSequences;
  rp.kvBudgetBytes = params.kvBudgetBytes;
  rp.prefixCache = params.prefixCache;
  rp.evictionPolicy = params.evictionPolicy;
  rp.hostKvBytes = params.hostKvBytes;
  rp.ring = ring;
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<model::ModelRunner> runner,
                       model::ModelRunner::create(assets.model, rp, assets.tokenizer));
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
                                                .graphReencode = params.graphReencode});
  return ex;
}

Result<model::SequenceRequest> GenerationExecutor::sequenceFor(const StageJob& job,
                                                                std::optional<model::DepPrompt>* dep) const {
  const WorkflowNode& node = *job.node;
  model::SequenceRequest q;
  if (m_params.dependencyAttention && !job.inputs->graphs.empty()) {
    RAG_ASSIGN_OR_RETURN(std::optional<model::DepPrompt> p,
                         model::dependencyPrompt(*m_elementTokens, node.promptTemplate, job.inputs->vars, job.inputs->graphs));
    if (p) {
      q.prompt = p->tokens();
      q.mask = p->mask();
      if (dep) *dep = std::move(p);
    }
  }
  if (q.prompt.empty()) {
    RAG_ASSIGN_OR_RETURN(std::vector<model::PromptPiece> pieces,
                         model::promptPieces(node.promptTemplate, job.inputs->vars, job.inputs->passages));
    model::PromptTokens prompt = model::tokenizePieces(*m_assets.tokenizer, pieces);
    if (prompt.tokens.empty()) return Status::invalidArgument("its prompt renders to no tokens");
    q.prompt = std::move(prompt.tokens);
  }
  q.sampling.maxTokens = static_cast<int32_t>(node.generation.maxTokens);
  q.sampling.temperature = static_cast<float>(node.generation.temperature);
  q.sampling.seed = job.requestId;
  q.sampling.stop = node.generation.stop;
  return q;
}

Status GenerationExecutor::start(const StageJob& job) {
  std::optional<model::DepPrompt> dep;
  RAG_ASSIGN_OR_RETURN(model::SequenceRequest seq, sequenceFor(job, &dep));
  Live& l = m_live[job.key];
  l = Live{.requestId = job.requestId, .speculative = job.speculative, .dependency = dep.has_value(), .prompt = seq.prompt};
  ++m_running;
  m_worker->add(GenerationJob{.key = job.key, .requestId = job.requestId, .request = std::move(seq),
                              .speculative = job.speculative, .dep = std::move(dep)});
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
                            .promptTokens = static_cast<int64_t>(l.prompt.size()),
                            .cachedPromptTokens = l.cachedPromptTokens};
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
  if (it == m_live.end() || it->second.dependency) return Adoption::None;  // a rollback would keep the old mask
  Result<model::SequenceRequest> seq = sequenceFor(real);
  if (!seq || !seq->mask.isCausal()) return Adoption::None;  // an error is reported by the real run
  Live& l = it->second;
  if (seq->prompt == l.prompt) {
    l.speculative = false;
    if (l.done) m_live.erase(it);
    return Adoption::Exact;
  }
  if (l.done) return Adoption::None;
  const auto diverge = std::mismatch(l.prompt.begin(), l.prompt.end(), seq->prompt.begin(), seq->prompt.end());
  const auto keep = static_cast<int64_t>(diverge.first - l.prompt.begin());
  if (keep == 0) return Adoption::None;
  l = Live{.requestId = l.requestId, .epoch = l.epoch + 1, .prompt = seq->prompt};
  m_worker->retarget(GenerationJob{.key = real.key, .requestId = real.requestId, .request = std::move(*seq)}, keep,
                     l.epoch);
  return Adoption::Retargeted;
}

}  // namespace rag::sched
