#include "silu_mul.cuh"

#include <cuda_runtime.h>

#include <algorithm>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

// A grid-stride loop over the rows * inter outputs.
__global__ void siluMulKernel(const float* gateUp, int64_t rows, int64_t inter, float* out) {
  const int64_t total = rows * inter;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / inter, i = t % inter;
    const float g = gateUp[r * 2 * inter + i];
    out[t] = g / (1.0f + expf(-g)) * gateUp[r * 2 * inter + inter + i];
  }
}

}  // namespace

Status siluMul(const float* gateUp, int64_t rows, int64_t inter, float* out, cudaStream_t stream) {
  if (rows <= 0 || inter <= 0) return Status::ok();
  const int64_t blocks = std::min<int64_t>((rows * inter + kThreads - 1) / kThreads, 65535);
  siluMulKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(gateUp, rows, inter, out);
  return fromCuda(cudaGetLastError(), "launching siluMulKernel");
}

}  // namespace rag::cuda
