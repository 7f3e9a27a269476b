#include "core/blas_info.h"

#include <dlfcn.h>

namespace rag {

std::string blasKernelSet() {
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? name : "";
}

}  // namespace rag
