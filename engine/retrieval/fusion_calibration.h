// Hybrid retrieval's fusion constants, measured per embedder instead of fixed: the reciprocal-rank
// fusion (bm25_index.h's HybridFusion) that puts the most dev questions' gold passage in the top k
// when one embedder's dense ranking is fused with BM25's. The constants that suit one embedder do
// not suit another: for the shipped embedder (dense recall@5 0.84 against BM25's 0.97) the dense
// side must weigh little (c 5, dense 0.5: 0.980 on dev), for one that carries BM25 in its vectors
// (rag-embedder-lex, 0.98 on its own) the same constants fell below dense alone, and c 1 with dense
// 0.75 was above both. `ragraph index build` and `index calibrate` measure it on the dev split,
// next to the default nprobe (nprobe_calibration.h), and store it beside the index; serving and
// `eval retrieval` fuse with it (HybridFusion's defaults when none is stored).
//
//   std::vector<FusionCandidate> grid = fusionGrid();
//   RAG_ASSIGN_OR_RETURN(FusionCalibration c, calibrateFusion(dense, bm25, gold, fingerprint, nprobe));
//   RAG_RETURN_IF_ERROR(saveFusionCalibration(base, c));
//   ... later: auto c = loadFusionCalibration(base, embedder.fingerprint());  // nullopt: none yet
//
// File B.fusion.json: {"fingerprint", "nprobe", "k", "queries", "c", "dense_weight",
// "lexical_weight", "recall", "dense_recall", "lexical_recall", "default_recall",
// "grid": [{"c", "dense_weight", "recall", "every_gold"}]}, written atomically. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"
#include "retrieval/bm25_index.h"

namespace rag::retrieval {

// The constants tried: c in {1, 5, 20, 60} x the dense side's weight in {0, 0.1, 0.25, 0.5, 0.75,
// 1}, BM25's weight 1 (a common scale of both weights changes nothing).
std::vector<HybridFusion> fusionGrid();

struct FusionPoint {
  HybridFusion fusion;
  double recall = 0;     // share of the questions whose first gold passage is in the fused top k
  double everyGold = 0;  // ... whose every gold passage is
};

// Both measures of one fusion over the questions' two rankings (one row per question, best first;
// gold[i] the first gold passage (< 0: none, still counted as a miss), allGold[i] every one).
FusionPoint scoreFusion(const HybridFusion& fusion, std::span<const std::vector<int64_t>> dense,
                        std::span<const std::vector<int64_t>> lexical, std::span<const int64_t> gold,
                        std::span<const std::vector<int64_t>> allGold, int32_t k);

struct FusionCalibration {
  std::string fingerprint;  // the embedder whose dense rankings were fused
  HybridFusion fusion;      // the chosen constants
  int64_t nprobe = 0;       // the IVF clusters the dense rankings searched
  int32_t k = 0;
  int64_t queries = 0;
  double recall = 0;         // hybrid recall@k with `fusion`
  double denseRecall = 0;    // the dense ranking's alone
  double lexicalRecall = 0;  // BM25's alone
  double defaultRecall = 0;  // with HybridFusion's defaults
  std::vector<FusionPoint> grid = {};  // every candidate tried
};

// Scores every candidate (fusionGrid() when empty) and keeps the best by recall@k, ties broken by
// every gold passage's recall (a two-hop question needs both of its passages), then by the
// candidates' order. The rankings should reach deeper than k (the serving engine fuses the top 20
// of each). InvalidArgument when the spans' lengths differ or no question has a gold passage.
Result<FusionCalibration> calibrateFusion(std::span<const std::vector<int64_t>> dense,
                                          std::span<const std::vector<int64_t>> lexical, std::span<const int64_t> gold,
                                          std::span<const std::vector<int64_t>> allGold, std::string fingerprint,
                                          int64_t nprobe, int32_t k = 5, std::span<const HybridFusion> candidates = {});

std::filesystem::path fusionCalibrationPath(const std::filesystem::path& indexBase);  // B.fusion.json
Status saveFusionCalibration(const std::filesystem::path& indexBase, const FusionCalibration& c);
// nullopt when the file is missing or was measured for another embedder; Corrupt (naming the file
// and `ragraph index calibrate`) when it cannot be read or its constants are not usable.
Result<std::optional<FusionCalibration>> loadFusionCalibration(const std::filesystem::path& indexBase,
                                                               std::string_view fingerprint);

}  // namespace rag::retrieval
