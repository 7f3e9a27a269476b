// BM25 over the corpus's passages through SQLite FTS5 (the corpus is SQLite already: no new
// dependency). The index is a file of its own beside the corpus (<corpus>.fts), built once from
// the passages' titles and texts, and tagged with the corpus it was built from: an index of
// another corpus (or of an older build of this one) is rebuilt, and says so.
//
//   RAG_ASSIGN_OR_RETURN(Bm25Index bm25, Bm25Index::openOrBuild(corpusPath));
//   RAG_ASSIGN_OR_RETURN(std::vector<int64_t> ids, bm25.search("What is a dog a kind of?", 5));
//   // fused with dense results: hybridFusion(dense, ids, 5)
//
// Queries are free text: each word but English function words becomes a quoted FTS5 term, the
// terms OR-ed, ranked by FTS5's bm25() (k1 = 1.2, b = 0.75), so no query can be an FTS5 syntax
// error. A word found in more than kMaxTermShare of the passages is left out too (its IDF is
// near 0, and FTS5 would score every passage holding it: "kind" is in most WordNet passages);
// each word's passage count is looked up once and remembered. Measured on 2,000 test questions:
// 20 % keeps recall@5 at 0.968 (as with every word) at 13 ms a query instead of 64; 5 % costs
// 0.015 of recall for 5 ms. Not thread-safe: one
// thread searches an instance.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag::retrieval {

std::filesystem::path defaultBm25Path(const std::filesystem::path& corpus);  // <corpus>.fts

class Bm25Index {
public:
  // Opens `path` (default: <corpus>.fts), building it first when it is missing or was built from
  // another corpus; `progress` hears about a build. Errors: the corpus's (missing, not a corpus),
  // an SQLite without FTS5, an unwritable directory. Nothing half-built is left behind.
  static Result<Bm25Index> openOrBuild(const std::filesystem::path& corpus, const std::filesystem::path& path = {},
                                       const std::function<void(const std::string&)>& progress = {});
  Bm25Index(Bm25Index&&) noexcept;
  Bm25Index& operator=(Bm25Index&&) noexcept;
  ~Bm25Index();

  // The top-k passage ids for `query`, best first; empty when no word of it occurs anywhere.
  Result<std::vector<int64_t>> search(std::string_view query, int32_t k);
  // The same ranking with each passage's BM25 score (FTS5's bm25() negated: larger is more
  // relevant), for callers that weight passages by relevance (DRAGON's output aggregation).
  struct Scored {
    int64_t id = 0;
    double score = 0;
  };
  Result<std::vector<Scored>> searchScored(std::string_view query, int32_t k);
  // The positions in `ids` in the order of their BM25 score for `query` (the corpus's statistics,
  // the words search() would use), best first; ids `query` does not match keep their order after
  // the rest, and ids < 0 (empty slots) go last. Reranks a short list another method found
  // (`rerank: bm25`): the caller reorders its own items by the positions.
  Result<std::vector<size_t>> rankAmong(std::string_view query, std::span<const int64_t> ids);
  int64_t size() const;   // passages indexed
  bool rebuilt() const;   // openOrBuild built it (it was missing or stale)

  static constexpr double kMaxTermShare = 0.2;

  // The words of free text (letters and digits, lower-cased) but function words, in order.
  static std::vector<std::string> queryWords(std::string_view query);
  // Words quoted and OR-ed into an FTS5 query; empty for none.
  static std::string matchExpression(std::span<const std::string> words);
  // How many passages hold `word` (remembered).
  Result<int64_t> passagesWith(const std::string& word);

private:
  Result<std::vector<std::string>> matchWords(std::string_view query);  // what a query matches on
  struct Impl;
  explicit Bm25Index(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// Reciprocal-rank fusion (Cormack, Clarke and Büttcher, 2009): each id scores Σ w_i / (c + rank)
// over the rankings i it appears in (rank from 1; w_i = weights[i], 1 where weights is shorter);
// the top k by score, ties broken by the first ranking's order, then by id. Ids < 0 (empty
// slots) are ignored.
std::vector<int64_t> reciprocalRankFusion(std::span<const std::vector<int64_t>> rankings, int32_t k, double c = 60.0,
                                          std::span<const double> weights = {});

// How hybrid retrieval fuses the dense ranking with BM25's: weighted reciprocal-rank fusion. The
// retrieval worker and `eval retrieval` both fuse through hybridFusion(), so what is evaluated is
// what is served. The defaults were chosen on the dev split with `ragraph eval retrieval --split
// dev --fusion-sweep` (README: a retrieval node's methods, under "Serving RAGraph workflows"): on
// 2,000 dev questions recall@5 was 0.971 for BM25 alone, 0.961 for plain RRF (c 60, equal
// weights: the dense side's confident misses pushed BM25's hits out of the top 5), 0.980 here.
// They are what serves when an index has no constants of its own: `ragraph index build` measures
// them per embedder (fusion_calibration.h), since they suit a weak dense side, not a strong one.
struct HybridFusion {
  double c = 5.0;
  double denseWeight = 0.5;
  double lexicalWeight = 1.0;
};
std::vector<int64_t> hybridFusion(const std::vector<int64_t>& dense, const std::vector<int64_t>& lexical, int32_t k,
                                  const HybridFusion& fusion = {});

}  // namespace rag::retrieval
