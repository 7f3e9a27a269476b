// The DRCG/KV baseline's payload: the K/V rows of a prefill, read out of one runner's KV pool
// into KvChunk messages (protocol.h) and written into another runner's pool as a KvHandle that a
// sequence takes as its cached prefix (SequenceRequest::cached, no recomputation).
//
//   // cloud: the KV of its passages' tokens, computed now, at positions 0..n-1
//   RAG_ASSIGN_OR_RETURN(std::vector<KvChunk> chunks, computePrefixKv(runner, passageTokens));
//   for (const KvChunk& c : chunks) ... send(MsgType::KvChunk, c) ...
//   // device: the received chunks into its own pool
//   RAG_ASSIGN_OR_RETURN(model::KvHandle kv, importPrefixKv(runner, chunks));
//   DocInput in{.tokens = ownPassagesAndQuestion, .cached = kv};   // the decoder's sequence
//   ... dec.start({in}) ...; runner.releaseKv(kv);                 // the sequence holds its own reference
//
// Sizes are the pool's own: per token, layers × 2 (K and V) × kvHeads × headDim × elementBytes
// (F32: 4, BF16: 2), nothing compressed; a chunk carries at most maxChunkBytes of rows.
//
// Why a prefix: the rows of a causal prompt's first n tokens depend on those tokens only, so
// the cloud can compute them alone and the device continue after them, and in deterministic
// mode (RunnerParams::deterministic) the device's logits are bit-identical to a device that
// prefilled the same tokens itself. Rows of passages placed elsewhere would need RoPE
// re-encoding and would not see the passages before them (Block-Attention), a different model
// input.
//
// Not thread-safe: the runner's thread calls these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dragon/protocol.h"
#include "model/runner.h"

namespace rag::dragon {

inline constexpr size_t kDefaultKvChunkBytes = 4u << 20;

// Prefills `tokens` at positions 0..n-1 as a KV-only sequence on `runner` and returns its rows
// in chunks of at most maxChunkBytes of K/V (at least one token each); the sequence is released.
// `passages` is recorded in every chunk (KvChunk::passages). No tokens: one empty chunk. Busy when the runner has other work (its events
// would be lost); the runner's refusal (context window, pool size) otherwise.
Result<std::vector<KvChunk>> computePrefixKv(model::ModelRunner& runner, std::span<const int32_t> tokens,
                                             size_t maxChunkBytes = kDefaultKvChunkBytes, uint32_t passages = 0);

// Writes the rows of `chunks` (consecutive, covering the whole sequence) into fresh blocks of
// `runner`'s pool. The handle holds one reference per block: pass it in SequenceRequest::cached,
// then releaseKv it. An empty sequence gives an empty handle (numTokens 0). InvalidArgument when
// the chunks' KV shape or element size is not the pool's (another model or dtype), or they leave
// gaps; Busy when the pool has no room.
Result<model::KvHandle> importPrefixKv(model::ModelRunner& runner, const std::vector<KvChunk>& chunks);

}  // namespace rag::dragon
