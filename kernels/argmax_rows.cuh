// Greedy sampling on the GPU: each row's argmax, so that a decode step sends the host one token
// per row instead of its whole vocabulary of logits. CPU reference: rag::model::argmaxLogit
// (engine/model/logit_ops.h), which the runner's greedy Sampler calls; tests/kernels/
// test_argmax_rows.cpp compares the two.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// out[r] = the index of the largest of logits[r, 0 .. vocab), the lowest index on ties, NaN and
// -inf skipped; -1 when the row has none (every logit NaN or -inf), as argmaxLogit. logits F32
// [rows, vocab] row-major and out int32 [rows], both in device memory; enqueued on `stream`.
Status argmaxRows(const float* logits, int64_t rows, int64_t vocab, int32_t* out, cudaStream_t stream);

}  // namespace rag::cuda
