// Device discovery and error reporting shared by the kernels' host launchers. Plain C++ so
// that engine code and tests can include it without nvcc.
#pragma once

#include <string>

namespace rag::cuda {

// Number of usable CUDA devices; 0 when there is no device or no (recent enough) driver.
// `why` (optional) receives the runtime's reason when the answer is 0.
int deviceCount(std::string* why = nullptr);

// Name and memory of device `index` ("NVIDIA H100 80GB HBM3, 79.1 GiB"); empty if absent.
std::string deviceDescription(int index);

}  // namespace rag::cuda
