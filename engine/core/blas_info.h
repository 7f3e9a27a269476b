// Which kernel set the process's OpenBLAS runs, for benchmark reports, and a way to make it run
// the right one.
//
// OpenBLAS picks its kernels once, while the library loads: from OPENBLAS_CORETYPE when that is
// set, else from the CPU (on this project's AMD Zen 5 machines, Cooperlake: AVX-512 with
// BF16). A pinned older set changes every matrix product's speed (measured here: prefill of the
// 1.3M-parameter model at 224 tokens, 27k tokens/s with Haswell's kernels against 43k with
// SkylakeX's, medians of five alternating runs), so `bench llm` and `bench serve` print it.
//
// Debian 12's OpenBLAS (0.3.21) does not know newer CPUs (the development machine's Intel Xeon
// and the lent GPU machines' hosts: "Core: Prescott" with OPENBLAS_VERBOSE=2) and falls back to
// its SSE3 kernels there: libtorch's products (training, the reference paths) and FAISS's exact
// search then run slower than with SkylakeX's (training 2.3-2.9x, `ragraph train lm` and
// `train embedder` on 2 threads; libtorch decode at batch 32-64 in `bench llm` 1.4-1.6x). Since only the environment at load time counts,
// the CLI and the workbench start themselves again with OPENBLAS_CORETYPE set when that happened
// (restartWithBetterBlasKernels, the first thing their main() does).
#pragma once

#include <string>
#include <string_view>

namespace rag {

// The loaded OpenBLAS's kernel set ("Haswell", "Cooperlake", ...), or "" when no OpenBLAS is in
// this process.
std::string blasKernelSet();

// What the CPU offers OpenBLAS's kernels.
struct CpuVectorFeatures {
  bool avx512 = false;   // AVX-512 F, BW, DQ and VL: SkylakeX's kernels
  bool avx2Fma = false;  // AVX2 and FMA: Haswell's
};
CpuVectorFeatures cpuVectorFeatures();

// The kernel set to pin instead of `loaded` on a CPU with `cpu`: "SkylakeX" or "Haswell" when
// OpenBLAS fell back to its SSE3 "Prescott" set on a CPU that has those; "" otherwise (nothing to
// change: it chose itself, or the CPU has nothing better).
std::string betterBlasKernelSet(std::string_view loaded, const CpuVectorFeatures& cpu);

// When OPENBLAS_CORETYPE is unset and betterBlasKernelSet() names a set, sets it and replaces this
// process with a new run of the same program and arguments (execv of /proc/self/exe). Returns
// when there is nothing to change, when RAGWB_BLAS_RESTART=0, or when the exec fails (the program
// then goes on with the kernels it has). Call it first in main(), before any thread starts.
void restartWithBetterBlasKernels(char** argv);

}  // namespace rag
