#include "l2_normalize.cuh"

#include "cuda_check.h"

#include <cuda_runtime.h>

#include <string>

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: a strided sum of squares, a shared-memory tree reduction, then scale.
__global__ void l2NormalizeKernel(float* x, size_t d, float eps) {
  __shared__ double partial[kThreads];
  float* row = x + static_cast<size_t>(blockIdx.x) * d;
  double acc = 0;
  for (size_t j = threadIdx.x; j < d; j += blockDim.x) acc += static_cast<double>(row[j]) * row[j];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const double norm = sqrt(partial[0]);
  if (norm < eps) return;
  const float inv = static_cast<float>(1.0 / norm);
  for (size_t j = threadIdx.x; j < d; j += blockDim.x) row[j] *= inv;
}

}  // namespace

Status l2NormalizeRows(float* x, size_t n, size_t d, float eps, cudaStream_t stream) {
  if (n == 0 || d == 0) return Status::ok();
  if (n > 0x7fffffff) return Status::invalidArgument("l2NormalizeRows: too many rows for one launch");
  l2NormalizeKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(x, d, eps);
  return fromCuda(cudaGetLastError(), "launching l2NormalizeKernel");
}

Status l2NormalizeRowsHost(float* hostX, size_t n, size_t d, float eps) {
  const size_t bytes = n * d * sizeof(float);
  float* dev = nullptr;
  RAG_RETURN_IF_ERROR(fromCuda(cudaMalloc(&dev, bytes), "cudaMalloc"));
  Status s = fromCuda(cudaMemcpy(dev, hostX, bytes, cudaMemcpyHostToDevice), "copy to device");
  if (s) s = l2NormalizeRows(dev, n, d, eps, nullptr);
  if (s) s = fromCuda(cudaMemcpy(hostX, dev, bytes, cudaMemcpyDeviceToHost), "copy to host");
  cudaFree(dev);
  return s;
}

}  // namespace rag::cuda
