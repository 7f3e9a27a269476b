// Block-wide reductions shared by the kernels (device code only; include from .cu files).
#pragma once

namespace rag::cuda {

__device__ __forceinline__ float warpSum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024), returned to every
// thread. Uses 33 floats of shared memory; safe to call repeatedly.
__device__ __forceinline__ float blockSum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? partial[lane] : 0.0f;
    s = warpSum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  const float out = total;
  __syncthreads();  // the next call may overwrite `total`
  return out;
}

}  // namespace rag::cuda
