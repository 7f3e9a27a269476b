#include "rope.cuh"

#include <cuda_runtime.h>

#include <string>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 128;

// Rotates the pair (v[i], v[i + d/2]) of one head by the row's tables c, s.
__device__ __forceinline__ float2 rotatePair(const float* v, int64_t i, int64_t half, const float* c, const float* s) {
  const float a = v[i], b = v[i + half];
  return make_float2(a * c[i] - b * s[i], b * c[i + half] + a * s[i + half]);
}

// One block per row; a thread per (head, i < d/2) pair rotates v[i] and v[i + d/2].
__global__ void ropeKernel(float* x, int64_t rowStride, int64_t heads, int64_t d, const float* cos,
                           const float* sin) {
  const int64_t r = blockIdx.x, half = d / 2;
  float* row = x + r * rowStride;
  const float* c = cos + r * d;
  const float* s = sin + r * d;
  for (int64_t t = threadIdx.x; t < heads * half; t += blockDim.x) {
    const int64_t h = t / half, i = t % half;
    float* v = row + h * d;
    const float2 o = rotatePair(v, i, half, c, s);
    v[i] = o.x;
    v[i + half] = o.y;
  }
}

// ropeKernel over the q and k heads, then the k heads (rotated) and the v heads of the row
// copied to its pool slot: one launch where a step had two.
__global__ void ropeKvWriteKernel(float* qkv, int64_t rowStride, int64_t qHeads, int64_t kvHeads, int64_t d,
                                  const float* cos, const float* sin, const int32_t* slots, float* kPool,
                                  float* vPool) {
  const int64_t r = blockIdx.x, half = d / 2, width = kvHeads * d;
  float* row = qkv + r * rowStride;
  const float* c = cos + r * d;
  const float* s = sin + r * d;
  float* kDst = kPool + static_cast<int64_t>(slots[r]) * width;
  for (int64_t t = threadIdx.x; t < (qHeads + kvHeads) * half; t += blockDim.x) {
    const int64_t h = t / half, i = t % half;
    float* v = row + h * d;
    const float2 o = rotatePair(v, i, half, c, s);
    v[i] = o.x;
    v[i + half] = o.y;
    if (h >= qHeads) {
      kDst[(h - qHeads) * d + i] = o.x;
      kDst[(h - qHeads) * d + i + half] = o.y;
    }
  }
  const float* vSrc = row + (qHeads + kvHeads) * d;
  float* vDst = vPool + static_cast<int64_t>(slots[r]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) vDst[i] = vSrc[i];
}

}  // namespace

Status rope(float* x, int64_t rows, int64_t rowStride, int64_t heads, int64_t d, const float* cos,
            const float* sin, cudaStream_t stream) {
  if (d % 2 != 0) return Status::invalidArgument("GPU rope: head width " + std::to_string(d) + " is odd");
  if (rows <= 0 || heads <= 0 || d <= 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::invalidArgument("GPU rope: too many rows for one launch");
  ropeKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, rowStride, heads, d, cos, sin);
  return fromCuda(cudaGetLastError(), "launching ropeKernel");
}

Status ropeKvWrite(float* qkv, int64_t rows, int64_t rowStride, int64_t qHeads, int64_t kvHeads, int64_t d,
                   const float* cos, const float* sin, const int32_t* slots, float* kPool, float* vPool,
                   cudaStream_t stream) {
  if (d % 2 != 0) return Status::invalidArgument("GPU rope: head width " + std::to_string(d) + " is odd");
  if (rows <= 0 || kvHeads <= 0 || d <= 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::invalidArgument("GPU rope: too many rows for one launch");
  ropeKvWriteKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(qkv, rowStride, qHeads, kvHeads, d, cos, sin,
                                                                           slots, kPool, vPool);
  return fromCuda(cudaGetLastError(), "launching ropeKvWriteKernel");
}

}  // namespace rag::cuda
