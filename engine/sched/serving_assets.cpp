#include "sched/serving_assets.h"

#include "model/runner.h"
#include "model/text_embedder.h"
#include "model/tokenizer.h"
#include "retrieval/fusion_calibration.h"
#include "retrieval/passage_index.h"
#include "sched/step_device.h"

namespace rag {

Result<std::shared_ptr<const ServingAssets>> loadServingAssets(const ServingParams& params,
                                                               const std::filesystem::path& corpus) {
  auto a = std::make_shared<ServingAssets>();
  a->corpus = corpus;
  if (params.modelDir.empty())
    return Status::invalidArgument("no model directory: set ServingParams::modelDir (e.g. datasets/models/rag-llama)");
  RAG_ASSIGN_OR_RETURN(a->model, model::loadModel(params.modelDir, params.dtype));
  Result<model::Tokenizer> tok = model::Tokenizer::load(params.modelDir);
  if (!tok)
    return tok.status().withContext("the model at " + params.modelDir.string() + " needs its tokenizer.json next to it");
  a->tokenizer = std::make_shared<const model::Tokenizer>(std::move(*tok));
  if (params.embedderDir.empty())
    return Status::invalidArgument("no embedder directory: set ServingParams::embedderDir (e.g. datasets/models/rag-embedder)");
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<model::TextEmbedder> emb, model::TextEmbedder::load(params.embedderDir));
  RAG_ASSIGN_OR_RETURN(model::EncoderBackendFactory encoder, encoderBackendFor(params.encoderDevice));
  if (encoder) RAG_RETURN_IF_ERROR(emb->useBackend(encoder, params.encoderDeviceMinTexts));
  const std::filesystem::path base = params.indexBase.empty() ? retrieval::defaultIndexBase(corpus) : params.indexBase;
  RAG_ASSIGN_OR_RETURN(retrieval::PassageIndex index, retrieval::PassageIndex::load(base, emb->fingerprint()));
  RAG_ASSIGN_OR_RETURN(auto fusion, retrieval::loadFusionCalibration(base, emb->fingerprint()));
  if (fusion) a->fusion = fusion->fusion;
  a->embedder = std::shared_ptr<const model::TextEmbedder>(std::move(emb));
  a->index = std::make_shared<const retrieval::PassageIndex>(std::move(index));
  return std::shared_ptr<const ServingAssets>(std::move(a));
}

}  // namespace rag
