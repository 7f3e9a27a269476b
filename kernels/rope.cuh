// Rotate-half RoPE (HF convention) on the GPU, alone or followed by the K/V pool write of
// kv_write.cuh in the same launch. CPU reference: rag::model::cpu::rope
// (engine/model/decode_kernels.h) and the runner's pool copies; tests/kernels/test_rope.cpp
// compares them.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// In place on `heads` consecutive heads of width d (even) at the start of each of `rows` rows,
// row r at x + r * rowStride (a fused q|k|v row: rope the first nh + nkv heads). cos and sin are
// F32 [rows, d], row r its position's tables (the d/2 frequencies repeated twice), as
// cpu::rope takes them per row. All pointers in device memory; enqueued on `stream`.
Status rope(float* x, int64_t rows, int64_t rowStride, int64_t heads, int64_t d, const float* cos,
            const float* sin, cudaStream_t stream);

// rope() on the qHeads + kvHeads heads of each fused q|k|v row, then kvWrite() of its k heads
// (rotated) and v heads to slots[r] of kPool and vPool (F32 [slots, kvHeads * d]), in one launch:
// the Llama step's order. Slots must be distinct within a call.
Status ropeKvWrite(float* qkv, int64_t rows, int64_t rowStride, int64_t qHeads, int64_t kvHeads, int64_t d,
                   const float* cos, const float* sin, const int32_t* slots, float* kPool, float* vPool,
                   cudaStream_t stream);

}  // namespace rag::cuda
