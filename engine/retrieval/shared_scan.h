// The scan kernel of HedraRAG's shared sub-stages (§5: "a variable-length cluster search
// interface across requests"): when several searches of one sub-stage visit the same IVF
// cluster, its vectors are read from memory once for all of them.
//
// A cluster at nprobe 512 of 1024 is about 128 rows of 1 KiB, and one query's scan of it is
// bound by memory bandwidth (about 3 of every 4 cycles wait for the rows). Scoring up to four
// queries per row read turns that into arithmetic: IvfIndex::stepShared uses this kernel for the
// screening pass and FAISS's own fvec_inner_product to rescore the few rows that could enter a
// top-k, so its results are bit-identical to FAISS's scan (see innerProductErrorBound).
#pragma once

#include <cstdint>

namespace rag::retrieval {

// out[q][j] = queries[q] · rows[j] for q < nq, j < n (rows: F32 [n, dim], row-major). Each row is
// read once per four queries; float accumulation in 16 lanes, so each product differs from an
// exact one by at most innerProductErrorBound. Compiled for AVX-512, AVX2+FMA and baseline
// x86-64 and picked at load time.
void innerProductsShared(const float* const* queries, float* const* out, int32_t nq,
                         const float* rows, int64_t n, int64_t dim);

// A bound on |a - b| for two float32 evaluations a, b of the same dim-term inner product x · y in
// any summation order, with or without FMA: each is within γ_dim·Σ|x_i y_i| ≤ γ_dim·|x|·|y| of
// the exact value (γ_n = n·u / (1 - n·u), u = 2^-24; Higham, Accuracy and Stability, §3.1),
// so twice that, with a 2x safety factor. normProduct is |x|·|y| (or an upper bound of it).
double innerProductErrorBound(int64_t dim, double normProduct);

}  // namespace rag::retrieval
