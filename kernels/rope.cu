#include "rope.cuh"

#include <cuda_runtime.h>

#include <string>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 128;

// One block per row. A thread per (head, i < d/2) pair of the q and k heads rotates v[i] and
// v[i + d/2] in place (and, for a k head, writes the pair to the row's pool slot); then the
// row's v heads are copied to the slot.
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
    const float a = v[i], b = v[i + half];
    const float x = a * c[i] - b * s[i], y = b * c[i + half] + a * s[i + half];
    v[i] = x;
    v[i + half] = y;
    if (h >= qHeads) {
      kDst[(h - qHeads) * d + i] = x;
      kDst[(h - qHeads) * d + i + half] = y;
    }
  }
  const float* vSrc = row + (qHeads + kvHeads) * d;
  float* vDst = vPool + static_cast<int64_t>(slots[r]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) vDst[i] = vSrc[i];
}

}  // namespace

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
