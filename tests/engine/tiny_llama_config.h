// The tiny Llama shape the runner, segment-KV and DRAGON tests share: two layers of grouped-query
// attention (4 heads on 2 KV heads of width 16). Torch-free, so torch-free tests can use it too.
#pragma once

#include <cstdint>

#include "model/model_config.h"

namespace rag::model::testing {

inline LlamaConfig tinyConfig(int64_t vocab = 96) {
  LlamaConfig c;
  c.hiddenSize = 64;
  c.intermediateSize = 96;
  c.numHiddenLayers = 2;
  c.numAttentionHeads = 4;
  c.numKeyValueHeads = 2;
  c.headDim = 16;
  c.maxPositionEmbeddings = 256;
  c.vocabSize = vocab;
  return c;
}

}  // namespace rag::model::testing
