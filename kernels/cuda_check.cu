#include "cuda_check.h"

#include <cuda_runtime.h>

#include <cstdio>

namespace rag::cuda {

int deviceCount(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device present";
  return n;
}

std::string deviceDescription(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) return {};
  char buf[320];
  std::snprintf(buf, sizeof buf, "%s, %.1f GiB, sm_%d%d", prop.name,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), prop.major,
                prop.minor);
  return buf;
}

Status fromCuda(int err, std::string_view what) {
  if (err == cudaSuccess) return Status::ok();
  return Status::internal(std::string(what) + ": " +
                          cudaGetErrorString(static_cast<cudaError_t>(err)));
}

Status useDevice(int index) { return fromCuda(cudaSetDevice(index), "selecting the CUDA device"); }

}  // namespace rag::cuda
