#include "argmax_rows.cuh"

#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

// (value, index) pairs ordered as argmaxLogit chooses: the larger value, then the lower index.
// NaN never enters (a thread starts from -inf and skips it), and -inf never beats the start, so
// a row of NaN and -inf keeps index INT_MAX: no token.
struct Best {
  float v;
  int i;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

// One block per row: a strided scan per thread, then a warp shuffle and a pass over the warps.
__global__ void argmaxRowsKernel(const float* logits, int64_t vocab, int32_t* out) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  Best best{-INFINITY, INT_MAX};
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float v = row[j];
    if (v > best.v) best = {v, static_cast<int>(j)};  // false for NaN; the first j of a tie stays
  }
  for (int off = 16; off > 0; off >>= 1)
    best = better(best, {__shfl_xor_sync(0xffffffffu, best.v, off), __shfl_xor_sync(0xffffffffu, best.i, off)});
  __shared__ Best warps[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    Best b = warps[0];
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) b = better(b, warps[w]);
    out[blockIdx.x] = b.i == INT_MAX ? -1 : b.i;
  }
}

}  // namespace

Status argmaxRows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream) {
  if (rows <= 0) return Status::ok();
  if (vocab <= 0 || vocab > INT_MAX || rows > INT_MAX)
    return Status::invalidArgument("argmaxRows: " + std::to_string(rows) + " rows of " + std::to_string(vocab) +
                                   " logits are outside what the kernel indexes (1 to 2^31 - 1 each)");
  argmaxRowsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, out);
  return fromCuda(cudaGetLastError(), "launching argmaxRowsKernel");
}

}  // namespace rag::cuda
