// BERT's LayerNorm on the GPU, row-wise with a gain and a bias. CPU reference:
// rag::model::cpu::layerNorm (engine/model/decode_kernels.h); tests/kernels/test_bert_encoder.cpp
// compares the two.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// out[r] = (x[r] - mean(x[r])) * rsqrt(var(x[r]) + eps) * g + b for rows of `dim` floats; out
// may be x. All pointers in device memory; enqueued on `stream`.
Status layerNorm(const float* x, const float* g, const float* b, int64_t rows, int64_t dim, float eps, float* out,
                 cudaStream_t stream);

}  // namespace rag::cuda
