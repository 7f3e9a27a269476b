// Training a byte-level BPE tokenizer (GPT-2 style) and writing it as a Hugging Face
// tokenizer.json that Tokenizer::load and HF `tokenizers` both read.
//
//   std::vector<std::string> docs = ...;
//   BpeTrainParams params;
//   params.vocabSize = 8192;
//   RAG_ASSIGN_OR_RETURN(BpeTrainStats stats,
//                        trainByteLevelBpeToFile(textsFrom(docs), params, "out/tokenizer.json"));
//
// The algorithm is the standard incremental one: texts are split with the GPT-2 regex, unique
// pieces are counted, adjacent symbol pairs are counted over the unique pieces weighted by
// their frequency, and after each merge only the pieces that contained the merged pair have
// their pair counts adjusted. The most frequent pair is merged next (ties: the pair of smaller
// ids, so training is deterministic).
//
// Vocabulary layout: the special tokens get ids 0..k-1 in the order given, the 256 byte symbols
// ids k..k+255 in byte order, then one id per merge in merge order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rag/progress.h"
#include "rag/status.h"

namespace rag::model {

// Fills `text` with the next training text and returns true, or returns false at the end.
using TextSource = std::function<bool(std::string& text)>;

// A TextSource over an in-memory list; the list must outlive the source.
TextSource textsFrom(std::span<const std::string> texts);

struct BpeTrainParams {
  // Final vocabulary size, special tokens and the 256 byte symbols included. Training stops
  // earlier when no pair occurs minPairCount times.
  int32_t vocabSize = 8192;
  // Added as special added_tokens (never split; never learned from the texts, where their
  // occurrences are skipped).
  std::vector<std::string> specialTokens = {"<|bos|>", "<|eos|>", "<|pad|>"};
  int64_t minPairCount = 2;
  ProgressFn progress;  // phases "counting words" (texts, total 0) and "merging" (merges)
};

struct BpeTrainStats {
  int64_t texts = 0;
  int64_t bytes = 0;
  int64_t uniqueWords = 0;
  int64_t merges = 0;
  int32_t vocabSize = 0;  // what was reached (may be below the requested size)
};

// Trains and returns the tokenizer.json text. InvalidArgument when vocabSize cannot hold the
// special tokens and the 256 byte symbols, or when a special token is empty or repeated.
Result<std::string> trainByteLevelBpe(const TextSource& next, const BpeTrainParams& params,
                                      BpeTrainStats* stats = nullptr);

// Trains and writes tokenizer.json atomically to `path`.
Result<BpeTrainStats> trainByteLevelBpeToFile(const TextSource& next, const BpeTrainParams& params,
                                              const std::filesystem::path& path);

}  // namespace rag::model
