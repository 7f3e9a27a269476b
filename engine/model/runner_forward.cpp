// The runner's forward passes over one step's rows: forwardItems on libtorch ops (any dtype or
// device; the reference), forwardKernels on the CPU kernels of decode_kernels.h (F32) and
// forwardBackend on a StepBackend (a GPU's).
#include <cmath>
#include <cstring>
#include <limits>

#include "model/decode_kernels.h"
#include "model/runner_impl.h"

namespace rag::model {

namespace {

// Which positions each row of a prefill chunk attends to: uint8 [n, start + n] (row r: the first
// start + r + 1 entries, from its mask), or empty when every row sees all positions before it.
std::vector<uint8_t> allowedRows(const Item& it) {
  const int64_t ctx = it.start + it.n;
  bool causalRows = true;
  for (int64_t i = it.start; i < ctx && causalRows; ++i) causalRows = it.seq->fullRow(i);
  if (causalRows) return {};
  std::vector<uint8_t> allowed(static_cast<size_t>(it.n * ctx), 0);
  for (int64_t r = 0; r < it.n; ++r)
    it.seq->mask.fillRow(it.start + r, std::span<uint8_t>(allowed).subspan(static_cast<size_t>(r * ctx),
                                                                           static_cast<size_t>(it.start + r + 1)));
  return allowed;
}

}  // namespace

// One forward over the rows of `items` on libtorch ops (any dtype or device; the reference the
// kernels are tested against); the first `decodeItems` are single rows that see their
// whole context (attended in one padded gather), the rest are attended one item at a time
// under their masks. Writes every row's K/V into the pool; returns the logits of `logitRows`
// (item index, row within the item) as F32 [rows, vocab].
torch::Tensor ModelRunner::Impl::forwardItems(std::span<const Item> items, int64_t decodeItems,
                                              const std::vector<std::pair<size_t, int64_t>>& logitRows) {
  const LlamaWeights& w = model->weights();
  const int64_t nh = cfg.numAttentionHeads, nkv = cfg.numKeyValueHeads, d = cfg.headDim;
  const int64_t g = nh / nkv;
  const float inf = std::numeric_limits<float>::infinity();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));

  std::vector<int64_t> tok, pos, wslot, rowStart;
  for (const Item& it : items) {
    rowStart.push_back(static_cast<int64_t>(tok.size()));
    for (int64_t i = it.start; i < it.start + it.n; ++i) {
      tok.push_back(it.seq->tokens[static_cast<size_t>(i)]);
      pos.push_back(it.seq->positions[static_cast<size_t>(i)]);
      wslot.push_back(slot(*it.seq, i));
    }
  }
  const int64_t n = static_cast<int64_t>(tok.size());
  torch::Tensor tokT = torch::tensor(tok, torch::kLong);
  torch::Tensor wslotT = torch::tensor(wslot, torch::kLong);
  auto [cos, sin] = ropeTables(torch::tensor(pos, torch::kLong), d, cfg.ropeTheta);
  cos = cos.unsqueeze(1);  // [n, 1, d]: broadcast over heads
  sin = sin.unsqueeze(1);

  // Decode group: context slots padded to the longest, pads masked out.
  const int64_t nd = decodeItems;
  torch::Tensor dSlots, dMask;
  int64_t maxCtx = 0;
  if (nd > 0) {
    for (int64_t b = 0; b < nd; ++b) maxCtx = std::max(maxCtx, items[static_cast<size_t>(b)].start + 1);
    std::vector<int64_t> sl(static_cast<size_t>(nd * maxCtx), 0);
    std::vector<float> mk(static_cast<size_t>(nd * maxCtx), 0.0f);
    for (int64_t b = 0; b < nd; ++b) {
      const Item& it = items[static_cast<size_t>(b)];
      for (int64_t j = 0; j < maxCtx; ++j) {
        if (j <= it.start) sl[static_cast<size_t>(b * maxCtx + j)] = slot(*it.seq, j);
        else mk[static_cast<size_t>(b * maxCtx + j)] = -inf;
      }
    }
    dSlots = torch::tensor(sl, torch::kLong);
    dMask = torch::from_blob(mk.data(), {nd, 1, 1, maxCtx}, torch::kFloat32).clone();
  }
  // Masked items: their context slots and additive masks, built once for all layers.
  std::vector<torch::Tensor> mSlots, mMasks;
  for (size_t k = static_cast<size_t>(nd); k < items.size(); ++k) {
    const Item& it = items[k];
    const int64_t ctx = it.start + it.n;
    mSlots.push_back(slots(*it.seq, 0, ctx));
    std::vector<uint8_t> allowed = allowedRows(it);
    if (allowed.empty()) {
      mMasks.push_back(it.n == 1 ? torch::Tensor() : torch::full({it.n, ctx}, -inf).triu(it.start + 1));
    } else {
      torch::Tensor a = torch::from_blob(allowed.data(), {it.n, ctx}, torch::kUInt8).to(torch::kBool);
      mMasks.push_back(torch::zeros({it.n, ctx}).masked_fill(a.logical_not(), -inf));
    }
  }

  cos = cos.to(model->dtype());  // once per step, not per layer
  sin = sin.to(model->dtype());
  torch::Tensor x = w.embed.index_select(0, tokT);  // [n, hidden]
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LlamaLayerWeights& lw = w.layers[l];
    const FusedLayer& fl = fused[l];
    torch::Tensor h = model->rmsNorm(x, lw.inputNorm);
    torch::Tensor qkv = matmulT(h, fl.qkvT, fl.qkvBias).view({n, nh + 2 * nkv, d});
    torch::Tensor qk = applyRope(qkv.narrow(1, 0, nh + nkv), cos, sin);  // q and k heads at once
    torch::Tensor q = qk.narrow(1, 0, nh);
    torch::Tensor k = qk.narrow(1, nh, nkv);
    torch::Tensor v = qkv.narrow(1, nh + nkv, nkv);
    kPool[l].index_copy_(0, wslotT, k);
    vPool[l].index_copy_(0, wslotT, v);

    std::vector<torch::Tensor> outs;
    if (nd > 0) {
      torch::Tensor qd = q.narrow(0, 0, nd).view({nd, nkv, g, d});
      torch::Tensor kd = kPool[l].index_select(0, dSlots).view({nd, maxCtx, nkv, d});
      torch::Tensor vd = vPool[l].index_select(0, dSlots).view({nd, maxCtx, nkv, d});
      torch::Tensor s = torch::matmul(qd, kd.permute({0, 2, 3, 1})).to(torch::kFloat32) * scale + dMask;
      torch::Tensor a = torch::softmax(s, -1).to(vd.scalar_type());
      outs.push_back(torch::matmul(a, vd.transpose(1, 2)).reshape({nd, nh * d}));  // [nd, nkv, g, d]
    }
    for (size_t k2 = static_cast<size_t>(nd); k2 < items.size(); ++k2) {
      const Item& it = items[k2];
      const size_t mi = k2 - static_cast<size_t>(nd);
      torch::Tensor qi = q.narrow(0, rowStart[k2], it.n).view({it.n, nkv, g, d}).permute({1, 2, 0, 3});
      torch::Tensor ki = kPool[l].index_select(0, mSlots[mi]);  // [ctx, nkv, d]
      torch::Tensor vi = vPool[l].index_select(0, mSlots[mi]);
      torch::Tensor s = torch::matmul(qi, ki.permute({1, 2, 0}).unsqueeze(1)).to(torch::kFloat32) * scale;
      if (mMasks[mi].defined()) s = s + mMasks[mi];
      torch::Tensor a = torch::softmax(s, -1).to(vi.scalar_type());
      torch::Tensor o = torch::matmul(a, vi.permute({1, 0, 2}).unsqueeze(1));  // [nkv, g, n, d]
      outs.push_back(o.permute({2, 0, 1, 3}).reshape({it.n, nh * d}));
    }
    torch::Tensor o = outs.size() == 1 ? outs[0] : torch::cat(outs, 0);
    x = x + matmulT(o, fl.oT, lw.oBias);
    torch::Tensor gateUp = matmulT(model->rmsNorm(x, lw.postNorm), fl.gateUpT, fl.gateUpBias);
    const int64_t inter = gateUp.size(1) / 2;
    x = x + matmulT(torch::silu(gateUp.narrow(1, 0, inter)) * gateUp.narrow(1, inter, inter), fl.downT,
                    lw.downBias);
  }
  if (logitRows.empty()) return {};
  std::vector<int64_t> rows;
  for (auto [item, r] : logitRows) rows.push_back(rowStart[item] + r);
  torch::Tensor last = model->rmsNorm(x.index_select(0, torch::tensor(rows, torch::kLong)), w.norm);
  return torch::mm(last, lmHeadT).to(torch::kFloat32).contiguous();
}

// Attention of decode rows (item k's query heads at q + k * qStride) over their whole
// context, read in place from the paged pool, split over the team: out is [items, nh * d].
void ModelRunner::Impl::attendDecodeRows(std::span<const Item> items, size_t layer, const float* q,
                                         int64_t qStride, float* out) {
  const int64_t nh = cfg.numAttentionHeads, d = cfg.headDim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  int64_t maxCtx = 0;
  for (const Item& it : items) maxCtx = std::max(maxCtx, it.start + 1);
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t perThread = nh * maxCtx;
  parallelRange(*team, n, perThread * d, 1 << 15, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> scratchScores;  // one per thread of the team
    scratchScores.resize(static_cast<size_t>(perThread));
    float* scores = scratchScores.data();
    for (int64_t r = b; r < e; ++r) {
      const Item& it = items[static_cast<size_t>(r)];
      const cpu::PagedKv kv{f32(kPool[layer]), f32(vPool[layer]), it.seq->blocks.data(), bs,
                            cfg.numKeyValueHeads, d};
      cpu::attendDecode(q + r * qStride, 0, nh, nh, kv, it.start + 1, scale, scores, out + r * nh * d);
    }
  });
}

// forwardItems on raw F32 arrays through decode_kernels.h (useKernels): every step, decode rows
// and prefill chunks alike. The matmuls read their weights once for all rows in registers-
// blocked tiles (2-8x libtorch's sgemm at the few rows of a small step, about 1.4x at a few
// hundred), decode rows attend in place from the pool and each prefill chunk through
// cpu::attendPrefill, and no step pays libtorch's per-op overhead. Only `logitRows` go through
// the LM head. Returns their logits, F32 [rows, vocab] (undefined when none is asked for).
torch::Tensor ModelRunner::Impl::forwardKernels(std::span<const Item> items, int64_t decodeItems,
                                                const std::vector<std::pair<size_t, int64_t>>& logitRows) {
  const LlamaWeights& w = model->weights();
  const int64_t hid = cfg.hiddenSize, nh = cfg.numAttentionHeads, nkv = cfg.numKeyValueHeads, d = cfg.headDim;
  const int64_t qkvW = (nh + 2 * nkv) * d, inter = cfg.intermediateSize, vocab = cfg.vocabSize;
  const float eps = static_cast<float>(cfg.rmsNormEps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const size_t nd = static_cast<size_t>(decodeItems);
  std::vector<int64_t> rowStart;  // item k's rows begin at row rowStart[k]
  int64_t n = 0;
  for (const Item& it : items) {
    rowStart.push_back(n);
    n += it.n;
  }
  DecodeScratch& S = scratch;
  auto size = [](std::vector<float>& v, int64_t count) {
    v.resize(static_cast<size_t>(count));
    return v.data();
  };
  float* x = size(S.x, n * hid);
  float* h = size(S.h, n * hid);
  float* qkv = size(S.qkv, n * qkvW);
  float* att = size(S.att, n * nh * d);
  float* gateUp = size(S.gateUp, n * 2 * inter);
  float* act = size(S.act, n * inter);
  float* cosT = size(S.cos, n * d);
  float* sinT = size(S.sin, n * d);
  // Prefill chunks: which positions each row sees (empty: all before it), built once for all
  // layers, and the attention scratch for the largest chunk.
  std::vector<std::vector<uint8_t>> allowed;
  int64_t attentionScratch = 0;
  for (size_t k = nd; k < items.size(); ++k) {
    allowed.push_back(allowedRows(items[k]));
    attentionScratch = std::max(attentionScratch, cpu::attendPrefillScratch(items[k].n, items[k].start + items[k].n, d));
  }
  float* attnScratch = size(S.attention, attentionScratch);
  // y[:, 0 .. outW) for `rows` rows, whole 64-output tiles split over threads.
  auto linear = [&](const float* in, int64_t rows, int64_t inW, const torch::Tensor& wt, const torch::Tensor& bias,
                    int64_t outW, float* y, bool accumulate) {
    const float* wp = f32(wt);
    const float* bp = f32(bias);
    constexpr int64_t tile = 64;
    parallelRange(*team, ceilDiv(outW, tile), rows * inW * tile, 1 << 16, [&](int64_t t0, int64_t t1) {
      cpu::linear(in, rows, inW, wp, outW, bp, t0 * tile, std::min(outW, t1 * tile), y, outW, accumulate);
    });
  };

  const float* embed = f32(w.embed);
  for (size_t k = 0; k < items.size(); ++k) {
    const Item& it = items[k];
    for (int64_t j = 0; j < it.n; ++j) {
      const int64_t r = rowStart[k] + j;
      const size_t i = static_cast<size_t>(it.start + j);
      std::memcpy(x + r * hid, embed + static_cast<int64_t>(it.seq->tokens[i]) * hid,
                  static_cast<size_t>(hid) * sizeof(float));
      const double p = static_cast<double>(it.seq->positions[i]);
      for (int64_t f = 0; f < d / 2; ++f) {
        const double a = p * ropeInvFreq[static_cast<size_t>(f)];
        cosT[r * d + f] = cosT[r * d + f + d / 2] = static_cast<float>(std::cos(a));
        sinT[r * d + f] = sinT[r * d + f + d / 2] = static_cast<float>(std::sin(a));
      }
    }
  }
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LlamaLayerWeights& lw = w.layers[l];
    const FusedLayer& fl = fused[l];
    cpu::rmsNorm(x, f32(lw.inputNorm), n, hid, eps, h);
    linear(h, n, hid, fl.qkvT, fl.qkvBias, qkvW, qkv, false);
    auto* kp = static_cast<float*>(pool->keys(static_cast<int32_t>(l)));
    auto* vp = static_cast<float*>(pool->values(static_cast<int32_t>(l)));
    for (size_t k = 0; k < items.size(); ++k) {
      const Item& it = items[k];
      for (int64_t j = 0; j < it.n; ++j) {
        const int64_t r = rowStart[k] + j;
        float* row = qkv + r * qkvW;
        cpu::rope(row, nh + nkv, d, cosT + r * d, sinT + r * d);  // q and k heads
        const int64_t at = slot(*it.seq, it.start + j) * nkv * d;
        std::memcpy(kp + at, row + nh * d, static_cast<size_t>(nkv * d) * sizeof(float));
        std::memcpy(vp + at, row + (nh + nkv) * d, static_cast<size_t>(nkv * d) * sizeof(float));
      }
    }
    if (nd > 0) attendDecodeRows(items.first(nd), l, qkv, qkvW, att);  // rows 0 .. nd-1
    for (size_t k = nd; k < items.size(); ++k) {
      const Item& it = items[k];
      const std::vector<uint8_t>& a = allowed[k - nd];
      const cpu::PagedKv kv{kp, vp, it.seq->blocks.data(), bs, nkv, d};
      cpu::attendPrefill(qkv + rowStart[k] * qkvW, qkvW, it.n, it.start, nh, kv, a.empty() ? nullptr : a.data(), scale,
                         attnScratch, att + rowStart[k] * nh * d, nh * d);
    }
    linear(att, n, nh * d, fl.oT, lw.oBias, hid, x, true);
    cpu::rmsNorm(x, f32(lw.postNorm), n, hid, eps, h);
    linear(h, n, hid, fl.gateUpT, fl.gateUpBias, 2 * inter, gateUp, false);
    cpu::siluMul(gateUp, n, inter, act);
    linear(act, n, inter, fl.downT, lw.downBias, hid, x, true);
  }
  if (logitRows.empty()) return {};
  // The final norm and the LM head for the rows that want logits only, gathered into h.
  const int64_t m = static_cast<int64_t>(logitRows.size());
  for (int64_t j = 0; j < m; ++j) {
    const auto [item, r] = logitRows[static_cast<size_t>(j)];
    cpu::rmsNorm(x + (rowStart[item] + r) * hid, f32(w.norm), 1, hid, eps, h + j * hid);
  }
  torch::Tensor logits = torch::empty({m, vocab}, torch::kFloat32);
  linear(h, m, hid, lmHeadT, torch::Tensor(), vocab, logits.data_ptr<float>(), false);
  return logits;
}

// forwardItems on the runner's StepBackend: the items as the backend's StepItems (spans into the
// sequences, the prefill chunks' masks built here), the logits it returns as a tensor. A failure
// is kept in deviceError and answered with an undefined tensor, by every later step too.
torch::Tensor ModelRunner::Impl::forwardBackend(std::span<const Item> items, int64_t decodeItems,
                                                const std::vector<std::pair<size_t, int64_t>>& logitRows,
                                                std::vector<int32_t>* greedyTokens) {
  if (greedyTokens) greedyTokens->clear();
  if (deviceError.isOk() && !pool->storeStatus().isOk()) deviceError = pool->storeStatus();
  if (!deviceError.isOk()) return {};
  std::vector<std::vector<uint8_t>> allowed(items.size());
  std::vector<StepItem> rows;
  rows.reserve(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    const Item& it = items[k];
    if (static_cast<int64_t>(k) >= decodeItems) allowed[k] = allowedRows(it);
    const auto start = static_cast<size_t>(it.start), n = static_cast<size_t>(it.n);
    rows.push_back({.tokens = std::span<const int32_t>(it.seq->tokens).subspan(start, n),
                    .positions = std::span<const int64_t>(it.seq->positions).subspan(start, n),
                    .start = it.start,
                    .blocks = it.seq->blocks,
                    .allowed = allowed[k]});
  }
  std::vector<StepLogitRow> want;
  want.reserve(logitRows.size());
  int64_t greedyRows = 0;
  for (auto [item, r] : logitRows) {
    const Seq& s = *items[item].seq;
    const bool greedyOnly =
        greedyTokens && !s.allLogits && !s.logprobs && !s.span && s.sampler && s.sampler->greedy();
    want.push_back({.item = item, .row = r, .greedyOnly = greedyOnly});
    greedyRows += greedyOnly;
  }
  Result<StepOutput> out = backend->forward(rows, decodeItems, want);
  if (!out.isOk()) {
    deviceError = out.status().withContext("the " + backend->description() + " step");
    return {};
  }
  // The rows whose logits came back: every one, or (with tokens) all but the greedy ones.
  const int64_t wanted = static_cast<int64_t>(want.size());
  const int64_t logitCount = out->tokens.empty() ? wanted : wanted - greedyRows;
  if ((!out->tokens.empty() && static_cast<int64_t>(out->tokens.size()) != wanted) ||
      static_cast<int64_t>(out->logits.size()) != logitCount * cfg.vocabSize) {
    deviceError = Status::internal("the " + backend->description() + " step returned " +
                                   std::to_string(out->tokens.size()) + " tokens and " +
                                   std::to_string(out->logits.size()) + " logits for " + std::to_string(wanted) +
                                   " rows (" + std::to_string(greedyRows) + " greedy)");
    return {};
  }
  if (!out->tokens.empty())
    for (size_t j = 0; j < want.size(); ++j) greedyTokens->push_back(want[j].greedyOnly ? out->tokens[j] : kNoDeviceToken);
  if (logitCount == 0) return {};
  auto* owned = new std::vector<float>(std::move(out->logits));
  return torch::from_blob(owned->data(), {logitCount, cfg.vocabSize}, [owned](void*) { delete owned; }, torch::kFloat32);
}

}  // namespace rag::model
