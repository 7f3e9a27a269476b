// An encoder's bidirectional self-attention on the GPU, for a batch of texts packed row after
// row without padding: every row attends to all rows of its own text. CPU reference:
// rag::model::cpu::attendBidirectional (engine/model/decode_kernels.h), called per text as
// TextEmbedder's CPU kernels do; tests/kernels/test_bert_encoder.cpp compares the two.
//
// The keys and values are first copied out of the fused q|k|v rows into contiguous scratch, so
// that each (row, head) block runs the decode kernel's online softmax (attention_row.cuh) over
// its text's rows as a sequence of one-row blocks.
#pragma once

#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

// qkv: F32 [rows, 3 * heads * headDim], each row's query, key and value heads (the fused
// projection's output). Text t has rows [firstRow[t], firstRow[t + 1]) (I32 [texts + 1]),
// textOf[r] is row r's text (I32 [rows]) and rowIds is I32 0 .. rows - 1. kScratch and vScratch
// hold rows * heads * headDim floats each. out: F32 [rows, heads * headDim]. All in device
// memory; enqueued on `stream`. InvalidArgument for a head wider than the kernels hold.
Status encoderAttention(const float* qkv, int64_t rows, int64_t heads, int64_t headDim, const int32_t* textOf,
                        const int32_t* firstRow, const int32_t* rowIds, float* kScratch, float* vScratch, float scale,
                        float* out, cudaStream_t stream);

}  // namespace rag::cuda
