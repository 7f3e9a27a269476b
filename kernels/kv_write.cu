#include "kv_write.cuh"

#include <cuda_runtime.h>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void kvWriteKernel(const float* k, const float* v, int64_t srcStride, int64_t width,
                              const int32_t* slots, float* kPool, float* vPool) {
  const int64_t r = blockIdx.x;
  const int64_t at = static_cast<int64_t>(slots[r]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    kPool[at + i] = k[r * srcStride + i];
    vPool[at + i] = v[r * srcStride + i];
  }
}

}  // namespace

Status kvWrite(const float* k, const float* v, int64_t srcStride, int64_t rows, int64_t width,
               const int32_t* slots, float* kPool, float* vPool, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::invalidArgument("GPU kvWrite: too many rows for one launch");
  kvWriteKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(k, v, srcStride, width, slots, kPool, vPool);
  return fromCuda(cudaGetLastError(), "launching kvWriteKernel");
}

}  // namespace rag::cuda
