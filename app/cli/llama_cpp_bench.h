// llama.cpp's llama-bench run on the same weights, for `ragraph bench llm --llama-bench BIN`:
// the decode comparison of issue 27 measured side by side in one run rather than from notes.
//
//   RAG_ASSIGN_OR_RETURN(std::filesystem::path gguf, exportForLlamaCpp(model, modelDir, tmpDir));
//   RAG_ASSIGN_OR_RETURN(double tps, runLlamaBench("/opt/llama.cpp/build/bin/llama-bench", gguf,
//                                                   {.generate = 64, .threads = 1}));
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "rag/status.h"

namespace rag::cli {

struct LlamaBenchRun {
  int64_t prompt = 0;    // llama-bench -p: prompt tokens processed in one batch (0: none)
  int64_t generate = 0;  // -n: tokens generated one at a time from an empty context (0: none)
  int64_t threads = 1;   // -t
  int64_t repetitions = 3;  // -r; llama-bench reports their mean
};

// Tokens per second llama-bench reports (its avg_ts) for one test: exactly one of prompt and
// generate is non-zero. The binary is started without a shell; its stderr is discarded, and its
// JSON (-o json) is parsed. Errors name the binary and what went wrong (not found, exit status,
// output that is not llama-bench's JSON).
Result<double> runLlamaBench(const std::filesystem::path& binary, const std::filesystem::path& gguf,
                             const LlamaBenchRun& run);

}  // namespace rag::cli
