// `ragraph corpus build`: Debian's WordNet and FOLDOC -> passages, knowledge graph and QA sets
// in one SQLite file, written to a temp file next to the target and renamed over it only when
// complete, so a failed build leaves the previous corpus untouched.
//
//   CorpusBuildParams p;
//   p.out = defaultCorpusPath();
//   p.progress = [](std::string_view phase, uint64_t done, uint64_t total) { ... };
//   RAG_ASSIGN_OR_RETURN(CorpusBuildReport r, buildCorpus(p));
#pragma once

#include <cstdint>
#include <filesystem>

#include "corpus/corpus_model.h"
#include "corpus/qa_builder.h"
#include "rag/progress.h"
#include "rag/status.h"

namespace rag::corpus {

struct CorpusSources {
  std::filesystem::path wordnetDir = "/usr/share/wordnet";  // data.{noun,verb,adj,adv}
  std::filesystem::path foldocDir = "/usr/share/dictd";     // foldoc.index, foldoc.dict.dz
};

struct PassageParams {
  size_t maxFoldocTokens = 128;  // FOLDOC chunks, term prefix included
  size_t maxListedTargets = 10;  // one-to-many relations (kinds, parts, ...) listed in a passage
  size_t maxLemmasPerTarget = 5; // lemmas written for each target of a one-to-one relation
};

// Checks that every input file exists, naming the Debian package to install when one is missing.
Status checkCorpusSources(const CorpusSources& sources);

// Parses both sources into rows and views; no file is written.
Result<CorpusModel> buildCorpusModel(const CorpusSources& sources,
                                     const PassageParams& passageParams = {},
                                     const ProgressFn& progress = {});

struct CorpusBuildParams {
  std::filesystem::path out;  // the corpus file to create or replace
  CorpusSources sources;
  PassageParams passages;
  QaParams qa;
  ProgressFn progress;
};

struct CorpusBuildReport {
  int64_t entities = 0;
  int64_t passages = 0;
  int64_t relations = 0;
  int64_t qa = 0;
  uint64_t danglingPointers = 0;
  uint64_t unresolvedXrefs = 0;
  double seconds = 0;
};

Result<CorpusBuildReport> buildCorpus(const CorpusBuildParams& params);

}  // namespace rag::corpus
