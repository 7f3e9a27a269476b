// The default nprobe of a passage index, measured instead of guessed: the fewest IVF clusters
// whose recall@k of the gold passage keeps `target` (0.95) of exact search's on questions that
// neither the embedder's training nor the evaluation sees (the dev split). The calibration
// questions are a sample, so a point estimate that just reaches the target misses it on other
// questions about half the time (it did: 0.950 on dev, 0.947 on test). The ratio must therefore
// reach the target with `confidence`: its one-sided lower confidence bound (delta method over
// the paired per-question hits) must. `ragraph index build` measures it once per embedder and
// stores it next to the index; retrieval without --nprobe then searches that many.
//
//   RAG_ASSIGN_OR_RETURN(NprobeCalibration c, calibrateNprobe(index, queries, gold, {}));
//   RAG_RETURN_IF_ERROR(saveNprobeCalibration(base, c));
//   ... later: auto c = loadNprobeCalibration(base, embedder.fingerprint());  // nullopt: none yet
//
// File B.nprobe.json: {"fingerprint", "nprobe", "target", "confidence", "k", "queries",
// "flat_recall", "ivf_recall", "ratio_lower_bound", "probes": {nprobe: recall}}, written
// atomically. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "rag/progress.h"
#include "rag/status.h"
#include "retrieval/passage_index.h"

namespace rag::retrieval {

// Calibration questions `ragraph index build` and `index calibrate` embed by default: enough
// that the confidence bound costs few clusters (about 0.005 of ratio), few enough to take a
// minute or two on 2 cores.
inline constexpr int64_t kDefaultCalibrationQueries = 2000;

struct NprobeCalibrationParams {
  double target = 0.95;      // IVF recall@k over exact recall@k to reach
  double confidence = 0.95;  // one-sided, in [0, 1); 0 (or 0.5) accepts the point estimate
  int32_t k = 5;
  ProgressFn progress;   // ("calibrating nprobe", searches done, an upper bound of searches)
};

struct NprobeCalibration {
  std::string fingerprint;  // the embedder the index was built with
  int64_t nprobe = 0;
  double target = 0.0;
  double confidence = 0.0;
  int32_t k = 0;
  int64_t queries = 0;
  double flatRecall = 0.0;  // recall@k of exact search on the calibration queries
  double ivfRecall = 0.0;   // recall@k through the IVF at `nprobe`
  double ratioLowerBound = 0.0;  // of ivfRecall / flatRecall at `confidence`; >= target
  std::map<int64_t, double> probes;  // every nprobe tried -> its IVF recall@k
};

// The one-sided lower confidence bound of sum(ivfHits) / sum(exactHits), where question i was
// found (1) or not (0) by each search: R - z * sqrt(sum (v_i - R e_i)^2 / (n (n - 1))) / mean(e),
// z the standard normal quantile of `confidence` (0 for confidence <= 0.5). Questions are the
// sampled unit, so the two searches' hits are paired: a question both miss costs nothing.
// 0 when exact search found nothing.
double recallRatioLowerBound(std::span<const uint8_t> ivfHits, std::span<const uint8_t> exactHits, double confidence);

// Queries: row-major nq x dim unit vectors; gold: nq passage ids (-1: none, skipped). Searches
// nprobe 1, 2, 4, ... until the ratio's lower bound holds, then bisects between the last two: the
// smallest nprobe that reaches it among those tried (recall is monotone in nprobe up to ties in
// the top-k). InvalidArgument when no query has a gold passage, or when exact search finds none of
// them (an embedder that does not match the corpus: nothing to calibrate against).
Result<NprobeCalibration> calibrateNprobe(const PassageIndex& index, std::span<const float> queries,
                                          std::span<const int64_t> gold, std::string fingerprint,
                                          const NprobeCalibrationParams& params = {});

std::filesystem::path nprobeCalibrationPath(const std::filesystem::path& indexBase);
Status saveNprobeCalibration(const std::filesystem::path& indexBase, const NprobeCalibration& c);
// nullopt when the file is missing, was measured for another embedder (the index was rebuilt)
// or by the point-estimate rule of earlier versions (no "confidence"): measure it again.
// Corrupt (naming the file and `ragraph index build`) when it cannot be read.
Result<std::optional<NprobeCalibration>> loadNprobeCalibration(const std::filesystem::path& indexBase,
                                                               std::string_view fingerprint);

}  // namespace rag::retrieval
