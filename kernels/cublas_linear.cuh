// The matmul of a layer on the GPU on the runner's transposed [in, out] weights, with
// cpu::linear's bias and accumulate options: cuBLAS SGEMM, or for 2 to 8 rows (decode: one row
// per sequence) our own kernel, which narrows its blocks until there are about two per SM, in
// one launch, adding its partial sums in a fixed order (deterministic). Measured side by side
// (`bench llm --device cuda`, H200): at 8 rows ours decodes 3.25x faster than all-cuBLAS on the
// shipped model and 1.02x on the 28M synthetic one; at 1 row cuBLAS is ahead (ours 0.89x and
// 0.99x), so a single row stays on cuBLAS. CPU reference: rag::model::cpu::linear
// (engine/model/decode_kernels.h); tests/kernels/test_cublas_linear.cpp compares the two.
//
//   RAG_ASSIGN_OR_RETURN(cuda::CublasContext blas, cuda::CublasContext::create());
//   RAG_RETURN_IF_ERROR(cuda::linear(blas, x, rows, in, wt, out, bias, 0, out, y, out, false, stream));
//
// A CublasContext is used by one thread at a time (cuBLAS handles are not thread-safe); it runs
// in FP32 (CUBLAS_DEFAULT_MATH: no TF32 tensor-core rounding), so results match the CPU to
// summation order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;
typedef struct cublasContext* cublasHandle_t;

namespace rag::cuda {

inline constexpr int64_t kSmallLinearMinRows = 2, kSmallLinearRows = 8;

class CublasContext {
public:
  static Result<CublasContext> create();
  ~CublasContext();
  CublasContext(CublasContext&& other) noexcept;
  CublasContext& operator=(CublasContext&& other) noexcept;
  CublasContext(const CublasContext&) = delete;
  CublasContext& operator=(const CublasContext&) = delete;

  cublasHandle_t handle() const { return m_handle; }
  int multiprocessors() const { return m_multiprocessors; }
  // Whether linear() runs 2 to kSmallLinearRows rows on the small-row kernel (the default) or
  // every product on cuBLAS.
  bool smallRowKernel() const { return m_smallRowKernel; }
  void setSmallRowKernel(bool on) { m_smallRowKernel = on; }
  // Device memory cuBLAS uses as scratch instead of its own: a step captured into a CUDA graph
  // then allocates nothing. Valid while the context uses it.
  Status setWorkspace(void* workspace, size_t bytes);

private:
  explicit CublasContext(cublasHandle_t h) : m_handle(h) {}
  cublasHandle_t m_handle = nullptr;
  int m_multiprocessors = 1;
  bool m_smallRowKernel = true;
};

// y[r * ldy + o] = (accumulate ? y[r * ldy + o] : 0) + bias[o] + sum_i x[r, i] * wt[i, o] for
// every row r < rows and output o in [o0, o1), as cpu::linear. kSmallLinearMinRows to
// kSmallLinearRows rows run on the small-row kernel, others on cuBLAS. x F32 [rows, in], wt F32
// [in, ldw] (the transposed weight), bias F32 [ldw] or null, y F32 [rows, ldy]; all in device
// memory. Enqueued on `stream` (the context is bound to it for the call).
Status linear(const CublasContext& blas, const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw,
              const float* bias, int64_t o0, int64_t o1, float* y, int64_t ldy, bool accumulate,
              cudaStream_t stream);

}  // namespace rag::cuda
