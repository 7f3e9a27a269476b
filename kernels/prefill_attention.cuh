// Prefill attention on the GPU: a chunk of consecutive query rows of one sequence over its
// paged KV, causal, optionally under a mask. CPU reference: rag::model::cpu::attendPrefill
// (engine/model/decode_kernels.h); tests/kernels/test_prefill_attention.cpp compares the two.
//
// One block per (query head, row); each row runs the decode kernel's online softmax
// (attention_row.cuh) over the positions before it. Grouped-query heads read KV head
// h / (heads / kvHeads).
#pragma once

#include <cstdint>

#include "paged_kv.h"
#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// n rows at positions start .. start + n - 1: row r attends to positions [0, start + r] of the
// sequence (block table `blocks`, I32, at least ceil((start + n) / blockSize) entries), all of
// them or those its row of `allowed` (uint8 [n, start + n] row-major, non-zero = attend; null:
// all) allows; a row allowed nothing gets zeros. Row r's query heads F32 [heads, headDim] are at
// q + r * qStride, its output heads at out + r * outStride. All pointers in device memory;
// enqueued on `stream`. The chunk's own K/V must be in the pool already (kvWrite).
Status prefillAttention(const float* q, int64_t qStride, int64_t n, int64_t start, int64_t heads,
                        const DevicePagedKv& kv, const int32_t* blocks, const uint8_t* allowed, float scale, float* out,
                        int64_t outStride, cudaStream_t stream);

}  // namespace rag::cuda
