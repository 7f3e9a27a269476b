#include "prefill_attention.cuh"

#include <cuda_runtime.h>

#include "attention_row.cuh"
#include "cuda_check.h"

namespace rag::cuda {
namespace {

__global__ void __launch_bounds__(32 * kPrefillAttentionWarps)
    prefillAttentionKernel(const float* q, int64_t qStride, int64_t n, int64_t start, int64_t heads, DevicePagedKv kv,
                           const int32_t* blocks, const uint8_t* allowed, float scale, float* out,
                           int64_t outStride) {
  const int64_t h = blockIdx.x, r = blockIdx.y;
  const int64_t d = kv.headDim, group = heads / kv.kvHeads;
  const uint8_t* row = allowed ? allowed + r * (start + n) : nullptr;
  attendRow<kPrefillAttentionWarps>(q + r * qStride + h * d, kv, h / group, blocks, start + r + 1, row, scale,
                                    out + r * outStride + h * d);
}

}  // namespace

Status prefillAttention(const float* q, int64_t qStride, int64_t n, int64_t start, int64_t heads,
                        const DevicePagedKv& kv, const int32_t* blocks, const uint8_t* allowed, float scale, float* out,
                        int64_t outStride, cudaStream_t stream) {
  RAG_RETURN_IF_ERROR(checkAttentionShape(heads, kv, "GPU prefill attention"));
  if (n <= 0) return Status::ok();
  if (start < 0) return Status::invalidArgument("GPU prefill attention: negative start position");
  if (heads > 0x7fffffff || n > 65535)
    return Status::invalidArgument("GPU prefill attention: at most 65535 rows per chunk; split the chunk");
  const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(n));
  prefillAttentionKernel<<<grid, 32 * kPrefillAttentionWarps, 0, stream>>>(q, qStride, n, start, heads, kv, blocks,
                                                                           allowed, scale, out, outStride);
  return fromCuda(cudaGetLastError(), "launching prefillAttentionKernel");
}

}  // namespace rag::cuda
