#include "encoder_attention.cuh"

#include <algorithm>

#include <cuda_runtime.h>

#include "attention_row.cuh"
#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kSplitThreads = 256;

__global__ void splitKvKernel(const float* qkv, int64_t rows, int64_t width, float* k, float* v) {
  const int64_t n = rows * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / width, c = i % width;
    k[i] = qkv[r * 3 * width + width + c];
    v[i] = qkv[r * 3 * width + 2 * width + c];
  }
}

// One block per (row, head): the row's query head over every row of its text.
__global__ void encoderAttentionKernel(const float* qkv, DevicePagedKv kv, const int32_t* textOf, const int32_t* firstRow,
                                       const int32_t* rowIds, float scale, float* out) {
  const int64_t row = blockIdx.x, head = blockIdx.y, d = kv.headDim, width = kv.kvHeads * d;
  const int32_t text = textOf[row];
  const int32_t first = firstRow[text], n = firstRow[text + 1] - first;
  attendRow<kPrefillAttentionWarps>(qkv + row * 3 * width + head * d, kv, head, rowIds + first, n, nullptr, scale,
                                    out + row * width + head * d);
}

}  // namespace

Status encoderAttention(const float* qkv, int64_t rows, int64_t heads, int64_t headDim, const int32_t* textOf,
                        const int32_t* firstRow, const int32_t* rowIds, float* kScratch, float* vScratch, float scale,
                        float* out, cudaStream_t stream) {
  if (rows <= 0) return Status::ok();
  const DevicePagedKv kv{kScratch, vScratch, /*blockSize=*/1, heads, headDim};
  RAG_RETURN_IF_ERROR(checkAttentionShape(heads, kv, "GPU encoder attention"));
  if (rows > 0x7fffffff || heads > 65535) return Status::invalidArgument("GPU encoder attention: too many rows or heads for one launch");
  const int64_t width = heads * headDim;
  const int64_t blocks = std::min<int64_t>((rows * width + kSplitThreads - 1) / kSplitThreads, 65535);
  splitKvKernel<<<static_cast<unsigned>(blocks), kSplitThreads, 0, stream>>>(qkv, rows, width, kScratch, vScratch);
  RAG_RETURN_IF_ERROR(fromCuda(cudaGetLastError(), "launching splitKvKernel"));
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(heads));
  encoderAttentionKernel<<<grid, 32 * kPrefillAttentionWarps, 0, stream>>>(qkv, kv, textOf, firstRow, rowIds, scale, out);
  return fromCuda(cudaGetLastError(), "launching encoderAttentionKernel");
}

}  // namespace rag::cuda
