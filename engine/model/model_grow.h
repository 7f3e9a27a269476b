// Growing a Llama checkpoint deeper and wider without changing what it computes (issue 21: the
// 1.3M-parameter model reached its limit on the workflow roles), so that training a larger model
// starts from everything the small one learnt (Net2Net's function-preserving growth).
//
// Deeper: new decoder layers are interleaved with the old ones, each a copy of the layer before it
// with its two output projections (attention's o_proj and the MLP's down_proj, and their biases)
// set to zero: a pre-norm residual block whose outputs are zero adds nothing to the residual
// stream (the copy gives the new layers useful input features rather than noise).
//
// Wider (more hidden channels, FFN units, attention heads of the same size): every weight that
// *reads* gains random rows (new heads' q/k/v, new FFN units' gate/up; the old rows read the new
// channels through zeros until trained), every weight that *writes* the residual stream gains zero
// rows and columns (o_proj, down_proj, the embedding's new channels), so the new channels stay
// zero and the new units add nothing until training moves them; RMSNorm's mean over more
// channels is made up for by scaling its gains by sqrt(hidden / new hidden) and its epsilon by
// hidden / new hidden. Gradients reach the
// new weights from the first step (the zero writers' gradients are their inputs, which the random
// readers make non-zero), as LoRA's zero-initialised B does.
//
//   RAG_ASSIGN_OR_RETURN(GrownModel g, growLlama({.modelDir = "rag-llama-roles", .out = "grown",
//                                                 .hidden = 256, .intermediate = 704, .heads = 8}));
//   // then: ragraph train lm --init grown ...
//
// Torch-free: it reads and writes safetensors bytes. Old layer k goes to position
// k + floor(k * (N - L) / L) of N, followed by its share of the new ones. Widening needs F32
// weights (the shipped models' type); deepening copies any dtype.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "rag/status.h"

namespace rag::model {

struct GrowOptions {
  std::filesystem::path modelDir;  // config.json + model.safetensors (+ tokenizer.json, copied)
  std::filesystem::path out;       // a new directory (refused when it exists and is not empty)
  int64_t layers = 0;              // the grown depth; 0: the model's
  int64_t hidden = 0;              // the grown residual width; 0: the model's
  int64_t intermediate = 0;        // the grown FFN width; 0: the model's
  int64_t heads = 0;               // attention heads (head size kept); 0: the model's
  int64_t kvHeads = 0;             // key/value heads; 0: heads over the model's group size
  uint64_t seed = 1;               // the random reading weights of the new channels and units
};

struct GrownModel {
  int64_t oldLayers = 0, layers = 0;
  std::vector<int64_t> newLayerIndexes;  // positions of the added layers in the grown model
  int64_t oldParameters = 0;             // of the model grown from
  int64_t parameters = 0;                // of the grown model
};

// Errors: the model's (missing config or weights, another architecture than Llama), nothing to
// grow, any size below the model's (or a depth over 256), heads whose group size (heads per
// key/value head) differs from the model's, widening a model whose weights are not F32, an output
// directory that exists with files in it or is the model's own; nothing is left half-written in
// `out` (it is written beside it and renamed).
Result<GrownModel> growLlama(const GrowOptions& options);

}  // namespace rag::model
