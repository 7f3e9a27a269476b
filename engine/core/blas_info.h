// Which kernel set the process's OpenBLAS runs, for benchmark reports.
//
// OpenBLAS picks its kernels once, while the library loads: from OPENBLAS_CORETYPE when that is
// set, else from the CPU (on this project's AMD Zen 5 machines, Cooperlake: AVX-512 with
// BF16). A pinned older set changes every matrix product's speed (measured here: prefill of the
// 1.3M-parameter model at 224 tokens, 27k tokens/s with Haswell's kernels against 43k with
// SkylakeX's, medians of five alternating runs), so `bench llm` and `bench serve` print it.
#pragma once

#include <string>

namespace rag {

// The loaded OpenBLAS's kernel set ("Haswell", "Cooperlake", ...), or "" when no OpenBLAS is in
// this process.
std::string blasKernelSet();

}  // namespace rag
