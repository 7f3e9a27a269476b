// The exact (erf) GELU of HF's "gelu" on the GPU, elementwise. CPU reference:
// rag::model::cpu::gelu (engine/model/decode_kernels.h, erf to within 1.5e-7);
// tests/kernels/test_bert_encoder.cpp compares the two.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// out[i] = x[i] * Phi(x[i]) for i < n; out may be x. Device memory; enqueued on `stream`.
Status gelu(const float* x, int64_t n, float* out, cudaStream_t stream);

}  // namespace rag::cuda
