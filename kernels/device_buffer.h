// Device memory owned by one object, for the kernels' host paths, CudaLlamaStep and the gpu
// tests. Plain C++ (no CUDA header), so tests compiled by the host compiler include it.
//
//   cuda::DeviceBuffer x;
//   RAG_RETURN_IF_ERROR(x.upload(host.data(), host.size() * sizeof(float), "copying x"));
//   RAG_RETURN_IF_ERROR(cuda::rmsNorm(x.as<float>(), g, rows, dim, eps, x.as<float>(), stream));
//   RAG_RETURN_IF_ERROR(x.download(host.data(), host.size() * sizeof(float), "reading x"));
//
// Copies go on the legacy default stream (cudaMemcpy), which the kernels' tests use, or on the
// `stream` given (cudaMemcpyAsync), in order with that stream's kernels. Either way a write may
// reuse its host memory and a download has the data on the host when it returns.
#pragma once

#include <cstddef>
#include <string_view>

#include "rag/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace rag::cuda {

class DeviceBuffer {
public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Frees what it held and allocates `bytes` (uninitialised; none for 0). `what` names the
  // buffer in the error ("allocating the KV pool").
  Status allocate(size_t bytes, std::string_view what);
  // Grows the buffer to at least `bytes`, to a power of two so that a growing batch reallocates
  // rarely; the contents are not kept. `moved` (optional) is set when it was reallocated: work
  // captured with the old address (a CUDA graph) is stale.
  Status reserve(size_t bytes, std::string_view what, bool* moved = nullptr);
  // allocate(bytes) and a copy of `host` into it.
  Status upload(const void* host, size_t bytes, std::string_view what);
  // Copies `bytes` from host into the buffer at byte `offset` (within size()), keeping the
  // allocation: for buffers reused across steps.
  Status write(const void* host, size_t bytes, std::string_view what, size_t offset = 0, cudaStream_t stream = nullptr);
  // Copies `bytes` (at most size()) from the start of the buffer, or from byte `offset`, to host.
  Status download(void* host, size_t bytes, std::string_view what, size_t offset = 0,
                  cudaStream_t stream = nullptr) const;
  // Sets every byte to zero.
  Status zero(std::string_view what);

  template <typename T>
  T* as() const {
    return static_cast<T*>(m_ptr);
  }
  size_t size() const { return m_bytes; }

private:
  void release();
  void* m_ptr = nullptr;
  size_t m_bytes = 0;
};

// Waits for all work on the device; the error of any kernel that failed since the last check.
Status synchronize(std::string_view what);

// The current device's memory bandwidth: bytes read plus written per second by a device-to-
// device copy of `bytes`, best of five after a warm-up. The floor under a decode step that
// streams its weights (`ragraph bench llm --device cuda`).
Result<double> deviceCopyBandwidth(size_t bytes);

}  // namespace rag::cuda
