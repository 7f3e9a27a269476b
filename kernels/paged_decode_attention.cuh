// Decode attention on the GPU: one query row per sequence over its whole context in the paged
// KV pool. CPU reference: rag::model::cpu::attendDecode (engine/model/decode_kernels.h);
// tests/kernels/test_paged_decode_attention.cpp compares the two.
//
// One block per (query head, sequence); its warps split the positions, each with an online
// softmax, and merge (attention_row.cuh). Grouped-query heads read KV head h / (heads / kvHeads).
#pragma once

#include <cstdint>

#include "paged_kv.h"
#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// For every sequence b < batch and head h < heads: out_b[h] = softmax(q_b[h] . K * scale) . V
// over positions [0, contextLens[b]) of its block table. All pointers in device memory: sequence
// b's query heads F32 [heads, headDim] at q + b * qStride, its output heads at out + b *
// outStride, its block table I32 at blockTables + b * tableStride (at least
// ceil(contextLens[b] / blockSize) entries), contextLens I32 [batch] (0: a zero output).
// Enqueued on `stream`. InvalidArgument for a shape the kernel cannot run (checkAttentionShape).
Status pagedDecodeAttention(const float* q, int64_t qStride, int64_t batch, int64_t heads, const DevicePagedKv& kv,
                            const int32_t* blockTables, int64_t tableStride, const int32_t* contextLens, float scale,
                            float* out, int64_t outStride, cudaStream_t stream);

}  // namespace rag::cuda
