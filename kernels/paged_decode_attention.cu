#include "paged_decode_attention.cuh"

#include <cuda_runtime.h>

#include "attention_row.cuh"
#include "cuda_check.h"

namespace rag::cuda {
namespace {

__global__ void __launch_bounds__(32 * kDecodeAttentionWarps)
    pagedDecodeAttentionKernel(const float* q, int64_t qStride, int64_t heads, DevicePagedKv kv,
                               const int32_t* blockTables, int64_t tableStride, const int32_t* contextLens,
                               float scale, float* out, int64_t outStride) {
  const int64_t h = blockIdx.x, b = blockIdx.y;
  const int64_t d = kv.headDim, group = heads / kv.kvHeads;
  attendRow<kDecodeAttentionWarps>(q + b * qStride + h * d, kv, h / group, blockTables + b * tableStride,
                                   contextLens[b], nullptr, scale, out + b * outStride + h * d);
}

}  // namespace

Status pagedDecodeAttention(const float* q, int64_t qStride, int64_t batch, int64_t heads, const DevicePagedKv& kv,
                            const int32_t* blockTables, int64_t tableStride, const int32_t* contextLens, float scale,
                            float* out, int64_t outStride, cudaStream_t stream) {
  RAG_RETURN_IF_ERROR(checkAttentionShape(heads, kv, "GPU decode attention"));
  if (batch <= 0) return Status::ok();
  if (heads > 0x7fffffff || batch > 65535)
    return Status::invalidArgument("GPU decode attention: at most 65535 sequences and 2^31 heads per launch");
  const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  pagedDecodeAttentionKernel<<<grid, 32 * kDecodeAttentionWarps, 0, stream>>>(
      q, qStride, heads, kv, blockTables, tableStride, contextLens, scale, out, outStride);
  return fromCuda(cudaGetLastError(), "launching pagedDecodeAttentionKernel");
}

}  // namespace rag::cuda
