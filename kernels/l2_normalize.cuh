// Row-wise L2 normalisation of embeddings on the GPU. CPU reference: rag::l2NormalizeRows
// (engine/core/vector_math.h); tests/kernels/test_l2_normalize.cpp compares the two.
#pragma once

#include <cstddef>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// x: F32 [n, d] row-major in device memory, normalised in place on `stream`.
// Rows with norm < eps are left unchanged, as in the CPU reference.
Status l2NormalizeRows(float* x, size_t n, size_t d, float eps, cudaStream_t stream);

// Convenience for tests and tools: copies host rows to the device, normalises, copies back.
Status l2NormalizeRowsHost(float* hostX, size_t n, size_t d, float eps = 1e-12f);

}  // namespace rag::cuda
