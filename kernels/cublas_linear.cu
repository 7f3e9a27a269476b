#include "cublas_linear.cuh"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

Status fromCublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::internal(std::string(what) + ": cuBLAS " + cublasGetStatusName(s) + " (" +
                          cublasGetStatusString(s) + ")");
}

// y[r, o] += bias[o] for o < width: a grid-stride loop over rows * width.
__global__ void addBiasKernel(const float* bias, int64_t rows, int64_t width, float* y, int64_t ldy) {
  const int64_t total = rows * width;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[(t / width) * ldy + t % width] += bias[t % width];
}

}  // namespace

Result<CublasContext> CublasContext::create() {
  cublasHandle_t h = nullptr;
  RAG_RETURN_IF_ERROR(fromCublas(cublasCreate(&h), "creating a cuBLAS handle"));
  CublasContext ctx(h);
  RAG_RETURN_IF_ERROR(fromCublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "setting FP32 math"));
  return Result<CublasContext>(std::move(ctx));
}

CublasContext::~CublasContext() {
  if (m_handle) cublasDestroy(m_handle);
}

CublasContext::CublasContext(CublasContext&& other) noexcept : m_handle(std::exchange(other.m_handle, nullptr)) {}

CublasContext& CublasContext::operator=(CublasContext&& other) noexcept {
  if (this != &other) {
    if (m_handle) cublasDestroy(m_handle);
    m_handle = std::exchange(other.m_handle, nullptr);
  }
  return *this;
}

Status linear(const CublasContext& blas, const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw,
              const float* bias, int64_t o0, int64_t o1, float* y, int64_t ldy, bool accumulate,
              cudaStream_t stream) {
  const int64_t width = o1 - o0;
  if (rows <= 0 || width <= 0) return Status::ok();
  if (rows > INT_MAX || in > INT_MAX || ldw > INT_MAX || ldy > INT_MAX)
    return Status::invalidArgument("GPU linear: a dimension exceeds cuBLAS's 32-bit sizes");
  RAG_RETURN_IF_ERROR(fromCublas(cublasSetStream(blas.handle(), stream), "binding cuBLAS to the stream"));
  // Row-major Y[rows, width] = X[rows, in] . W[in, width] is, read column-major, Y^T = W^T . X^T:
  // a column-major GEMM with m = width, n = rows, k = in and the row-major leading dimensions.
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;  // beta 0: y is not read
  if (in == 0) {
    if (!accumulate) RAG_RETURN_IF_ERROR(fromCuda(cudaMemset2DAsync(y + o0, static_cast<size_t>(ldy) * sizeof(float), 0,
                                                                    static_cast<size_t>(width) * sizeof(float),
                                                                    static_cast<size_t>(rows), stream),
                                                  "clearing the GPU linear's output"));
  } else {
    RAG_RETURN_IF_ERROR(fromCublas(cublasSgemm(blas.handle(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(width),
                                               static_cast<int>(rows), static_cast<int>(in), &one, wt + o0,
                                               static_cast<int>(ldw), x, static_cast<int>(in), &beta, y + o0,
                                               static_cast<int>(ldy)),
                                   "cublasSgemm"));
  }
  if (!bias) return Status::ok();
  const int64_t blocks = std::min<int64_t>((rows * width + kThreads - 1) / kThreads, 65535);
  addBiasKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(bias + o0, rows, width, y + o0, ldy);
  return fromCuda(cudaGetLastError(), "launching addBiasKernel");
}

}  // namespace rag::cuda
