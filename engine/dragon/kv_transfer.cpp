#include "dragon/kv_transfer.h"

#include <algorithm>
#include <cstring>

namespace rag::dragon {


Result<std::vector<KvChunk>> computePrefixKv(model::ModelRunner& runner, std::span<const int32_t> tokens,
                                             size_t maxChunkBytes, uint32_t passages) {
  const memory::KvPoolParams& pp = runner.kvPool().params();
  KvChunk shape;
  shape.passages = passages;
  shape.layers = static_cast<uint32_t>(pp.layers);
  shape.kvHeads = static_cast<uint32_t>(pp.kvHeads);
  shape.headDim = static_cast<uint32_t>(pp.headDim);
  shape.elementBytes = static_cast<uint8_t>(pp.elementBytes);
  const auto n = static_cast<int64_t>(tokens.size());
  shape.totalTokens = static_cast<uint32_t>(n);
  if (n == 0) return std::vector<KvChunk>{shape};
  if (runner.hasWork())
    return Status::busy("the runner has sequences of its own running; the KV of a prefix is computed on an idle runner");

  model::SequenceRequest req;
  req.prompt.assign(tokens.begin(), tokens.end());
  req.sampling.maxTokens = 0;  // the prompt's KV only
  req.keepKv = true;
  RAG_ASSIGN_OR_RETURN(model::SeqId id, runner.add(std::move(req)));
  for (int guard = 0;; ++guard) {
    if (!runner.hasWork() || guard > 100000) break;
    for (const model::SeqEvent& e : runner.step().events)
      if (e.id == id && e.finished && e.reason != model::FinishReason::MaxTokens) {
        (void)runner.release(id);
        return Status::unavailable("the prefill of the passages stopped: " +
                                   std::string(model::finishReasonName(e.reason)) +
                                   " (the context window or the KV pool is full; use fewer documents)");
      }
  }
  Result<model::SequenceInfo> info = runner.info(id);
  if (!info || info->computed < n) {
    (void)runner.release(id);
    return Status::internal("the runner did not compute the KV of all " + std::to_string(n) + " passage tokens");
  }
  const int64_t rowBytes = shape.rowBytes();
  const int64_t tokenBytes = static_cast<int64_t>(pp.layers) * 2 * rowBytes;
  const int64_t perChunk = std::max<int64_t>(1, static_cast<int64_t>(maxChunkBytes) / tokenBytes);
  const memory::KvPool& pool = runner.kvPool();
  std::vector<KvChunk> out;
  for (int64_t first = 0; first < n; first += perChunk) {
    const int64_t m = std::min(perChunk, n - first);
    KvChunk c = shape;
    c.firstToken = static_cast<uint32_t>(first);
    for (int64_t i = 0; i < m; ++i) c.tokens.push_back(static_cast<uint32_t>(tokens[static_cast<size_t>(first + i)]));
    c.data.resize(static_cast<size_t>(m * tokenBytes));
    // Per layer: the m rows' keys, then their values.
    const std::vector<int64_t> slots = memory::slotsOf(info->blocks, first, m, pp.blockSize);
    uint8_t* dst = c.data.data();
    for (int32_t l = 0; l < pp.layers; ++l, dst += 2 * m * rowBytes)
      if (Status s = pool.readRows(l, slots, dst, dst + m * rowBytes); !s.isOk()) {
        (void)runner.release(id);
        return s;
      }
    out.push_back(std::move(c));
  }
  (void)runner.release(id);
  return out;
}

Result<model::KvHandle> importPrefixKv(model::ModelRunner& runner, const std::vector<KvChunk>& chunks) {
  model::KvHandle kv;
  if (chunks.empty()) return Status::invalidArgument("no KV chunks to import");
  memory::KvPool& pool = runner.kvPool();
  const memory::KvPoolParams& pp = pool.params();
  const uint32_t total = chunks.front().totalTokens;
  uint32_t next = 0;
  for (const KvChunk& c : chunks) {
    if (c.layers != static_cast<uint32_t>(pp.layers) || c.kvHeads != static_cast<uint32_t>(pp.kvHeads) ||
        c.headDim != static_cast<uint32_t>(pp.headDim) || c.elementBytes != static_cast<uint8_t>(pp.elementBytes))
      return Status::invalidArgument(
          "the received KV has " + std::to_string(c.layers) + " layers × " + std::to_string(c.kvHeads) + " heads × " +
          std::to_string(c.headDim) + " of " + std::to_string(c.elementBytes) + "-byte elements, this runner's pool " +
          std::to_string(pp.layers) + " × " + std::to_string(pp.kvHeads) + " × " + std::to_string(pp.headDim) + " of " +
          std::to_string(pp.elementBytes) + "; run both sides with the same --model and --dtype");
    if (c.totalTokens != total || c.firstToken != next)
      return Status::invalidArgument("the received KV chunks are not consecutive (a chunk starts at token " +
                                     std::to_string(c.firstToken) + ", expected " + std::to_string(next) + ")");
    next += static_cast<uint32_t>(c.tokens.size());
  }
  if (next != total)
    return Status::invalidArgument("the received KV covers " + std::to_string(next) + " of its " + std::to_string(total) +
                                   " tokens");
  if (total == 0) return kv;
  const int64_t vocab = model::modelFacts(runner.model()).config.vocabSize;
  for (const KvChunk& c : chunks)
    for (uint32_t t : c.tokens)
      if (t >= vocab)
        return Status::invalidArgument("the received KV is of token " + std::to_string(t) + ", outside this model's " +
                                       std::to_string(vocab) + "-token vocabulary");
  const int64_t bs = pp.blockSize;
  const auto nBlocks = static_cast<int32_t>((total + bs - 1) / bs);
  std::optional<std::vector<int32_t>> blocks = pool.allocate(nBlocks);
  if (!blocks)
    return Status::busy("the KV pool has no room for the " + std::to_string(total) +
                        " received tokens; raise the KV budget or use fewer documents");
  kv.blocks = std::move(*blocks);
  kv.numTokens = total;
  const int64_t rowBytes = chunks.front().rowBytes();
  for (const KvChunk& c : chunks) {
    const auto m = static_cast<int64_t>(c.tokens.size());
    const std::vector<int64_t> slots = memory::slotsOf(kv.blocks, c.firstToken, m, static_cast<int32_t>(bs));
    const uint8_t* src = c.data.data();
    for (int32_t l = 0; l < pp.layers; ++l, src += 2 * m * rowBytes)
      if (Status s = pool.writeRows(l, slots, src, src + m * rowBytes); !s.isOk()) {
        pool.release(kv.blocks);
        return s;
      }
    for (uint32_t t : c.tokens) kv.tokens.push_back(static_cast<int32_t>(t));
  }
  kv.positions.resize(static_cast<size_t>(total));
  for (uint32_t i = 0; i < total; ++i) kv.positions[i] = i;
  return kv;
}

}  // namespace rag::dragon
