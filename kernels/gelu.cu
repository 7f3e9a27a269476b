#include "gelu.cuh"

#include <algorithm>

#include <cuda_runtime.h>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void geluKernel(const float* x, int64_t n, float* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

}  // namespace

Status gelu(const float* x, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return Status::ok();
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535);
  geluKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, n, out);
  return fromCuda(cudaGetLastError(), "launching geluKernel");
}

}  // namespace rag::cuda
