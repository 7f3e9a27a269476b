// The small real-format WordNet and FOLDOC files in tests/fixtures/corpus.
#pragma once

#include <filesystem>

#include "corpus/corpus_builder.h"

inline rag::corpus::CorpusSources fixtureSources() {
  rag::corpus::CorpusSources s;
  s.wordnetDir = std::filesystem::path(RAGWB_FIXTURES_DIR) / "corpus/wordnet";
  s.foldocDir = std::filesystem::path(RAGWB_FIXTURES_DIR) / "corpus/foldoc";
  return s;
}
