// Embedding lookup on the GPU: token ids to rows of the embedding table. CPU reference: the
// gather at the start of ModelRunner's kernel forward (engine/model/runner_forward.cpp, a
// memcpy of table row tokens[r]); tests/kernels/test_embed_gather.cpp compares the two.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// out[r] = table[tokens[r]] for r < n. table F32 [vocab, hidden], tokens I32 [n], out F32
// [n, hidden], all in device memory; enqueued on `stream`. An id outside [0, vocab) gives a row
// of zeros: the kernel cannot report it, so callers validate ids on the host first (the runner
// does when a sequence is added).
Status embedGather(const float* table, int64_t vocab, int64_t hidden, const int32_t* tokens, int64_t n,
                   float* out, cudaStream_t stream);

}  // namespace rag::cuda
