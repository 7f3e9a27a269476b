// Writes rows of K and V into one layer of the paged KV pool on the GPU. CPU reference: the two
// memcpys per row in ModelRunner's kernel forward (engine/model/runner_forward.cpp);
// tests/kernels/test_kv_write.cpp compares the two.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// For r < rows: kPool[slots[r]] = k[r], vPool[slots[r]] = v[r], each `width` floats
// (kvHeads * headDim). Row r of k is at k + r * srcStride, of v at v + r * srcStride (a fused
// q|k|v row: k = qkv + nh * d, v = qkv + (nh + nkv) * d, srcStride = (nh + 2 nkv) * d). The
// pools are F32 [numBlocks * blockSize, width] (slot = blocks[p / bs] * bs + p % bs), slots I32
// [rows]; all in device memory, enqueued on `stream`. Slots must be distinct within a call.
Status kvWrite(const float* k, const float* v, int64_t srcStride, int64_t rows, int64_t width,
               const int32_t* slots, float* kPool, float* vPool, cudaStream_t stream);

}  // namespace rag::cuda
