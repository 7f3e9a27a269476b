#include "sched/step_device.h"

#include <charconv>

#if RAGWB_HAVE_CUDA
#include "bert_encoder.h"
#include "cuda_check.h"
#include "llama_step.h"
#endif

namespace rag {

namespace {

// The CUDA device that `device` names (cuda, cuda:N) and this machine has; `flag` names the
// option in the messages.
Result<int> cudaDeviceIndex(std::string_view device, std::string_view flag) {
  int index = 0;
  if (device.starts_with("cuda:")) {
    const std::string_view n = device.substr(5);
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (ec != std::errc() || end != n.data() + n.size() || n.empty() || index < 0)
      return Status::invalidArgument(std::string(flag) + " '" + std::string(device) + "': a CUDA device is cuda or cuda:N (N >= 0)");
  } else if (device != "cuda") {
    return Status::invalidArgument(std::string(flag) + " takes cpu, cuda or cuda:N, not '" + std::string(device) + "'");
  }
  const std::string what = std::string(flag) + " " + std::string(device);
#if RAGWB_HAVE_CUDA
  std::string why;
  const int count = cuda::deviceCount(&why);
  if (count == 0) return Status::unavailable(what + ": no CUDA device here (" + why + "); use " + std::string(flag) + " cpu");
  if (index >= count)
    return Status::unavailable(what + ": this machine has " + std::to_string(count) + " CUDA device(s), cuda:0 to cuda:" +
                               std::to_string(count - 1));
  return index;
#else
  return Status::unavailable(what +
                             ": this build has no CUDA kernels (nvcc was not found when it was configured; "
                             "configure with RAGWB_CUDA=ON where the CUDA toolkit is installed); use " + std::string(flag) + " cpu");
#endif
}

}  // namespace

Result<model::StepBackendFactory> stepBackendFor(std::string_view device, [[maybe_unused]] const model::GpuStepOptions& gpu) {
  if (device == "cpu") return model::StepBackendFactory();
  RAG_ASSIGN_OR_RETURN([[maybe_unused]] int index, cudaDeviceIndex(device, "--device"));
#if RAGWB_HAVE_CUDA
  return cuda::cudaStepBackendFactory(index, gpu);
#else
  return Status::internal("unreachable: no CUDA in this build");
#endif
}

Result<model::EncoderBackendFactory> encoderBackendFor(std::string_view device) {
  if (device == "cpu") return model::EncoderBackendFactory();
  RAG_ASSIGN_OR_RETURN([[maybe_unused]] int index, cudaDeviceIndex(device, "--encoder-device"));
#if RAGWB_HAVE_CUDA
  return cuda::cudaEncoderBackendFactory(index);
#else
  return Status::internal("unreachable: no CUDA in this build");
#endif
}

}  // namespace rag
