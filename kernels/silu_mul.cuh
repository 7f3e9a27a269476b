// SwiGLU on stacked gate|up rows on the GPU. CPU reference: rag::model::cpu::siluMul
// (engine/model/decode_kernels.h); tests/kernels/test_silu_mul.cpp compares the two.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// out[r, i] = silu(gateUp[r, i]) * gateUp[r, inter + i]. gateUp F32 [rows, 2 * inter], out F32
// [rows, inter], both in device memory; enqueued on `stream`.
Status siluMul(const float* gateUp, int64_t rows, int64_t inter, float* out, cudaStream_t stream);

}  // namespace rag::cuda
