// The corpus's passages as vectors and an IVF index over them: what `ragraph index build`
// writes next to the corpus and what retrieval reads. Embedder-agnostic: the caller passes the
// function that turns texts into unit vectors and the fingerprint naming that embedder.
//
// Files, for a base path B (default <corpus>.index):
//   B.vectors  "RAGVEC1\n", fingerprint line, then n, dim (int64) and n x dim float32 rows; row
//              i is the passage with id i + 1 (the corpus's ids are dense, checked)
//   B.ivf      IvfIndex::save() of the same vectors, same fingerprint
// Embedding is resumable: rows go to B.vectors.partial, flushed every batch; a new build with
// the same fingerprint continues after the last whole row. Every file is written under a
// temporary name and renamed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "rag/corpus.h"
#include "rag/progress.h"
#include "rag/status.h"
#include "retrieval/ivf_index.h"

namespace rag::retrieval {

using EmbedTexts = std::function<Result<std::vector<float>>(std::span<const std::string>)>;

struct PassageIndexParams {
  std::filesystem::path corpus;
  std::filesystem::path base;  // empty: <corpus>.index
  std::string fingerprint;     // which embedder (TextEmbedder::fingerprint)
  int64_t dim = 0;
  int64_t clusterDims = 0;     // the IVF's k-means sees the first clusterDims components (0: all)
  int64_t batch = 256;         // passages per embed call (and per flush)
  int64_t nlist = 0;           // 0: IvfIndex::defaultNlist(passages)
  uint64_t seed = 1;
  ProgressFn progress;
};

struct PassageIndexBuild {
  int64_t passages = 0;
  int64_t resumedFrom = 0;     // rows found in a partial file
  int64_t nlist = 0;
  double embedSeconds = 0, indexSeconds = 0;
};

std::filesystem::path defaultIndexBase(const std::filesystem::path& corpus);

// Errors: the corpus's; InvalidArgument for a dim < 1 or an embedder returning the wrong
// number of values; Corrupt for passage ids that are not 1..n.
Result<PassageIndexBuild> buildPassageIndex(const PassageIndexParams& params, const EmbedTexts& embed);

// The built files, loaded. NotFound (naming `ragraph index build`) when missing,
// SchemaMismatch when built by another embedder than `fingerprint`.
class PassageIndex {
public:
  static Result<PassageIndex> load(const std::filesystem::path& base, std::string_view fingerprint);

  int64_t size() const { return m_n; }
  int64_t dim() const { return m_dim; }
  const IvfIndex& ivf() const { return m_ivf; }
  IvfIndex& ivf() { return m_ivf; }
  std::span<const float> vectors() const { return m_vectors; }
  static int64_t passageId(int64_t row) { return row + 1; }

  // Top-k passage ids per query (row-major queries, nq x dim): exact, and through the IVF at
  // `nprobe` clusters. Rows of ids, best first; -1 fills slots no vector reached.
  Result<std::vector<std::vector<int64_t>>> searchExact(std::span<const float> queries, int32_t k) const;
  Result<std::vector<std::vector<int64_t>>> searchIvf(std::span<const float> queries, int32_t k,
                                                      int64_t nprobe) const;

private:
  PassageIndex(IvfIndex ivf, std::vector<float> vectors, int64_t n, int64_t dim)
      : m_ivf(std::move(ivf)), m_vectors(std::move(vectors)), m_n(n), m_dim(dim) {}
  IvfIndex m_ivf;
  std::vector<float> m_vectors;
  int64_t m_n = 0, m_dim = 0;
};

}  // namespace rag::retrieval
