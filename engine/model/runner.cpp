// ModelRunner (model/runner.h): sequences and their life cycle, the batch plan of a step,
// sampling and stop rules, and the torch-free model access. The forward passes are in
// runner_forward.cpp, the shared internals in runner_impl.h, the KV memory in engine/memory/.
#include "model/runner.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "core/clock.h"
#include "core/heap.h"
#include "model/decode_kernels.h"
#include "model/logit_ops.h"
#include "model/runner_impl.h"

namespace rag::model {

namespace detail {
namespace {

// Copies K/V rows `src` -> `dst` (pool slots) of every layer of an F32 pool, through the pool's
// row access (host memory or a device backend's). With positions, the keys are re-encoded on the
// way from fromPos[t] to toPos[t] (values unchanged), as reencodeKeys does: rotated by the shift
// (Shift) or back to 0 and on to toPos (ViaZero), one rotation table per distinct angle (a
// segment placed as a whole has one). src and dst may be the same rows (re-encoding in place).
Status copyRowsF32(memory::KvPool& pool, std::span<const int64_t> src, std::span<const int64_t> dst,
                   std::span<const int64_t> fromPos, std::span<const int64_t> toPos, ReencodeMode mode, double theta) {
  const memory::KvPoolParams& pp = pool.params();
  const int64_t d = pp.headDim, row = static_cast<int64_t>(pp.kvHeads) * d, n = static_cast<int64_t>(src.size());
  const bool rotate = !fromPos.empty(), viaZero = rotate && mode == ReencodeMode::ViaZero;
  std::vector<double> inv(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i)
    inv[static_cast<size_t>(i)] = std::exp(-std::log(theta) * static_cast<double>(2 * i) / static_cast<double>(d));
  // Per row: cos | sin of its first rotation, then (ViaZero) of its second.
  const int64_t per = viaZero ? 4 * d : 2 * d;
  std::vector<float> tables(rotate ? static_cast<size_t>(n * per) : 0);
  auto table = [&](int64_t pos, float* cs) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = static_cast<double>(pos) * inv[static_cast<size_t>(i)];
      cs[i] = cs[i + d / 2] = static_cast<float>(std::cos(a));
      cs[d + i] = cs[d + i + d / 2] = static_cast<float>(std::sin(a));
    }
  };
  auto angle = [&](int64_t t) {  // the first rotation's position
    const int64_t from = fromPos[static_cast<size_t>(t)];
    return viaZero ? -from : toPos[static_cast<size_t>(t)] - from;
  };
  for (int64_t t = 0; rotate && t < n; ++t) {
    float* cs = tables.data() + t * per;
    if (t > 0 && angle(t) == angle(t - 1)) std::copy(cs - per, cs - per + 2 * d, cs);
    else table(angle(t), cs);
    if (viaZero) table(toPos[static_cast<size_t>(t)], cs + 2 * d);
  }
  std::vector<float> k(static_cast<size_t>(n * row)), v(static_cast<size_t>(n * row));
  for (int32_t l = 0; l < pp.layers; ++l) {
    RAG_RETURN_IF_ERROR(pool.readRows(l, src, k.data(), v.data()));
    for (int64_t t = 0; rotate && t < n; ++t) {
      const float* cs = tables.data() + t * per;
      cpu::rope(k.data() + t * row, pp.kvHeads, d, cs, cs + d);
      if (viaZero) cpu::rope(k.data() + t * row, pp.kvHeads, d, cs + 2 * d, cs + 3 * d);
    }
    RAG_RETURN_IF_ERROR(pool.writeRows(l, dst, k.data(), v.data()));
  }
  return Status::ok();
}
std::mutex g_teamMutex;
std::shared_ptr<ForkJoin> g_team = std::make_shared<ForkJoin>(1);
}  // namespace

std::shared_ptr<ForkJoin> computeTeam() {
  std::lock_guard lock(g_teamMutex);
  return g_team;
}
}  // namespace detail


std::string_view finishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "none";
    case FinishReason::MaxTokens: return "max_tokens";
    case FinishReason::StopToken: return "stop_token";
    case FinishReason::StopString: return "stop_string";
    case FinishReason::ContextFull: return "context_full";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "none";
}

StepResult ModelRunner::Impl::step() {
  torch::NoGradGuard noGrad;
  team = computeTeam();
  Stopwatch total;
  StepResult result;
  result.events = std::move(pendingEvents);
  pendingEvents.clear();

  // 1. Plan rows for admitted sequences: decode rows first, then prefill chunks.
  int64_t budget = params.maxBatchTokens;
  std::vector<Item> decode, prefill;
  auto plan = [&](Seq& s) -> bool {
    const int64_t chunk = std::min(s.pending(), budget);
    if (chunk <= 0) return true;
    if (!reserve(s, s.computed + chunk)) return false;
    budget -= chunk;
    const bool single = chunk == 1 && s.fullRow(s.computed);
    (single ? decode : prefill).push_back({&s, s.computed, chunk});
    return true;
  };
  // The planned item of `s` in decode or prefill, if any.
  auto plannedItem = [&](const Seq& s) -> std::pair<std::vector<Item>*, std::vector<Item>::iterator> {
    for (auto* list : {&decode, &prefill}) {
      auto it = std::find_if(list->begin(), list->end(), [&](const Item& i) { return i.seq == &s; });
      if (it != list->end()) return {list, it};
    }
    return {nullptr, {}};
  };
  auto unplan = [&](const Seq& s) {
    if (auto [list, it] = plannedItem(s); list) {
      budget += it->n;
      list->erase(it);
    }
  };
  const std::vector<SeqId> order = running;
  for (int pass = 0; pass < 2; ++pass) {  // decode rows, then prefill chunks
    for (SeqId id : order) {
      auto found = seqs.find(id);
      if (found == seqs.end() || found->second.state != SeqState::Running) continue;  // preempted
      Seq& s = found->second;
      if ((pass == 0) != (s.pending() == 1) || s.pending() <= 0 || budget <= 0) continue;
      bool ok = plan(s);
      while (!ok && running.back() != s.id) {
        // Out of blocks: preempt the most recently admitted other sequence (recompute later).
        Seq& victim = seqs.at(running.back());
        unplan(victim);
        freeKv(victim);
        victim.state = SeqState::Waiting;
        running.pop_back();
        waiting.push_front(victim.id);
        ++result.stats.preempted;
        ok = plan(s);
      }
      if (!ok && running.size() == 1 && !plannedItem(s).first) {
        // Alone and still not fitting: the pool cannot hold this sequence any longer.
        finish(s, FinishReason::ContextFull, &result.events, nullptr);
      }
    }
  }
  // Admit waiting sequences with what is left (no preemption for them).
  while (!waiting.empty() && budget > 0 && static_cast<int32_t>(running.size()) < params.maxRunning) {
    Seq& s = seqs.at(waiting.front());
    matchPrefix(s);
    if (!plan(s)) {
      freeKv(s);  // a waiting sequence holds no blocks; it matches again when admitted
      break;
    }
    waiting.pop_front();
    s.state = SeqState::Running;
    running.push_back(s.id);
  }

  std::vector<Item> items = decode;
  items.insert(items.end(), prefill.begin(), prefill.end());
  result.stats.sequences = static_cast<int32_t>(items.size());
  result.stats.decodeRows = static_cast<int32_t>(decode.size());
  for (const Item& it : prefill) result.stats.prefillRows += static_cast<int32_t>(it.n);
  if (items.empty()) {
    result.stats.totalSeconds = total.elapsedSeconds();
    return result;
  }

  // 2. Which rows need logits: all rows for allLogits, else the last row of a finished prompt.
  auto wantsRows = [](const Item& it) -> std::pair<int64_t, int64_t> {  // [first, count)
    if (it.seq->allLogits) return {0, it.n};
    if (it.start + it.n == static_cast<int64_t>(it.seq->tokens.size())) return {it.n - 1, 1};
    return {0, 0};
  };

  // 3. Forward. Deterministic mode: every row alone, in order, through the masked path.
  Stopwatch fwd;
  std::vector<torch::Tensor> itemLogits(items.size());
  // A greedy sequence's next token as the backend chose it (kNoDeviceToken: sampled here).
  std::vector<int32_t> itemToken(items.size(), kNoDeviceToken);
  if (params.deterministic) {
    for (size_t k = 0; k < items.size(); ++k) {
      auto [first, count] = wantsRows(items[k]);
      std::vector<torch::Tensor> rows;
      for (int64_t r = 0; r < items[k].n; ++r) {
        Item one{items[k].seq, items[k].start + r, 1};
        const bool want = r >= first && r < first + count;
        torch::Tensor lg = forward(std::span<const Item>(&one, 1), 0,
                                   want ? std::vector<std::pair<size_t, int64_t>>{{0, 0}}
                                        : std::vector<std::pair<size_t, int64_t>>{});
        if (!deviceError.isOk()) break;
        if (want) rows.push_back(lg);
      }
      if (!deviceError.isOk()) break;
      if (!rows.empty()) itemLogits[k] = torch::cat(rows, 0);
    }
  } else {
    std::vector<std::pair<size_t, int64_t>> want;
    for (size_t k = 0; k < items.size(); ++k) {
      auto [first, count] = wantsRows(items[k]);
      for (int64_t r = first; r < first + count; ++r) want.emplace_back(k, r);
    }
    // On a backend the greedy rows come back as their tokens: their vocabularies of logits never
    // leave the device (tokens[w]: logit row w's token, or kNoDeviceToken where its logits came).
    std::vector<int32_t> tokens;
    const auto nd = static_cast<int64_t>(decode.size());
    torch::Tensor lg = backend ? forwardBackend(items, nd, want, &tokens) : forward(items, nd, want);
    int64_t row = 0;
    size_t w = 0;
    for (size_t k = 0; k < items.size() && deviceError.isOk(); ++k) {
      auto [first, count] = wantsRows(items[k]);
      if (count == 0) continue;
      if (!tokens.empty() && tokens[w] != kNoDeviceToken) {  // a greedy row: one per sequence
        itemToken[k] = tokens[w++];
        continue;
      }
      itemLogits[k] = lg.narrow(0, row, count);
      row += count;
      w += static_cast<size_t>(count);
    }
  }
  result.stats.forwardSeconds = fwd.elapsedSeconds();
  if (!params.deterministic) {
    double rows = 0, pairs = 0;
    for (const Item& it : items) {
      const double n = static_cast<double>(it.n);
      rows += n;
      pairs += n * static_cast<double>(it.start) + n * (n + 1) / 2;
    }
    recomputeCost.add(rows, pairs, result.stats.forwardSeconds);
  }

  // 4. Advance, sample, apply stop rules.
  for (size_t k = 0; k < items.size(); ++k) {
    Seq& s = *items[k].seq;
    if (!deviceError.isOk()) {  // the backend failed: nothing of this step was computed
      SeqEvent ev;
      ev.id = s.id;
      finish(s, FinishReason::Error, nullptr, &ev);
      result.events.push_back(std::move(ev));
      continue;
    }
    s.computed += items[k].n;
    if (!s.promptInserted && s.computed >= s.promptLength) {
      insertPrefix(s);  // other prompts may reuse it while this one decodes
      s.promptInserted = true;
    }
    SeqEvent ev;
    ev.id = s.id;
    const torch::Tensor& lg = itemLogits[k];
    if (lg.defined() && s.allLogits) {  // copied out only when asked: vocab floats per row
      ev.logitRows = lg.size(0);
      ev.logits.assign(lg.data_ptr<float>(), lg.data_ptr<float>() + lg.numel());
    }
    if (s.pending() == 0) {
      if (s.generated() >= s.sampling.maxTokens) {
        finish(s, FinishReason::MaxTokens, nullptr, &ev);
      } else {
        const int64_t vocab = cfg.vocabSize;
        auto sampled = [&] {
          const float* last = lg.data_ptr<float>() + (lg.size(0) - 1) * vocab;
          std::span<const float> row(last, static_cast<size_t>(vocab));
          if (!s.span) return s.sampler->sample(row);
          spanScratch.assign(row.begin(), row.end());
          s.span->mask(spanScratch, s.sampling.stop, s.sampling.stopTokenIds, s.sampling.copyFloor);
          return s.sampler->sample(spanScratch);
        };
        const int32_t t = itemToken[k] != kNoDeviceToken ? itemToken[k] : sampled();
        if (s.logprobs && t >= 0) {  // logits came back for this row (greedyOnly excludes it)
          const float* last = lg.data_ptr<float>() + (lg.size(0) - 1) * vocab;
          ev.logprob = tokenLogprob(last, static_cast<size_t>(vocab), t, logprobScratch);
        }
        if (s.span && t >= 0) s.span->advance(t);
        if (t < 0) {  // every logit NaN or -inf: a numerical fault of the model, not of the runner
          finish(s, FinishReason::Error, nullptr, &ev);
          result.events.push_back(std::move(ev));
          continue;
        }
        s.tokens.push_back(t);
        s.positions.push_back(s.positions.back() + 1);
        ev.tokens.push_back(t);
        if (!s.firstTokenReported) {
          ev.promptCachedTokens = s.cachedTokens;
          s.firstTokenReported = true;
        }
        const bool stopString = emitText(s, ev);
        const bool stopToken =
            (!s.sampling.ignoreEos && std::find(eosIds.begin(), eosIds.end(), t) != eosIds.end()) ||
            std::find(s.sampling.stopTokenIds.begin(), s.sampling.stopTokenIds.end(), t) !=
                s.sampling.stopTokenIds.end();
        if (stopString) finish(s, FinishReason::StopString, nullptr, &ev);
        else if (stopToken) finish(s, FinishReason::StopToken, nullptr, &ev);
        else if (s.generated() >= s.sampling.maxTokens) finish(s, FinishReason::MaxTokens, nullptr, &ev);
        else if (s.positions.back() + 1 > cfg.maxPositionEmbeddings) finish(s, FinishReason::ContextFull, nullptr, &ev);
        if (ev.finished && s.stop && ev.reason != FinishReason::StopString) {
          std::string rest = s.stop->flush();
          s.text += rest;
          ev.text += rest;
        }
      }
    }
    if (!ev.tokens.empty() || ev.finished || ev.logitRows > 0) result.events.push_back(std::move(ev));
  }
  // Finished sequences without kept KV are forgotten once reported.
  for (const SeqEvent& e : result.events)
    if (e.finished) {
      auto it = seqs.find(e.id);
      if (it != seqs.end() && (!it->second.keepKv || it->second.reason == FinishReason::Cancelled)) seqs.erase(it);
    }
  result.stats.totalSeconds = total.elapsedSeconds();
  return result;
}

// ---- Torch-free model access ------------------------------------------------------------------

namespace {
Result<torch::ScalarType> parseDtype(std::string_view dtype) {
  if (dtype == "f32") return torch::kFloat32;
  if (dtype == "bf16") return torch::kBFloat16;
  return Status::invalidArgument("dtype '" + std::string(dtype) + "' is not supported; use f32 or bf16");
}
}  // namespace

Result<std::shared_ptr<const LlamaModel>> loadModel(const std::filesystem::path& dir, std::string_view dtype) {
  RAG_ASSIGN_OR_RETURN(torch::ScalarType t, parseDtype(dtype));
  RAG_ASSIGN_OR_RETURN(LlamaModel m, LlamaModel::load(dir, t));
  return std::make_shared<const LlamaModel>(std::move(m));
}

Result<std::shared_ptr<const LlamaModel>> randomModel(const LlamaConfig& config, uint64_t seed, std::string_view dtype) {
  RAG_ASSIGN_OR_RETURN(torch::ScalarType t, parseDtype(dtype));
  RAG_ASSIGN_OR_RETURN(LlamaModel m, LlamaModel::initRandom(config, seed));
  return std::make_shared<const LlamaModel>(t == torch::kFloat32 ? std::move(m) : m.to(t));
}

Status saveModel(const LlamaModel& model, const std::filesystem::path& dir) { return model.save(dir); }

// Element-wise work runs on one thread and matrix products on `threads` BLAS threads. With
// libtorch's OpenMP pool and OpenBLAS's pthread pool both at full width, each pool's spinning
// idle workers starve the other's (measured here: batch-1 decode 3-4x slower, most of the time
// in sched_yield and libgomp spin loops).
std::shared_ptr<ForkJoin> sharedComputeTeam() { return detail::computeTeam(); }

void setComputeThreads(int threads) {
  {
    std::lock_guard lock(detail::g_teamMutex);
    if (detail::g_team->size() != std::max(1, threads)) detail::g_team = std::make_shared<ForkJoin>(std::max(1, threads));
  }
  torch::set_num_threads(1);
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    fn(std::max(1, threads));
}

ModelFacts modelFacts(const LlamaModel& model) {
  ModelFacts f;
  f.config = model.config();
  f.bytesPerElement = model.dtype() == torch::kFloat32 ? 4 : 2;
  for (const torch::Tensor& p : model.parameters()) f.parameters += p.numel();
  f.weightBytes = f.parameters * f.bytesPerElement;
  return f;
}

// ---- ModelRunner -------------------------------------------------------------------------------

ModelRunner::ModelRunner(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
ModelRunner::~ModelRunner() = default;

Result<std::unique_ptr<ModelRunner>> ModelRunner::create(std::shared_ptr<const LlamaModel> model,
                                                         const RunnerParams& params,
                                                         std::shared_ptr<const Tokenizer> tokenizer) {
  if (!model) return Status::invalidArgument("ModelRunner needs a model");
  if (params.blockSize <= 0 || params.maxBatchTokens <= 0 || params.maxRunning <= 0 || params.maxQueued <= 0)
    return Status::invalidArgument("runner parameters blockSize, maxBatchTokens, maxRunning and maxQueued must be positive");
  keepFreedMemoryInHeap();  // a step's tensors reuse the last step's memory (no page faults)
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->tokenizer = std::move(tokenizer);
  impl->params = params;
  impl->cfg = impl->model->config();
  impl->bs = params.blockSize;
  const LlamaConfig& c = impl->cfg;
  const auto dtype = impl->model->dtype();
  const int64_t elem = dtype == torch::kFloat32 ? 4 : 2;
  const int64_t bytesPerBlock = 2 * c.numHiddenLayers * params.blockSize * c.numKeyValueHeads * c.headDim * elem;
  int64_t blocks = params.numBlocks > 0 ? params.numBlocks : params.kvBudgetBytes / bytesPerBlock;
  if (blocks < 1)
    return Status::invalidArgument("the KV budget of " + std::to_string(params.kvBudgetBytes) +
                                   " bytes holds no block of " + std::to_string(bytesPerBlock) +
                                   " bytes; raise kvBudgetBytes");
  blocks = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max() / params.blockSize);
  impl->params.numBlocks = static_cast<int32_t>(blocks);
  if (params.hostKvBytes < 0 || (params.hostKvBytes > 0 && params.hostKvBytes < bytesPerBlock))
    return Status::invalidArgument("a host KV tier of " + std::to_string(params.hostKvBytes) + " bytes holds no block of " +
                                   std::to_string(bytesPerBlock) + " bytes; give at least one block or 0 for none");
  auto stack = [](std::initializer_list<torch::Tensor> parts) {
    for (const torch::Tensor& t : parts)
      if (!t.defined()) return torch::Tensor();
    return torch::cat(std::vector<torch::Tensor>(parts), 0).contiguous();
  };
  auto transposed = [](const torch::Tensor& t) { return t.t().contiguous(); };
  const LlamaWeights& lw = impl->model->weights();
  for (const LlamaLayerWeights& l : lw.layers)
    impl->fused.push_back({transposed(stack({l.q, l.k, l.v})), stack({l.qBias, l.kBias, l.vBias}),
                           transposed(l.o), transposed(stack({l.gate, l.up})), stack({l.gateBias, l.upBias}),
                           transposed(l.down)});
  impl->lmHeadT = transposed(lw.lmHead);
  if (params.backend) {
    if (dtype != torch::kFloat32 || !lw.embed.device().is_cpu())
      return Status::invalidArgument("a device backend runs F32 models loaded on the CPU; load the model with dtype f32");
    StepWeights sw;
    sw.lmHeadT = f32(impl->lmHeadT);
    std::vector<torch::Tensor> keep;  // contiguous copies, alive while the backend copies them
    auto held = [&](const torch::Tensor& t) -> const float* {
      if (!t.defined()) return nullptr;
      keep.push_back(t.contiguous());
      return f32(keep.back());
    };
    sw.embed = held(lw.embed);
    sw.norm = held(lw.norm);
    for (size_t l = 0; l < lw.layers.size(); ++l) {
      const LlamaLayerWeights& w = lw.layers[l];
      const Impl::FusedLayer& fl = impl->fused[l];
      sw.layers.push_back({.inputNorm = held(w.inputNorm), .qkvT = f32(fl.qkvT), .qkvBias = f32(fl.qkvBias),
                           .oT = f32(fl.oT), .oBias = held(w.oBias), .postNorm = held(w.postNorm),
                           .gateUpT = f32(fl.gateUpT), .gateUpBias = f32(fl.gateUpBias), .downT = f32(fl.downT),
                           .downBias = held(w.downBias)});
    }
    RAG_ASSIGN_OR_RETURN(impl->backend, params.backend(c, sw, params.blockSize, static_cast<int32_t>(blocks)));
    // The device holds its copy: the runner's transposed one is not needed.
    impl->fused.clear();
    impl->lmHeadT = torch::Tensor();
  }
  RAG_ASSIGN_OR_RETURN(impl->pool,
                       memory::KvPool::create({.layers = static_cast<int32_t>(c.numHiddenLayers),
                                               .kvHeads = static_cast<int32_t>(c.numKeyValueHeads),
                                               .headDim = static_cast<int32_t>(c.headDim),
                                               .blockSize = params.blockSize,
                                               .computeBlocks = static_cast<int32_t>(blocks),
                                               .hostBlocks = static_cast<int32_t>(std::min<int64_t>(
                                                   params.hostKvBytes / bytesPerBlock, std::numeric_limits<int32_t>::max())),
                                               .elementBytes = static_cast<int32_t>(elem),
                                               .ring = params.ring,
                                               .computeStore = impl->backend.get()}));
  for (int32_t l = 0; l < c.numHiddenLayers && !impl->backend; ++l) {
    const std::vector<int64_t> shape{blocks * params.blockSize, c.numKeyValueHeads, c.headDim};
    impl->kPool.push_back(torch::from_blob(impl->pool->keys(l), shape, dtype));
    impl->vPool.push_back(torch::from_blob(impl->pool->values(l), shape, dtype));
  }
  if (params.prefixCache) {
    RAG_ASSIGN_OR_RETURN(std::unique_ptr<memory::EvictionPolicy> policy, memory::makeEvictionPolicy(params.evictionPolicy, params.lacrAlpha));
    impl->cache = std::make_unique<memory::RadixCache>(*impl->pool, std::move(policy));
    impl->pool->setReclaimer([c = impl->cache.get()](int32_t n) { return c->evict(n); });
    impl->cache->setRecomputeCost([m = impl.get()](int64_t prefix, int64_t n) { return m->recomputeCost.seconds(prefix, n); });
  }
  bool contiguous = lw.embed.is_contiguous() && lw.norm.is_contiguous();
  for (const LlamaLayerWeights& l : lw.layers)
    for (const torch::Tensor& t : {l.inputNorm, l.postNorm, l.oBias, l.downBias})
      contiguous = contiguous && (!t.defined() || t.is_contiguous());
  impl->useKernels = !impl->backend && params.kernels && dtype == torch::kFloat32 && lw.embed.device().is_cpu() && contiguous;
  for (int64_t i = 0; i < c.headDim / 2; ++i)
    impl->ropeInvFreq.push_back(std::exp(static_cast<double>(2 * i) / static_cast<double>(c.headDim) * -std::log(c.ropeTheta)));
  impl->eosIds = c.eosTokenIds;
  if (impl->tokenizer && impl->tokenizer->eosId() &&
      std::find(impl->eosIds.begin(), impl->eosIds.end(), *impl->tokenizer->eosId()) == impl->eosIds.end())
    impl->eosIds.push_back(*impl->tokenizer->eosId());
  return std::unique_ptr<ModelRunner>(new ModelRunner(std::move(impl)));
}

Result<SeqId> ModelRunner::add(SequenceRequest req) {
  Impl& m = *m_impl;
  const LlamaConfig& c = m.cfg;
  if (static_cast<int32_t>(m.seqs.size()) >= m.params.maxQueued)
    return Status::busy("the runner holds " + std::to_string(m.seqs.size()) +
                        " sequences (maxQueued); retry when some finish");
  if (req.prompt.empty())
    return Status::invalidArgument("empty prompt: a sequence needs at least one token to compute");
  for (int32_t t : req.prompt)
    if (t < 0 || t >= c.vocabSize)
      return Status::invalidArgument("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                     std::to_string(c.vocabSize) + ")");
  RAG_RETURN_IF_ERROR(req.sampling.validate());
  if (!req.sampling.stop.empty() && !m.tokenizer)
    return Status::invalidArgument("stop strings need a tokenizer; create the runner with one or use stopTokenIds");
  if (!req.sampling.copyFrom.empty() && (!m.tokenizer || m.tokenizer->kind() != TokenizerKind::ByteLevelBpe))
    return Status::invalidArgument("copy-constrained decoding (copyFrom) needs the model's byte-level BPE tokenizer; "
                                   "create the runner with it");
  int64_t cachedTokens = 0;
  for (const KvSegment& seg : req.cached) {
    if (seg.kv.numTokens <= 0 || static_cast<int64_t>(seg.kv.tokens.size()) != seg.kv.numTokens ||
        static_cast<int64_t>(seg.kv.positions.size()) != seg.kv.numTokens ||
        static_cast<int64_t>(seg.kv.blocks.size()) != ceilDiv(seg.kv.numTokens, m.bs))
      return Status::invalidArgument("a cached KV segment is inconsistent (tokens, positions and blocks disagree); pass a handle from retainKv");
    for (int32_t b : seg.kv.blocks)
      if (b < 0 || b >= m.pool->capacity() || m.pool->refCount(b) <= 0)
        return Status::invalidArgument("a cached KV segment refers to block " + std::to_string(b) +
                                       ", which is not held; was the handle released?");
    cachedTokens += seg.kv.numTokens;
  }
  const int64_t total = cachedTokens + static_cast<int64_t>(req.prompt.size());
  if (total >= c.maxPositionEmbeddings)
    return Status::invalidArgument("prompt of " + std::to_string(total) + " tokens does not fit the context window of " +
                                   std::to_string(c.maxPositionEmbeddings) + " tokens (max_position_embeddings); shorten it");
  if (ceilDiv(total + 1, m.bs) > m.pool->capacity())
    return Status::invalidArgument("prompt of " + std::to_string(total) + " tokens needs more KV blocks than the pool holds (" +
                                   std::to_string(m.pool->capacity()) + " of " + std::to_string(m.bs) +
                                   " tokens); raise the KV budget");
  RAG_RETURN_IF_ERROR(req.mask.validate(total));

  Seq s;
  s.id = m.nextId;
  s.mask = std::move(req.mask);
  s.sampling = req.sampling;
  s.sampler.emplace(s.sampling);
  if (!s.sampling.stop.empty()) s.stop.emplace(s.sampling.stop);
  if (!s.sampling.copyFrom.empty()) s.span.emplace(SpanSource::build(s.sampling.copyFrom), m.tokenPieces());
  s.keepKv = req.keepKv;
  s.allLogits = req.allLogits;
  s.logprobs = req.logprobs;

  // Place the cached segments: the first one shares its blocks when its keys stay where they
  // are; the others (and re-encoded ones) are copied into blocks of their own.
  for (const KvSegment& seg : req.cached) {
    const int64_t offset = static_cast<int64_t>(s.tokens.size());
    const bool move = seg.position >= 0 && seg.position != seg.kv.positions[0];
    if (offset == 0 && !move) {
      s.blocks = seg.kv.blocks;
      for (int32_t b : s.blocks) m.pool->retain(b);
    } else {
      if (!m.reserve(s, offset + seg.kv.numTokens)) {
        m.pool->release(s.blocks);
        return Status::busy("the KV pool has no room to import " + std::to_string(seg.kv.numTokens) +
                                         " cached tokens; retry when sequences finish");
      }
      const auto bs = static_cast<int32_t>(m.bs);
      const std::vector<int64_t> src = memory::slotsOf(seg.kv.blocks, 0, seg.kv.numTokens, bs);
      const std::vector<int64_t> dst = memory::slotsOf(s.blocks, offset, seg.kv.numTokens, bs);
      Status copied = Status::ok();
      if (m.pool->params().elementBytes == 4) {  // F32 pool: copy and rotate rows directly
        std::vector<int64_t> to;
        for (int64_t i = 0; move && i < seg.kv.numTokens; ++i) to.push_back(seg.position + i);
        copied = detail::copyRowsF32(*m.pool, src, dst, move ? std::span<const int64_t>(seg.kv.positions) : std::span<const int64_t>(),
                                     to, req.reencode, c.ropeTheta);
      } else {
        torch::Tensor srcT = torch::tensor(src, torch::kLong), dstT = torch::tensor(dst, torch::kLong);
        torch::NoGradGuard noGrad;
        for (size_t l = 0; l < m.kPool.size(); ++l) {
          torch::Tensor k = m.kPool[l].index_select(0, srcT);
          if (move) {
            torch::Tensor from = torch::tensor(seg.kv.positions, torch::kLong);
            k = reencodeKeys(k, from, torch::arange(seg.position, seg.position + seg.kv.numTokens, torch::kLong),
                             c.ropeTheta, req.reencode == ReencodeMode::ViaZero);
          }
          m.kPool[l].index_copy_(0, dstT, k);
          m.vPool[l].index_copy_(0, dstT, m.vPool[l].index_select(0, srcT));
        }
      }
      if (!copied.isOk()) {
        m.pool->release(s.blocks);
        return copied;
      }
    }
    s.tokens.insert(s.tokens.end(), seg.kv.tokens.begin(), seg.kv.tokens.end());
    for (int64_t i = 0; i < seg.kv.numTokens; ++i)
      s.positions.push_back(move ? seg.position + i : seg.kv.positions[static_cast<size_t>(i)]);
    s.computed = static_cast<int64_t>(s.tokens.size());
  }
  int64_t p = req.firstPosition >= 0 ? req.firstPosition : (s.positions.empty() ? 0 : s.positions.back() + 1);
  if (p + static_cast<int64_t>(req.prompt.size()) >= c.maxPositionEmbeddings) {
    m.pool->release(s.blocks);
    return Status::invalidArgument("prompt positions reach " + std::to_string(p + static_cast<int64_t>(req.prompt.size())) +
                                   ", beyond the context window of " + std::to_string(c.maxPositionEmbeddings));
  }
  for (int32_t t : req.prompt) {
    s.tokens.push_back(t);
    s.positions.push_back(p++);
  }
  s.promptLength = static_cast<int64_t>(s.tokens.size());
  s.prefixEligible = req.cached.empty() && req.firstPosition < 0 && s.mask.isCausal();
  const SeqId id = m.nextId++;
  m.waiting.push_back(id);
  m.seqs.emplace(id, std::move(s));
  return id;
}

StepResult ModelRunner::step() { return m_impl->step(); }

bool ModelRunner::hasWork() const {
  return !m_impl->running.empty() || !m_impl->waiting.empty() || !m_impl->pendingEvents.empty();
}

Status ModelRunner::cancel(SeqId id) {
  Seq* s = m_impl->find(id);
  if (!s) return m_impl->notFound(id);
  if (s->state == SeqState::Finished) {
    m_impl->freeKv(*s);
    m_impl->seqs.erase(id);
    return Status::ok();
  }
  m_impl->finish(*s, FinishReason::Cancelled, &m_impl->pendingEvents, nullptr);
  m_impl->seqs.erase(id);
  return Status::ok();
}

Status ModelRunner::preempt(SeqId id) {
  Seq* s = m_impl->find(id);
  if (!s) return m_impl->notFound(id);
  if (s->state != SeqState::Running) return Status::ok();  // waiting or finished: nothing held to give back
  m_impl->freeKv(*s);
  m_impl->dropFromQueues(id);
  s->state = SeqState::Waiting;
  m_impl->waiting.push_front(id);
  return Status::ok();
}

Status ModelRunner::release(SeqId id) {
  Seq* s = m_impl->find(id);
  if (!s) return m_impl->notFound(id);
  if (s->state != SeqState::Finished)
    return Status::invalidArgument("sequence " + std::to_string(id) + " is still running; cancel it instead");
  m_impl->freeKv(*s);
  m_impl->seqs.erase(id);
  return Status::ok();
}

namespace {
void reopen(ModelRunner::Impl& m, Seq& s) {
  if (s.state != SeqState::Finished) return;
  s.state = SeqState::Running;
  s.reason = FinishReason::None;
  m.running.push_back(s.id);
}
}  // namespace

Status ModelRunner::truncate(SeqId id, int64_t n) {
  Impl& m = *m_impl;
  Seq* s = m.find(id);
  if (!s) return m.notFound(id);
  if (n < 1 || n > static_cast<int64_t>(s->tokens.size()))
    return Status::invalidArgument("cannot truncate sequence " + std::to_string(id) + " of " +
                                   std::to_string(s->tokens.size()) + " tokens to " + std::to_string(n));
  if (s->state == SeqState::Finished && !s->keepKv && s->blocks.empty() && n > 0)
    return Status::invalidArgument("sequence " + std::to_string(id) + " finished without keepKv; its KV is gone");
  s->tokens.resize(static_cast<size_t>(n));
  s->positions.resize(static_cast<size_t>(n));
  if (n < s->promptLength) {
    s->promptLength = n;
    auto& starts = s->mask.blockStarts;
    starts.erase(std::remove_if(starts.begin(), starts.end(), [&](int32_t b) { return b >= n; }), starts.end());
    if (static_cast<int64_t>(s->mask.parents.size()) > n) s->mask.parents.resize(static_cast<size_t>(n));
    s->promptInserted = false;
  }
  if (n <= s->promptLength) s->firstTokenReported = false;
  // Token n-1 is recomputed so that its logits produce the next token.
  s->computed = std::min(s->computed, n - 1);
  const auto keep = static_cast<size_t>(ceilDiv(s->computed, m.bs));
  if (s->blocks.size() > keep) {
    m.pool->release(std::span<const int32_t>(s->blocks).subspan(keep));
    s->blocks.resize(keep);
  }
  m.recomputeText(*s);
  if (s->state == SeqState::Waiting) return Status::ok();
  reopen(m, *s);
  return Status::ok();
}

Status ModelRunner::append(SeqId id, std::span<const int32_t> tokens, bool asPrompt) {
  Impl& m = *m_impl;
  Seq* s = m.find(id);
  if (!s) return m.notFound(id);
  if (asPrompt && s->generated() > 0)
    return Status::invalidArgument("sequence " + std::to_string(id) + " has generated " + std::to_string(s->generated()) +
                                   " tokens; truncate it to its prompt before extending the prompt");
  for (int32_t t : tokens)
    if (t < 0 || t >= m.cfg.vocabSize)
      return Status::invalidArgument("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                     std::to_string(m.cfg.vocabSize) + ")");
  if (s->positions.back() + static_cast<int64_t>(tokens.size()) >= m.cfg.maxPositionEmbeddings)
    return Status::invalidArgument("appending " + std::to_string(tokens.size()) + " tokens passes the context window of " +
                                   std::to_string(m.cfg.maxPositionEmbeddings));
  for (int32_t t : tokens) {
    s->tokens.push_back(t);
    s->positions.push_back(s->positions.back() + 1);
  }
  if (asPrompt) {
    s->promptLength = static_cast<int64_t>(s->tokens.size());
    s->promptInserted = false;
    s->sampler.emplace(s->sampling);  // a new prompt samples as a fresh sequence would
  }
  m.recomputeText(*s);
  reopen(m, *s);
  return Status::ok();
}

Status ModelRunner::reencode(SeqId id, int64_t begin, int64_t end, int64_t newPosition, ReencodeMode mode) {
  Impl& m = *m_impl;
  Seq* s = m.find(id);
  if (!s) return m.notFound(id);
  if (begin < 0 || begin >= end || end > s->computed)
    return Status::invalidArgument("re-encode range [" + std::to_string(begin) + ", " + std::to_string(end) +
                                   ") is not within the " + std::to_string(s->computed) + " computed tokens");
  if (newPosition < 0 || newPosition + (end - begin) > m.cfg.maxPositionEmbeddings)
    return Status::invalidArgument("re-encoded positions must lie within the context window");
  // Copy-on-write the blocks being rewritten.
  const int64_t saved = s->computed;
  s->computed = begin;
  const bool ok = m.reserve(*s, end);
  s->computed = saved;
  if (!ok) return Status::busy("no free KV blocks to copy shared blocks before re-encoding");
  const std::vector<int64_t> from(s->positions.begin() + begin, s->positions.begin() + end);
  std::vector<int64_t> to(static_cast<size_t>(end - begin));
  for (int64_t i = 0; i < end - begin; ++i) to[static_cast<size_t>(i)] = newPosition + i;
  const std::vector<int64_t> slots = memory::slotsOf(s->blocks, begin, end - begin, static_cast<int32_t>(m.bs));
  if (m.pool->params().elementBytes == 4) {
    RAG_RETURN_IF_ERROR(detail::copyRowsF32(*m.pool, slots, slots, from, to, mode, m.cfg.ropeTheta));
  } else {
    torch::NoGradGuard noGrad;
    torch::Tensor sl = torch::tensor(slots, torch::kLong);
    torch::Tensor fromT = torch::tensor(from, torch::kLong), toT = torch::tensor(to, torch::kLong);
    for (torch::Tensor& k : m.kPool)
      k.index_copy_(0, sl, reencodeKeys(k.index_select(0, sl), fromT, toT, m.cfg.ropeTheta, mode == ReencodeMode::ViaZero));
  }
  for (int64_t i = begin; i < end; ++i) s->positions[static_cast<size_t>(i)] = newPosition + (i - begin);
  return Status::ok();
}

Result<KvHandle> ModelRunner::retainKv(SeqId id, int64_t numTokens) {
  Impl& m = *m_impl;
  Seq* s = m.find(id);
  if (!s) return m.notFound(id);
  if (numTokens <= 0 || numTokens > s->computed)
    return Status::invalidArgument("sequence " + std::to_string(id) + " has " + std::to_string(s->computed) +
                                   " computed tokens; cannot share " + std::to_string(numTokens));
  KvHandle h;
  h.numTokens = numTokens;
  h.blocks.assign(s->blocks.begin(), s->blocks.begin() + ceilDiv(numTokens, m.bs));
  for (int32_t b : h.blocks) m.pool->retain(b);
  h.tokens.assign(s->tokens.begin(), s->tokens.begin() + numTokens);
  h.positions.assign(s->positions.begin(), s->positions.begin() + numTokens);
  return h;
}

void ModelRunner::releaseKv(KvHandle& h) {
  m_impl->pool->release(h.blocks);
  h = {};
}

Result<SequenceInfo> ModelRunner::info(SeqId id) const {
  const Seq* s = m_impl->find(id);
  if (!s) return m_impl->notFound(id);
  SequenceInfo i;
  i.tokens = s->tokens;
  i.positions = s->positions;
  i.promptLength = s->promptLength;
  i.computed = s->computed;
  i.blocks = s->blocks;
  i.text = s->text;
  i.finished = s->state == SeqState::Finished;
  i.reason = s->reason;
  return i;
}

KvPoolStats ModelRunner::kvStats() const { return m_impl->pool->stats(); }
memory::PrefixCache* ModelRunner::prefixCache() { return m_impl->cache.get(); }
const memory::PrefixCache* ModelRunner::prefixCache() const { return m_impl->cache.get(); }
memory::KvPool& ModelRunner::kvPool() { return *m_impl->pool; }
const memory::RecomputeCost& ModelRunner::recomputeCost() const { return m_impl->recomputeCost; }

const RunnerParams& ModelRunner::params() const { return m_impl->params; }
const LlamaModel& ModelRunner::model() const { return *m_impl->model; }

Result<std::vector<float>> ModelRunner::keys(SeqId id, int32_t layer, int64_t n) const {
  const Impl& m = *m_impl;
  const Seq* s = m.find(id);
  if (!s) return m.notFound(id);
  if (layer < 0 || layer >= static_cast<int32_t>(m.cfg.numHiddenLayers) || n < 0 || n > s->computed)
    return Status::invalidArgument("keys: layer or token count out of range");
  const std::vector<int64_t> slots = memory::slotsOf(s->blocks, 0, n, static_cast<int32_t>(m.bs));
  if (m.pool->params().elementBytes == 4) {  // host memory or a device backend's
    const int64_t row = m.cfg.numKeyValueHeads * m.cfg.headDim;
    std::vector<float> k(static_cast<size_t>(n * row)), v(static_cast<size_t>(n * row));
    RAG_RETURN_IF_ERROR(m.pool->readRows(layer, slots, k.data(), v.data()));
    return k;
  }
  torch::Tensor k = m.kPool[static_cast<size_t>(layer)].index_select(0, torch::tensor(slots, torch::kLong)).to(torch::kFloat32).contiguous();
  return std::vector<float>(k.data_ptr<float>(), k.data_ptr<float>() + k.numel());
}

std::string ModelRunner::device() const {
  return m_impl->backend ? m_impl->backend->description() : std::string("cpu");
}

Status ModelRunner::deviceStatus() const {
  if (!m_impl->deviceError.isOk()) return m_impl->deviceError;
  return m_impl->pool->storeStatus();
}

}  // namespace rag::model
