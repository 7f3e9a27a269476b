#include "rms_norm.cuh"

#include <cuda_runtime.h>

#include "block_reduce.cuh"
#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void rmsNormKernel(const float* x, const float* g, int64_t dim, float eps, float* out) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* o = out + static_cast<int64_t>(blockIdx.x) * dim;
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) acc += xr[i] * xr[i];
  const float inv = rsqrtf(blockSum(acc) / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = xr[i] * inv * g[i];
}

}  // namespace

Status rmsNorm(const float* x, const float* g, int64_t rows, int64_t dim, float eps, float* out,
               cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::invalidArgument("GPU rmsNorm: too many rows for one launch");
  rmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, g, dim, eps, out);
  return fromCuda(cudaGetLastError(), "launching rmsNormKernel");
}

}  // namespace rag::cuda
