// Device discovery and error reporting shared by the kernels' host launchers. Plain C++ so
// that engine code and tests can include it without nvcc.
#pragma once

#include <string>
#include <string_view>

#include "rag/status.h"

namespace rag::cuda {

// Number of usable CUDA devices; 0 when there is no device or no (recent enough) driver.
// `why` (optional) receives the runtime's reason when the answer is 0.
int deviceCount(std::string* why = nullptr);

// Name and memory of device `index` ("NVIDIA H100 80GB HBM3, 79.1 GiB"); empty if absent.
std::string deviceDescription(int index);

// Makes `index` the calling thread's current device (a per-thread setting: a backend created on
// one thread and driven on another selects its device at every entry point).
Status useDevice(int index);

// Status of a CUDA runtime call (`err` is its cudaError_t): Internal with the runtime's message
// and `what` ("copying cluster 7 to the device") for a failure, ok for cudaSuccess.
Status fromCuda(int err, std::string_view what);

}  // namespace rag::cuda
