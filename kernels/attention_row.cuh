// One query head attending over a sequence's paged KV, shared by the decode and prefill
// attention kernels (device code only; include from .cu files). Each of the block's Warps warps
// runs an online softmax (running max, running sum, running weighted V in registers) over every
// Warps-th position; the warps' partial results are merged by rescaling to the common max, so no
// score vector is stored and any context length fits. A warp's positions are a chain of
// dependent loads and shuffles, so a kernel with few rows (decode: one row per head) uses more
// warps per row to keep the SMs busy; prefill has rows enough and uses fewer.
#pragma once

#include <cmath>
#include <cstdint>

#include "block_reduce.cuh"
#include "paged_kv.h"

namespace rag::cuda {

inline constexpr int kPrefillAttentionWarps = 4;
inline constexpr int kDecodeAttentionWarps = 16;
inline constexpr int kAttentionPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);

// out[0, d) = softmax over the allowed positions p < ctx of (q . K[p] * scale), applied to V[p],
// for query head vector q (d floats) and KV head `kvHead`; `blocks` is the sequence's block
// table, `allowed` (null: every position) is uint8 [ctx], non-zero = attend. A row that may see
// no position gets zeros (as cpu::attendPrefill). Called by all 32 * Warps threads of a block,
// once per block.
template <int Warps>
__device__ __forceinline__ void attendRow(const float* q, const DevicePagedKv& kv, int64_t kvHead,
                                          const int32_t* blocks, int64_t ctx, const uint8_t* allowed, float scale,
                                          float* out) {
  __shared__ float warpMaxOf[Warps];
  __shared__ float warpSumOf[Warps];
  __shared__ float warpAcc[Warps][kMaxAttentionHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t d = kv.headDim, bs = kv.blockSize, stride = kv.kvHeads * d;

  float qr[kAttentionPerLane], acc[kAttentionPerLane];
#pragma unroll
  for (int j = 0; j < kAttentionPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    qr[j] = i < d ? q[i] * scale : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t p = warp; p < ctx; p += Warps) {
    if (allowed && !allowed[p]) continue;  // the same p for the whole warp: no divergence
    const int64_t row = (static_cast<int64_t>(blocks[p / bs]) * bs + p % bs) * stride + kvHead * d;
    const float* kr = kv.k + row;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kAttentionPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < d) s += qr[j] * kr[i];
    }
    s = warpSum(s);
    const float mNew = fmaxf(m, s);
    const float correction = expf(m - mNew);  // 0 for the first position (m = -inf)
    const float w = expf(s - mNew);
    l = l * correction + w;
    const float* vr = kv.v + row;
#pragma unroll
    for (int j = 0; j < kAttentionPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < d) acc[j] = acc[j] * correction + w * vr[i];
    }
    m = mNew;
  }
  if (lane == 0) {
    warpMaxOf[warp] = m;
    warpSumOf[warp] = l;
  }
#pragma unroll
  for (int j = 0; j < kAttentionPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    if (i < d) warpAcc[warp][i] = acc[j];
  }
  __syncthreads();
  float mAll = -INFINITY;
  for (int w = 0; w < Warps; ++w) mAll = fmaxf(mAll, warpMaxOf[w]);
  float factor[Warps];
  float lAll = 0.0f;
  for (int w = 0; w < Warps; ++w) {
    // A warp that saw no position (m = -inf) contributes nothing; so does every warp when the
    // row may see nothing (mAll = -inf), and the row is zeros.
    factor[w] = warpMaxOf[w] == -INFINITY ? 0.0f : expf(warpMaxOf[w] - mAll);
    lAll += warpSumOf[w] * factor[w];
  }
  const float inv = lAll > 0.0f ? 1.0f / lAll : 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < Warps; ++w) o += warpAcc[w][i] * factor[w];
    out[i] = o * inv;
  }
}

}  // namespace rag::cuda
