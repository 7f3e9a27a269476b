// Test helper for the torch tests: a tiny BERT embedder written to `dir` in Hugging Face format
// (tokenizer.json: a 300-token byte-level BPE trained on `texts`; config.json and
// model.safetensors: hidden 16, 2 layers, 2 heads, 32 positions, random weights from `seed`).
// Returns the model as saved, for reference computations.
#pragma once

#include "model/bert.h"  // torch before Qt

#include <filesystem>
#include <string>
#include <vector>

#include "core/fs.h"
#include "model/bpe_trainer.h"
#include "model/tokenizer.h"

inline rag::Result<rag::model::BertModel> writeTinyEmbedder(const std::filesystem::path& dir,
                                                            const std::vector<std::string>& texts, uint64_t seed) {
  rag::model::BpeTrainParams params;
  params.vocabSize = 300;
  RAG_ASSIGN_OR_RETURN(std::string json, rag::model::trainByteLevelBpe(rag::model::textsFrom(texts), params));
  std::filesystem::create_directories(dir);
  RAG_RETURN_IF_ERROR(rag::writeFileAtomic(dir / "tokenizer.json", json));
  RAG_ASSIGN_OR_RETURN(rag::model::Tokenizer tok, rag::model::Tokenizer::load(dir / "tokenizer.json"));
  rag::model::BertConfig c;
  c.architectureName = "BertModel";
  c.hiddenSize = 16;
  c.numHiddenLayers = 2;
  c.numAttentionHeads = 2;
  c.intermediateSize = 32;
  c.vocabSize = tok.vocabSize();
  c.maxPositionEmbeddings = 32;
  RAG_ASSIGN_OR_RETURN(rag::model::BertModel m, rag::model::BertModel::initRandom(c, seed));
  RAG_RETURN_IF_ERROR(m.save(dir));
  return m;
}
