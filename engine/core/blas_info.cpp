#include "core/blas_info.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace rag {

std::string blasKernelSet() {
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? name : "";
}

CpuVectorFeatures cpuVectorFeatures() {
  CpuVectorFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  f.avx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return f;
}

std::string betterBlasKernelSet(std::string_view loaded, const CpuVectorFeatures& cpu) {
  // OpenBLAS names its kernel sets in mixed case ("Prescott"); compare without it.
  if (loaded.size() != 8 || strncasecmp(loaded.data(), "prescott", 8) != 0) return "";
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2Fma) return "Haswell";
  return "";
}

void restartWithBetterBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // chosen by the user, or by the run that started this one
  if (const char* off = std::getenv("RAGWB_BLAS_RESTART"); off && std::strcmp(off, "0") == 0) return;
  const std::string better = betterBlasKernelSet(blasKernelSet(), cpuVectorFeatures());
  if (better.empty()) return;
  if (setenv("OPENBLAS_CORETYPE", better.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");  // the exec failed: go on as we are
}

}  // namespace rag
