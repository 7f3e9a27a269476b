#include "rope.cuh"

#include <cuda_runtime.h>

#include <string>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 128;

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
    const float a = v[i], b = v[i + half];
    v[i] = a * c[i] - b * s[i];
    v[i + half] = b * c[i + half] + a * s[i + half];
  }
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

}  // namespace rag::cuda
