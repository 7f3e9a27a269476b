#include "retrieval/text_embedder_instance.h"

#include <algorithm>

namespace rag::retrieval {

Result<std::shared_ptr<TextEmbedderInstance>> TextEmbedderInstance::load(const TextEmbedderInstanceParams& params) {
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<model::TextEmbedder> m,
                       model::TextEmbedder::load(params.dir, params.dtype, params.maxTokens,
                                                 deviceKindName(params.device)));
  return std::shared_ptr<TextEmbedderInstance>(new TextEmbedderInstance(std::move(m)));
}

int64_t TextEmbedderInstance::dim() const { return m_model->dim(); }

Result<std::vector<float>> TextEmbedderInstance::embed(std::span<const std::string> texts) {
  return m_model->embed(texts, std::max<int64_t>(1, static_cast<int64_t>(texts.size())));
}

}  // namespace rag::retrieval
