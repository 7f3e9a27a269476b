// main() for `gpu` tests: without a usable CUDA device the test prints why and exits 77,
// which ctest reports as skipped (SKIP_RETURN_CODE), instead of failing or passing silently.
#pragma once

#include <QtTest>

#include <cstdio>

#include "cuda_check.h"

#define RAGWB_GPU_TEST_MAIN(TestClass)                                          \
  int main(int argc, char** argv) {                                             \
    std::string why;                                                            \
    if (rag::cuda::deviceCount(&why) == 0) {                                    \
      std::printf("SKIP: no CUDA device (%s)\n", why.c_str());                  \
      return 77;                                                                \
    }                                                                           \
    std::printf("device 0: %s\n", rag::cuda::deviceDescription(0).c_str());     \
    QCoreApplication app(argc, argv);                                           \
    TestClass tc;                                                               \
    return QTest::qExec(&tc, argc, argv);                                       \
  }
