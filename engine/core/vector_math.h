// Dense float vector helpers with the CPU reference semantics the CUDA kernels in kernels/
// are checked against.
#pragma once

#include <cstddef>

namespace rag {

// Scales each of the n rows of x (row-major, size n * d) to unit L2 norm. Rows whose norm is
// below eps are left unchanged (an all-zero embedding stays zero instead of becoming NaN).
void l2NormalizeRows(float* x, size_t n, size_t d, float eps = 1e-12f);

// Inner products of one query (size d) with n rows of x (size n * d) into out (size n).
void innerProducts(const float* query, const float* x, size_t n, size_t d, float* out);

}  // namespace rag
