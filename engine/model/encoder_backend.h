// The seam between TextEmbedder and a device that runs its BERT encoder elsewhere (a GPU:
// kernels/bert_encoder.h), as step_backend.h is the runner's. TextEmbedder keeps the tokenizer,
// the batching and the lexical branch; the backend owns a copy of the encoder's weights and
// turns each text's token ids into its unit mean-pooled vector, the CPU kernels' computation
// (TextEmbedder::Impl::embedWithKernels) op for op:
//
//   RAG_ASSIGN_OR_RETURN(auto e, TextEmbedder::load("datasets/models/rag-embedder"));
//   RAG_RETURN_IF_ERROR(e->useBackend(cuda::cudaEncoderBackendFactory()));  // query vectors from the GPU
//
// The serving engine does this with --encoder-device cuda (ServingParams::encoderDevice): the
// query encoder then shares the device with generation instead of the retrieval worker's CPU
// cores (README, *On a GPU*, for what it gains and costs each policy). Torch-free and Qt-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rag/status.h"

namespace rag::model {

struct EncoderShape {
  int64_t vocab = 0, positions = 0, hidden = 0, heads = 0, intermediate = 0;
  float layerNormEps = 1e-12f;
};

// Host F32 weights of one layer, projections transposed to [in, out] and q|k|v stacked, as the
// CPU kernels hold them.
struct EncoderLayerWeights {
  const float* qkvT = nullptr;      // [hidden, 3 hidden]
  const float* qkvBias = nullptr;   // [3 hidden]
  const float* attnOutT = nullptr;  // [hidden, hidden]
  const float* attnOutBias = nullptr;
  const float* attnNorm = nullptr;  // LayerNorm gain and bias [hidden]
  const float* attnNormBias = nullptr;
  const float* interT = nullptr;  // [hidden, intermediate]
  const float* interBias = nullptr;
  const float* outT = nullptr;  // [intermediate, hidden]
  const float* outBias = nullptr;
  const float* outNorm = nullptr;
  const float* outNormBias = nullptr;
};

struct EncoderWeights {
  const float* word = nullptr;       // [vocab, hidden]
  const float* position = nullptr;   // [positions, hidden]
  const float* tokenType = nullptr;  // type 0's row [hidden]
  const float* embedNorm = nullptr;
  const float* embedNormBias = nullptr;
  std::vector<EncoderLayerWeights> layers;
};

class EncoderBackend {
public:
  virtual ~EncoderBackend() = default;
  // "cuda:0 NVIDIA H200, 139.8 GiB": where the vectors come from.
  virtual std::string description() const = 0;
  // Text t's unit mean-pooled vector (hidden floats) at out + t * outStride, for texts of token
  // ids each non-empty and at most `positions` long. One caller at a time.
  virtual Status encode(std::span<const std::vector<int32_t>* const> texts, float* out, int64_t outStride) = 0;
};

// Makes a backend for an encoder: copies `weights` (valid during the call only).
using EncoderBackendFactory =
    std::function<Result<std::unique_ptr<EncoderBackend>>(const EncoderShape& shape, const EncoderWeights& weights)>;

}  // namespace rag::model
