// What serving reads and never changes, loaded once and shared by every engine over it
// (rag/engine.h's opaque ServingAssets): the model, its tokenizer, the query embedder and the
// passage index, hybrid retrieval's fusion constants measured for that embedder
// (retrieval/fusion_calibration.h; the defaults when none are stored), and the corpus they were
// loaded for.
#pragma once

#include <filesystem>
#include <memory>

#include "rag/engine.h"
#include "retrieval/bm25_index.h"

namespace rag {
namespace model {
class LlamaModel;
class Tokenizer;
class TextEmbedder;
}  // namespace model
namespace retrieval {
class PassageIndex;
}

class ServingAssets {
public:
  std::shared_ptr<const model::LlamaModel> model;
  std::shared_ptr<const model::Tokenizer> tokenizer;
  std::shared_ptr<const model::TextEmbedder> embedder;
  std::shared_ptr<const retrieval::PassageIndex> index;
  retrieval::HybridFusion fusion;
  std::filesystem::path corpus;
};

}  // namespace rag
