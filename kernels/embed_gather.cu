#include "embed_gather.cuh"

#include <cuda_runtime.h>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void embedGatherKernel(const float* table, int64_t vocab, int64_t hidden, const int32_t* tokens,
                                  float* out) {
  const int64_t r = blockIdx.x;
  const int64_t id = tokens[r];
  float* o = out + r * hidden;
  const bool valid = id >= 0 && id < vocab;
  const float* src = table + (valid ? id : 0) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = valid ? src[i] : 0.0f;
}

}  // namespace

Status embedGather(const float* table, int64_t vocab, int64_t hidden, const int32_t* tokens, int64_t n,
                   float* out, cudaStream_t stream) {
  if (n <= 0 || hidden <= 0) return Status::ok();
  if (n > 0x7fffffff) return Status::invalidArgument("GPU embedGather: too many rows for one launch");
  embedGatherKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(table, vocab, hidden, tokens, out);
  return fromCuda(cudaGetLastError(), "launching embedGatherKernel");
}

}  // namespace rag::cuda
