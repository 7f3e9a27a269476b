// A BERT encoder's forward pass on the GPU: TextEmbedder's backend (model/encoder_backend.h),
// mirroring its CPU kernels (TextEmbedder::Impl::embedWithKernels) op for op over a batch of
// texts packed row after row without padding: word + position + type embeddings -> LayerNorm;
// per layer the fused q|k|v product (cuBLAS, cublas_linear.cuh) -> bidirectional attention per
// text (encoder_attention.cuh) -> output product accumulated into x -> LayerNorm -> intermediate
// product -> GELU (gelu.cuh) -> output product accumulated -> LayerNorm (layer_norm.cuh); then
// each text's mean over its rows, L2-normalised. tests/kernels/test_bert_encoder.cpp compares
// its vectors with the CPU kernels' on a tiny random encoder and on the shipped one.
//
//   RAG_ASSIGN_OR_RETURN(auto e, model::TextEmbedder::load("datasets/models/rag-embedder"));
//   RAG_RETURN_IF_ERROR(e->useBackend(cuda::cudaEncoderBackendFactory()));
//
// The encoder owns device copies of the weights, buffers that grow with the largest batch, a
// cuBLAS handle and its own stream; encode() returns with the vectors on the host. F32 only;
// one caller at a time (TextEmbedder serialises its callers). Torch-free and Qt-free.
#pragma once

#include <memory>
#include <string>

#include "model/encoder_backend.h"
#include "rag/status.h"

namespace rag::cuda {

class CudaBertEncoder final : public model::EncoderBackend {
public:
  // Copies the weights to the current device. InvalidArgument for a shape the kernels cannot
  // run (hidden size not a multiple of the heads, a head wider than kMaxAttentionHeadDim) or a
  // missing weight; Unavailable when cuBLAS cannot be opened; Internal for a CUDA failure.
  static Result<std::unique_ptr<CudaBertEncoder>> create(const model::EncoderShape& shape,
                                                         const model::EncoderWeights& weights, int device = 0);
  ~CudaBertEncoder() override;
  CudaBertEncoder(const CudaBertEncoder&) = delete;
  CudaBertEncoder& operator=(const CudaBertEncoder&) = delete;

  // "cuda:0 NVIDIA H200, 139.8 GiB, encoder"
  std::string description() const override;
  // InvalidArgument for an empty text, one longer than the positions or a token outside the
  // vocabulary.
  Status encode(std::span<const std::vector<int32_t>* const> texts, float* out, int64_t outStride) override;

private:
  struct Impl;
  explicit CudaBertEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// A TextEmbedder backend on CUDA device `device`: Unavailable, naming the fix, when there is no
// such device or cuBLAS cannot be opened.
model::EncoderBackendFactory cudaEncoderBackendFactory(int device = 0);

}  // namespace rag::cuda
