// F32 CPU kernels of a transformer layer stack on raw row-major arrays: every step of the
// runner (decode rows and prefill chunks of a Llama-family model) and the query encoder
// (BERT's LayerNorm, GELU and bidirectional attention) run on them instead of libtorch ops,
// whose per-op cost exceeds the arithmetic at these sizes (batch-1 decode of the shipped
// 1.3M-parameter model was 4.4x its memory-bandwidth floor on them), and whose OpenBLAS sgemm
// runs at 25-155 GFLOP/s on the few to few hundred rows of a step, where `linear` gives ~200.
//
//   cpu::rmsNorm(x, g, rows, hidden, eps, h);
//   cpu::linear(h, rows, hidden, wQkvT, qkvOut, nullptr, 0, qkvOut, qkv, qkvOut, false);
//   cpu::rope(qkv + r * qkvOut, nh + nkv, d, cos, sin);             // q and k heads of row r
//   cpu::attendDecode(q, 0, nh, nh, kv, ctx, scale, scores, out);    // over the paged KV
//
// Every kernel computes a sub-range (rows or output columns), so the caller splits one call
// across threads without the kernels knowing about any thread pool. Hot loops are compiled for
// AVX-512, AVX2+FMA and baseline x86-64 and picked at load time (GCC target_clones), so the
// binary stays portable. Semantics are those of the libtorch layer code in llama.cpp and
// bert.cpp (HF Llama and BERT); tests/engine/test_decode_kernels.cpp checks each kernel against
// a plain loop, tests/engine/test_torch_runner.cpp the runner's path against the dense model
// and tests/engine/test_torch_text_embedder.cpp the encoder's against BertModel. These are also
// the references of the CUDA ops in kernels/ (rms_norm, rope, silu_mul, cublas_linear,
// paged_decode_attention, prefill_attention; kernels/llama_step.h composes them into a step):
// tests/kernels/ compares each with its function here.
// Torch-free and Qt-free.
#pragma once

#include <cstdint>

namespace rag::model::cpu {

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * g, for rows [0, rows) of width dim.
void rmsNorm(const float* x, const float* g, int64_t rows, int64_t dim, float eps, float* out);

// y[r * ldy + o] = (accumulate ? y[r * ldy + o] : 0) + bias[o] + sum_i x[r, i] * wt[i, o] for
// every row r < rows and output o in [o0, o1). wt is the transposed weight, [in, ldw] row-major
// (input-major, so a step of i reads a contiguous run of outputs); bias may be null. One to
// three rows (decode at a small batch) stream the weights in memory order, row by row of wt,
// into accumulators kept in L1: the read runs at the memory's bandwidth. More rows go in 64-wide
// output tiles, each tile's weight strip read from memory once for all rows (four rows at a time
// against accumulators held in registers): batching amortises the weight traffic.
void linear(const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw, const float* bias, int64_t o0,
            int64_t o1, float* y, int64_t ldy, bool accumulate);

// out[r] = (x[r] - mean(x[r])) * rsqrt(var(x[r]) + eps) * g + b (BERT's LayerNorm); out may be x.
void layerNorm(const float* x, const float* g, const float* b, int64_t rows, int64_t dim, float eps, float* out);

// out[i] = x[i] * Φ(x[i]), the exact (erf) GELU of HF's "gelu", with erf to within 1.5e-7
// (Abramowitz & Stegun 7.1.26); out may be x.
void gelu(const float* x, int64_t n, float* out);

// Rotate-half RoPE in place on `heads` consecutive heads of width d (HF convention): cos/sin
// are the position's tables of width d (the d/2 frequencies repeated twice).
void rope(float* x, int64_t heads, int64_t d, const float* cos, const float* sin);

// out[r, i] = silu(gateUp[r, i]) * gateUp[r, inter + i]: SwiGLU on a stacked gate|up row.
void siluMul(const float* gateUp, int64_t rows, int64_t inter, float* out);

// K/V of one layer in the runner's paged pool: rows [numBlocks * blockSize, kvHeads, headDim],
// a sequence's position p at row blocks[p / blockSize] * blockSize + p % blockSize.
struct PagedKv {
  const float* k = nullptr;
  const float* v = nullptr;
  const int32_t* blocks = nullptr;
  int64_t blockSize = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
};

// One query row attending to positions [0, ctx) of its sequence, for query heads [h0, h1) of
// `heads` (grouped-query: head h reads KV head h / (heads / kvHeads)). q and out are
// [heads, headDim]; scores is scratch of (h1 - h0) * ctx floats. softmax(q.K * scale) . V per
// head.
void attendDecode(const float* q, int64_t h0, int64_t h1, int64_t heads, const PagedKv& kv, int64_t ctx,
                  float scale, float* scores, float* out);

// Attention of a prefill chunk: n consecutive query rows of one sequence at positions start ..
// start + n - 1, row r over positions [0, start + r] of the paged pool, all of them or those its
// mask row allows (`allowed`: uint8 [n, start + n] row-major, non-zero = attend; null: all, the
// causal case). Row r's `heads` query heads are at q + r * qStride, its output [heads, headDim]
// goes to out + r * outStride. `scratch` holds attendPrefillScratch(n, start + n, headDim)
// floats. Each KV head's keys are gathered once (transposed) for its query heads, and QK and PV
// run through `linear` in blocks of rows, each block only up to its last row's position, so the
// work follows the causal triangle; a chunk costs no per-row or per-op overhead.
int64_t attendPrefillScratch(int64_t n, int64_t ctx, int64_t headDim);
void attendPrefill(const float* q, int64_t qStride, int64_t n, int64_t start, int64_t heads, const PagedKv& kv,
                   const uint8_t* allowed, float scale, float* scratch, float* out, int64_t outStride);
// The same for an encoder's bidirectional attention: every one of the n rows over all n
// positions of `kv` (scratch: attendPrefillScratch(n, n, headDim) floats).
void attendBidirectional(const float* q, int64_t qStride, int64_t n, int64_t heads, const PagedKv& kv, float scale,
                         float* scratch, float* out, int64_t outStride);

}  // namespace rag::model::cpu
