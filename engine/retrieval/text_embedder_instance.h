// The embedding service's real instance: one loaded model::TextEmbedder behind the Embedder
// interface of retrieval/embedding_service.h, on the CPU or on CUDA.
//
//   RAG_ASSIGN_OR_RETURN(auto inst, TextEmbedderInstance::load({.dir = "datasets/models/rag-embedder"}));
//   EmbeddingService::create({.name = "cpu[0]", .embedder = inst, .cores = {0}}, std::nullopt, {});
//
// Compute threads: libtorch's intra-op pool and the BLAS pool are process-wide, so an
// instance's threads are set once for the process with model::setComputeThreads (runner.h),
// normally to the cores of one instance; its worker thread's pinning (EmbeddingInstance::cores)
// keeps each instance on its own cores. Linked with ragmodel (the model is libtorch code), but
// the header is torch-free.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "model/text_embedder.h"
#include "retrieval/embedding_service.h"

namespace rag::retrieval {

struct TextEmbedderInstanceParams {
  std::filesystem::path dir;          // config.json, model.safetensors, tokenizer.json
  std::string dtype = "f32";          // or "bf16"
  int64_t maxTokens = 128;
  DeviceKind device = DeviceKind::Cpu;
};

class TextEmbedderInstance final : public Embedder {
public:
  // TextEmbedder::load's errors; Unavailable for CUDA without a CUDA device.
  static Result<std::shared_ptr<TextEmbedderInstance>> load(const TextEmbedderInstanceParams& params);

  int64_t dim() const override;
  // One TextEmbedder::embed call over the whole batch (it pads to the longest text).
  Result<std::vector<float>> embed(std::span<const std::string> texts) override;
  const model::TextEmbedder& model() const { return *m_model; }

private:
  explicit TextEmbedderInstance(std::unique_ptr<model::TextEmbedder> model) : m_model(std::move(model)) {}
  std::unique_ptr<model::TextEmbedder> m_model;
};

}  // namespace rag::retrieval
