// One side of the DRAGON demo as the CLI (`ragraph dragon`, `ragraph bench dragon`) and the
// workbench's DRAGON page (rag/dragon.h) run it: a model runner, retrieval from the side's own
// share of the corpus and the side's prompt format, as SideResources for session.h.
//
//   RAG_ASSIGN_OR_RETURN(auto cloud, loadDemoSide(Side::Cloud, model, tokenizer, {.modelDir = dir, .corpusPath = db}));
//   RAG_RETURN_IF_ERROR(serveCloud(link, cloud->res));
//
// Corpus split: the cloud retrieves WordNet passages (the public corpus), the device FOLDOC
// passages (its private documents), both by BM25 over the corpus's FTS5 index, so the two
// sides' scores are on one scale. Prompts are the served prompts' layout: each passage with its
// newline, then "Question: ...\nAnswer:", tokenized piece by piece.
//
// Not thread-safe: one thread drives a side (its runner).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dragon/session.h"
#include "model/runner.h"
#include "model/tokenizer.h"
#include "retrieval/bm25_index.h"
#include "storage/sqlite.h"

namespace rag::dragon {

struct DemoSideParams {
  std::filesystem::path modelDir;  // where the weights came from: their first MiB joins the fingerprint
  std::string corpusPath;          // corpus.db with its FTS5 index
  bool deterministic = false;      // RunnerParams::deterministic
  bool kernels = true;             // RunnerParams::kernels (off: libtorch ops, a slower device)
  double scoreTemperature = 1;     // SideResources::scoreTemperature
  int64_t kvBudgetBytes = 256ll << 20;  // RunnerParams::kvBudgetBytes
  model::StepBackendFactory backend{};  // RunnerParams::backend (--device): empty on the CPU
};

struct DemoSide {
  std::shared_ptr<const model::LlamaModel> model;
  std::shared_ptr<const model::Tokenizer> tokenizer;
  std::unique_ptr<model::ModelRunner> runner;
  std::optional<retrieval::Bm25Index> bm25;
  sql::Db corpus;
  std::string source;  // "foldoc" (device) | "wordnet" (cloud)
  SideResources res;   // points into this object: keep it alive (and in place) while res is used
};

// Opens the corpus and its BM25 index, creates the runner on `model` and profiles its decode
// time (the profiler's offline fit). NotFound without a tokenizer; the corpus's and runner's
// errors otherwise.
Result<std::unique_ptr<DemoSide>> loadDemoSide(Side side, std::shared_ptr<const model::LlamaModel> model,
                                               std::shared_ptr<const model::Tokenizer> tokenizer,
                                               const DemoSideParams& params);

// An answer's text, special tokens skipped, trimmed.
std::string answerText(const model::Tokenizer& tokenizer, const std::vector<uint32_t>& tokens);

}  // namespace rag::dragon
