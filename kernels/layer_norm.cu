#include "layer_norm.cuh"

#include <cuda_runtime.h>

#include "block_reduce.cuh"
#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row; the mean, then the variance around it (two passes, as the CPU reference).
__global__ void layerNormKernel(const float* x, const float* g, const float* b, int64_t dim, float eps, float* out) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* o = out + static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i];
  const float mean = blockSum(sum) / static_cast<float>(dim);
  float var = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) var += (xr[i] - mean) * (xr[i] - mean);
  const float inv = rsqrtf(blockSum(var) / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = (xr[i] - mean) * inv * g[i] + b[i];
}

}  // namespace

Status layerNorm(const float* x, const float* g, const float* b, int64_t rows, int64_t dim, float eps, float* out,
                 cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::invalidArgument("GPU layerNorm: too many rows for one launch");
  layerNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, g, b, dim, eps, out);
  return fromCuda(cudaGetLastError(), "launching layerNormKernel");
}

}  // namespace rag::cuda
