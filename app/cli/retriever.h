// The retrieval the CLI commands share: the embedder (--embedder DIR, else the shipped
// datasets/models/rag-embedder) and the passage index built from it next to the corpus
// (--index BASE, else <corpus>.index), searched through the IVF at --nprobe clusters (without
// it: the nprobe `ragraph index calibrate` measured for this index, else 64), and fused with BM25
// for hybrid retrieval by the constants measured with it (else HybridFusion's defaults). Queries
// are embedded in --embedder-dtype (f32 by default; the index may have been built in bf16).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "corpus/qa_prompt.h"
#include "knowledge/kg_retriever.h"
#include "retrieval/bm25_index.h"
#include "model/text_embedder.h"
#include "retrieval/passage_index.h"

namespace rag::cli {

inline constexpr int64_t kDefaultNprobe = 64;

std::filesystem::path defaultEmbedderDir();

// --embedder DIR, or the shipped one; NotFound naming `ragraph train embedder` when neither.
Result<std::filesystem::path> readEmbedderDir(Args& args);

struct Retriever {
  std::unique_ptr<model::TextEmbedder> embedder;
  std::optional<retrieval::PassageIndex> index;
  std::filesystem::path base;  // the index files' base path
  int64_t nprobe = kDefaultNprobe;
  std::string nprobeFrom = "fallback";  // "option" (--nprobe), "calibration" or "fallback"
  retrieval::HybridFusion fusion;
  std::string fusionFrom = "default";   // "calibration" or "default"

  // Reads --embedder, --index and --nprobe (from args) and loads both.
  static Result<Retriever> open(Args& args, const std::filesystem::path& corpus);
  // The embedder at `embedderDir` (queries in `dtype`), the index at `base` it built and its
  // measured fusion; nprobe stays the fallback.
  static Result<Retriever> load(const std::filesystem::path& embedderDir, const std::filesystem::path& base,
                                const std::string& dtype);
  // The top-k passage ids of each text, best first.
  Result<std::vector<std::vector<int64_t>>> search(std::span<const std::string> texts, int32_t k) const;
};

// Knowledge-graph retrieval as the CLI runs it outside the engine (`kg retrieve`, `bench
// depcache`): the corpus's graph, BM25 for related entities and the passage reader for linking,
// over `embedder` (which must outlive it). The serving engine builds the same on its retrieval
// worker (sched/retrieval_worker.cpp).
struct KgSetup {
  std::shared_ptr<const knowledge::KnowledgeGraph> graph;
  std::unique_ptr<retrieval::Bm25Index> bm25;
  std::unique_ptr<corpus::QaPromptReader> reader;
  std::unique_ptr<knowledge::KgRetriever> retriever;

  static Result<KgSetup> open(const std::filesystem::path& corpus, const model::TextEmbedder& embedder);
};

}  // namespace rag::cli
