// Growing a Llama checkpoint deeper without changing what it computes (issue 21: the 1.3M-parameter
// model reached its limit on the workflow roles). New decoder layers are interleaved with the old
// ones, each a copy of the layer before it with its two output projections (attention's o_proj
// and the MLP's down_proj, and their biases) set to zero: a pre-norm residual block whose outputs
// are zero adds nothing to the residual stream, so the grown model's logits equal the original's
// until training moves the new layers (Net2Net's function-preserving growth, in its simplest,
// depth-wise form; the copy gives the new layers useful input features rather than noise).
//
//   RAG_ASSIGN_OR_RETURN(GrownModel g, growLlamaDepth({.modelDir = "rag-llama-roles", .out = "grown", .layers = 8}));
//   // then: ragraph train lm --init grown ...
//
// Torch-free: it reads and writes safetensors bytes. Old layer k goes to position
// k + floor(k * (N - L) / L) of N, followed by its share of the new ones.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "rag/status.h"

namespace rag::model {

struct GrowOptions {
  std::filesystem::path modelDir;  // config.json + model.safetensors (+ tokenizer.json, copied)
  std::filesystem::path out;       // a new directory (refused when it exists and is not empty)
  int64_t layers = 0;              // the grown depth: more than the model has
};

struct GrownModel {
  int64_t oldLayers = 0, layers = 0;
  std::vector<int64_t> newLayerIndexes;  // positions of the added layers in the grown model
  int64_t parameters = 0;                // of the grown model
};

// Errors: the model's (missing config or weights, another architecture than Llama), layers not
// more than the model has (or over 256), an output directory that exists with files in it or is
// the model's own; nothing is left half-written in `out` (it is written beside it and renamed).
Result<GrownModel> growLlamaDepth(const GrowOptions& options);

}  // namespace rag::model
