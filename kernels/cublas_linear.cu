#include "cublas_linear.cuh"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda_check.h"

namespace rag::cuda {
namespace {

constexpr int kThreads = 256;

// cuBLAS is opened on first use, not linked: with cublasLt it is about 600 MB of shared
// libraries, which would cost every start of the CLI and the GUI about 0.5 s and 200 MB of
// resident memory (measured here) while only `--device cuda` needs it.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetMathMode) setMathMode = nullptr;
  decltype(&cublasSetStream_v2) setStream = nullptr;
  decltype(&cublasSetWorkspace_v2) setWorkspace = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasGetStatusName) statusName = nullptr;
  decltype(&cublasGetStatusString) statusString = nullptr;
  std::string error;  // why it could not be opened; empty when it was
};

const Cublas& cublas() {
  static Cublas lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = nullptr;
    std::string tried;
    for (const char* name : {RAGWB_CUBLAS_LIBRARY, "libcublas.so." RAGWB_CUBLAS_MAJOR, "libcublas.so"}) {
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
      tried += std::string(tried.empty() ? "" : "; ") + dlerror();
    }
    if (!h) {
      lib.error = "cannot open cuBLAS (" + tried + "); install the CUDA toolkit's libcublas or add its directory to LD_LIBRARY_PATH";
      return;
    }
    auto load = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, symbol));
      if (!fn && lib.error.empty()) lib.error = std::string("cuBLAS lacks ") + symbol;
    };
    load(lib.create, "cublasCreate_v2");
    load(lib.destroy, "cublasDestroy_v2");
    load(lib.setMathMode, "cublasSetMathMode");
    load(lib.setStream, "cublasSetStream_v2");
    load(lib.setWorkspace, "cublasSetWorkspace_v2");
    load(lib.sgemm, "cublasSgemm_v2");
    load(lib.statusName, "cublasGetStatusName");
    load(lib.statusString, "cublasGetStatusString");
  });
  return lib;
}

Status fromCublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::internal(std::string(what) + ": cuBLAS " + cublas().statusName(s) + " (" +
                          cublas().statusString(s) + ")");
}

// The small-row kernel, one launch per product: a block of kSmallThreads threads covers Cols
// output columns, its threads laid out as Cols columns x (kSmallThreads / Cols) slices of the
// inner dimension, every thread keeping a sum per row. A warp reads 32 / Cols inner rows of
// Cols consecutive floats each (whole 32-byte sectors for Cols >= 8). Narrow outputs take
// narrow blocks, so that every product runs on about two blocks per SM or more. The slices'
// sums are added in slice order in shared memory: deterministic.
constexpr int kSmallThreads = 256;

template <int Cols>
__global__ void __launch_bounds__(kSmallThreads)
    smallLinearKernel(const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw, int64_t width,
                      const float* bias, float* y, int64_t ldy, bool accumulate) {
  constexpr int kSlices = kSmallThreads / Cols;
  __shared__ float sums[kSlices][kSmallLinearRows][Cols];
  const int c = threadIdx.x % Cols, slice = threadIdx.x / Cols;
  const int64_t col = blockIdx.x * static_cast<int64_t>(Cols) + c;
  float acc[kSmallLinearRows];
#pragma unroll
  for (int r = 0; r < kSmallLinearRows; ++r) acc[r] = 0.0f;
  if (col < width) {
#pragma unroll 4
    for (int64_t i = slice; i < in; i += kSlices) {
      const float w = wt[i * ldw + col];
#pragma unroll
      for (int r = 0; r < kSmallLinearRows; ++r)
        if (r < rows) acc[r] += x[r * in + i] * w;
    }
  }
#pragma unroll
  for (int r = 0; r < kSmallLinearRows; ++r) sums[slice][r][c] = acc[r];
  __syncthreads();
  for (int t = threadIdx.x; t < rows * Cols; t += kSmallThreads) {
    const int r = t / Cols, tc = t % Cols;
    const int64_t o = blockIdx.x * static_cast<int64_t>(Cols) + tc;
    if (o >= width) continue;
    float sum = 0.0f;
    for (int j = 0; j < kSlices; ++j) sum += sums[j][r][tc];
    float* out = y + r * ldy + o;
    *out = (accumulate ? *out : 0.0f) + (bias ? bias[o] : 0.0f) + sum;
  }
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
  const Cublas& lib = cublas();
  if (!lib.error.empty()) return Status::unavailable(lib.error);
  cublasHandle_t h = nullptr;
  RAG_RETURN_IF_ERROR(fromCublas(lib.create(&h), "creating a cuBLAS handle"));
  CublasContext ctx(h);
  RAG_RETURN_IF_ERROR(fromCublas(lib.setMathMode(h, CUBLAS_DEFAULT_MATH), "setting FP32 math"));
  int device = 0;
  RAG_RETURN_IF_ERROR(fromCuda(cudaGetDevice(&device), "reading the current device"));
  RAG_RETURN_IF_ERROR(fromCuda(cudaDeviceGetAttribute(&ctx.m_multiprocessors, cudaDevAttrMultiProcessorCount, device),
                               "reading the device's multiprocessor count"));
  return Result<CublasContext>(std::move(ctx));
}

Status CublasContext::setWorkspace(void* workspace, size_t bytes) {
  return fromCublas(cublas().setWorkspace(m_handle, workspace, bytes), "giving cuBLAS its workspace");
}

CublasContext::~CublasContext() {
  if (m_handle) cublas().destroy(m_handle);
}

CublasContext::CublasContext(CublasContext&& other) noexcept
    : m_handle(std::exchange(other.m_handle, nullptr)),
      m_multiprocessors(other.m_multiprocessors),
      m_smallRowKernel(other.m_smallRowKernel) {}

CublasContext& CublasContext::operator=(CublasContext&& other) noexcept {
  if (this != &other) {
    if (m_handle) cublas().destroy(m_handle);
    m_handle = std::exchange(other.m_handle, nullptr);
    m_multiprocessors = other.m_multiprocessors;
    m_smallRowKernel = other.m_smallRowKernel;
  }
  return *this;
}

namespace {

// The small-row path: the widest block (most columns, whole sectors) that still gives about
// two blocks per SM, down to 4 columns.
Status smallLinear(const CublasContext& blas, const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw,
                   const float* bias, int64_t width, float* y, int64_t ldy, bool accumulate, cudaStream_t stream) {
  const int64_t wantBlocks = 2 * static_cast<int64_t>(blas.multiprocessors());
  int cols = 32;
  while (cols > 4 && (width + cols - 1) / cols < wantBlocks) cols /= 2;
  const int64_t blocks = (width + cols - 1) / cols;
  if (blocks > 0x7fffffff) return Status::invalidArgument("GPU linear: an output " + std::to_string(width) + " wide is too wide");
  const auto grid = static_cast<unsigned>(blocks);
  switch (cols) {
    case 32: smallLinearKernel<32><<<grid, kSmallThreads, 0, stream>>>(x, rows, in, wt, ldw, width, bias, y, ldy, accumulate); break;
    case 16: smallLinearKernel<16><<<grid, kSmallThreads, 0, stream>>>(x, rows, in, wt, ldw, width, bias, y, ldy, accumulate); break;
    case 8: smallLinearKernel<8><<<grid, kSmallThreads, 0, stream>>>(x, rows, in, wt, ldw, width, bias, y, ldy, accumulate); break;
    default: smallLinearKernel<4><<<grid, kSmallThreads, 0, stream>>>(x, rows, in, wt, ldw, width, bias, y, ldy, accumulate); break;
  }
  return fromCuda(cudaGetLastError(), "launching smallLinearKernel");
}

}  // namespace

Status linear(const CublasContext& blas, const float* x, int64_t rows, int64_t in, const float* wt, int64_t ldw,
              const float* bias, int64_t o0, int64_t o1, float* y, int64_t ldy, bool accumulate,
              cudaStream_t stream) {
  const int64_t width = o1 - o0;
  if (rows <= 0 || width <= 0) return Status::ok();
  if (rows > INT_MAX || in > INT_MAX || ldw > INT_MAX || ldy > INT_MAX)
    return Status::invalidArgument("GPU linear: a dimension exceeds cuBLAS's 32-bit sizes");
  if (blas.smallRowKernel() && rows >= kSmallLinearMinRows && rows <= kSmallLinearRows && in > 0)
    return smallLinear(blas, x, rows, in, wt + o0, ldw, bias ? bias + o0 : nullptr, width, y + o0, ldy, accumulate, stream);
  RAG_RETURN_IF_ERROR(fromCublas(cublas().setStream(blas.handle(), stream), "binding cuBLAS to the stream"));
  // Row-major Y[rows, width] = X[rows, in] . W[in, width] is, read column-major, Y^T = W^T . X^T:
  // a column-major GEMM with m = width, n = rows, k = in and the row-major leading dimensions.
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;  // beta 0: y is not read
  if (in == 0) {
    if (!accumulate) RAG_RETURN_IF_ERROR(fromCuda(cudaMemset2DAsync(y + o0, static_cast<size_t>(ldy) * sizeof(float), 0,
                                                                    static_cast<size_t>(width) * sizeof(float),
                                                                    static_cast<size_t>(rows), stream),
                                                  "clearing the GPU linear's output"));
  } else {
    RAG_RETURN_IF_ERROR(fromCublas(cublas().sgemm(blas.handle(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(width),
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
