// RMSNorm of rows on the GPU. CPU reference: rag::model::cpu::rmsNorm
// (engine/model/decode_kernels.h); tests/kernels/test_rms_norm.cpp compares the two.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * g for rows [0, rows) of width dim. All pointers in
// device memory: x and out F32 [rows, dim] (out may be x), g F32 [dim]. One block per row, the
// sum of squares reduced in F32 over warps. Enqueued on `stream`.
Status rmsNorm(const float* x, const float* g, int64_t rows, int64_t dim, float eps, float* out,
               cudaStream_t stream);

}  // namespace rag::cuda
