// Rotate-half RoPE (HF convention) on the GPU, with the K/V pool write of the Llama step in the
// same launch. CPU reference: rag::model::cpu::rope (engine/model/decode_kernels.h) and the
// runner's pool copies; tests/kernels/test_rope.cpp compares them.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// For each of `rows` fused q|k|v rows (row r at qkv + r * rowStride): RoPE in place on its
// qHeads + kvHeads heads of width d (even), by cos and sin, F32 [rows, d] (row r its position's
// tables, the d/2 frequencies repeated twice, as cpu::rope takes them per row); then its k heads
// (rotated) and v heads copied to slots[r] of kPool and vPool (F32 [slots, kvHeads * d]), as
// kv_write.cuh does. Slots must be distinct within a call. All pointers in device memory;
// enqueued on `stream`. InvalidArgument for an odd d.
Status ropeKvWrite(float* qkv, int64_t rows, int64_t rowStride, int64_t qHeads, int64_t kvHeads, int64_t d,
                   const float* cos, const float* sin, const int32_t* slots, float* kPool, float* vPool,
                   cudaStream_t stream);

}  // namespace rag::cuda
