// The matmul of a layer on the GPU: cuBLAS SGEMM on the runner's transposed [in, out] weights,
// with cpu::linear's bias and accumulate options. CPU reference: rag::model::cpu::linear
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

class CublasContext {
public:
  static Result<CublasContext> create();
  ~CublasContext();
  CublasContext(CublasContext&& other) noexcept;
  CublasContext& operator=(CublasContext&& other) noexcept;
  CublasContext(const CublasContext&) = delete;
  CublasContext& operator=(const CublasContext&) = delete;

  cublasHandle_t handle() const { return m_handle; }
  // Device memory cuBLAS uses as scratch instead of its own: a step captured into a CUDA graph
  // then allocates nothing. Valid while the context uses it.
  Status setWorkspace(void* workspace, size_t bytes);

private:
  explicit CublasContext(cublasHandle_t h) : m_handle(h) {}
  cublasHandle_t m_handle = nullptr;
};

// y[r * ldy + o] = (accumulate ? y[r * ldy + o] : 0) + bias[o] + sum_i x[r, i] * wt[i, o] for
// every row r < rows and output o in [o0, o1), as cpu::linear. x F32 [rows, in], wt F32
// [in, ldw] (the transposed weight), bias F32 [ldw] or null, y F32 [rows, ldy]; all in device
// memory. Enqueued on `stream` (the context is bound to it for the call).
Status linear(const CublasContext& blas, const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw,
              const float* bias, int64_t o0, int64_t o1, float* y, int64_t ldy, bool accumulate,
              cudaStream_t stream);

}  // namespace rag::cuda
