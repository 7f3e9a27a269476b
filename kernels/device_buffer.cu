#include "device_buffer.h"

#include <bit>

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>

#include "cuda_check.h"

namespace rag::cuda {

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : m_ptr(std::exchange(other.m_ptr, nullptr)), m_bytes(std::exchange(other.m_bytes, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    m_ptr = std::exchange(other.m_ptr, nullptr);
    m_bytes = std::exchange(other.m_bytes, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (m_ptr) cudaFree(m_ptr);
  m_ptr = nullptr;
  m_bytes = 0;
}

Status DeviceBuffer::allocate(size_t bytes, std::string_view what) {
  release();
  if (bytes == 0) return Status::ok();
  RAG_RETURN_IF_ERROR(fromCuda(cudaMalloc(&m_ptr, bytes), what));
  m_bytes = bytes;
  return Status::ok();
}

Status DeviceBuffer::reserve(size_t bytes, std::string_view what, bool* moved) {
  if (m_bytes >= bytes) return Status::ok();
  if (moved) *moved = true;
  return allocate(std::bit_ceil(bytes), what);
}

Status DeviceBuffer::upload(const void* host, size_t bytes, std::string_view what) {
  RAG_RETURN_IF_ERROR(allocate(bytes, what));
  if (bytes == 0) return Status::ok();
  return fromCuda(cudaMemcpy(m_ptr, host, bytes, cudaMemcpyHostToDevice), what);
}

Status DeviceBuffer::write(const void* host, size_t bytes, std::string_view what, size_t offset, cudaStream_t stream) {
  if (offset + bytes > m_bytes)
    return Status::invalidArgument(std::string(what) + ": writing " + std::to_string(bytes) + " bytes at " +
                                   std::to_string(offset) + " into a device buffer of " + std::to_string(m_bytes));
  if (bytes == 0) return Status::ok();
  char* dst = static_cast<char*>(m_ptr) + offset;
  // From pageable memory the async copy stages `host` before it returns: the caller may reuse it.
  if (stream) return fromCuda(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream), what);
  return fromCuda(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), what);
}

Status DeviceBuffer::download(void* host, size_t bytes, std::string_view what, size_t offset,
                              cudaStream_t stream) const {
  if (offset + bytes > m_bytes)
    return Status::invalidArgument(std::string(what) + ": reading " + std::to_string(bytes) + " bytes at " +
                                   std::to_string(offset) + " from a device buffer of " + std::to_string(m_bytes));
  if (bytes == 0) return Status::ok();
  const char* src = static_cast<const char*>(m_ptr) + offset;
  if (!stream) return fromCuda(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), what);
  RAG_RETURN_IF_ERROR(fromCuda(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream), what));
  return fromCuda(cudaStreamSynchronize(stream), what);
}

Status DeviceBuffer::zero(std::string_view what) {
  if (m_bytes == 0) return Status::ok();
  return fromCuda(cudaMemset(m_ptr, 0, m_bytes), what);
}

Status synchronize(std::string_view what) { return fromCuda(cudaDeviceSynchronize(), what); }

Result<double> deviceCopyBandwidth(size_t bytes) {
  DeviceBuffer from, to;
  RAG_RETURN_IF_ERROR(from.allocate(bytes, "allocating the bandwidth probe"));
  RAG_RETURN_IF_ERROR(to.allocate(bytes, "allocating the bandwidth probe"));
  RAG_RETURN_IF_ERROR(from.zero("clearing the bandwidth probe"));
  cudaEvent_t start = nullptr, stop = nullptr;
  RAG_RETURN_IF_ERROR(fromCuda(cudaEventCreate(&start), "creating a CUDA event"));
  if (Status s = fromCuda(cudaEventCreate(&stop), "creating a CUDA event"); !s) {
    cudaEventDestroy(start);
    return s;
  }
  double best = 0;
  Status status = Status::ok();
  for (int rep = 0; rep < 6 && status.isOk(); ++rep) {  // the first is the warm-up
    cudaEventRecord(start);
    status = fromCuda(cudaMemcpy(to.as<void>(), from.as<void>(), bytes, cudaMemcpyDeviceToDevice), "the bandwidth probe's copy");
    cudaEventRecord(stop);
    float ms = 0;
    if (status.isOk()) status = fromCuda(cudaEventSynchronize(stop), "timing the bandwidth probe");
    if (status.isOk()) status = fromCuda(cudaEventElapsedTime(&ms, start, stop), "timing the bandwidth probe");
    if (status.isOk() && rep > 0 && ms > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.isOk()) return status;
  return best;
}

}  // namespace rag::cuda
