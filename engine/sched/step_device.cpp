#include "sched/step_device.h"

#include <charconv>

#if RAGWB_HAVE_CUDA
#include "cuda_check.h"
#include "llama_step.h"
#endif

namespace rag {

Result<model::StepBackendFactory> stepBackendFor(std::string_view device, [[maybe_unused]] const model::GpuStepOptions& gpu) {
  if (device == "cpu") return model::StepBackendFactory();
  int index = 0;
  if (device.starts_with("cuda:")) {
    const std::string_view n = device.substr(5);
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (ec != std::errc() || end != n.data() + n.size() || n.empty() || index < 0)
      return Status::invalidArgument("--device '" + std::string(device) + "': a CUDA device is cuda or cuda:N (N >= 0)");
  } else if (device != "cuda") {
    return Status::invalidArgument("--device takes cpu, cuda or cuda:N, not '" + std::string(device) + "'");
  }
#if RAGWB_HAVE_CUDA
  std::string why;
  const int count = cuda::deviceCount(&why);
  if (count == 0) return Status::unavailable("--device " + std::string(device) + ": no CUDA device here (" + why + "); use --device cpu");
  if (index >= count)
    return Status::unavailable("--device " + std::string(device) + ": this machine has " + std::to_string(count) +
                               " CUDA device(s), cuda:0 to cuda:" + std::to_string(count - 1));
  return cuda::cudaStepBackendFactory(index, gpu);
#else
  return Status::unavailable("--device " + std::string(device) +
                             ": this build has no CUDA kernels (nvcc was not found when it was configured; "
                             "configure with RAGWB_CUDA=ON where the CUDA toolkit is installed); use --device cpu");
#endif
}

}  // namespace rag
