// The default nprobe of a passage index, measured instead of guessed: the fewest IVF clusters
// whose recall@k of the gold passage keeps `target` (0.95) of exact search's, on questions the
// neither the embedder's training nor the evaluation sees (the dev split). `ragraph index build` measures it once per
// embedder and stores it next to the index; retrieval without --nprobe then searches that many.
//
//   RAG_ASSIGN_OR_RETURN(NprobeCalibration c, calibrateNprobe(index, queries, gold, {}));
//   RAG_RETURN_IF_ERROR(saveNprobeCalibration(base, c));
//   ... later: auto c = loadNprobeCalibration(base, embedder.fingerprint());  // nullopt: none yet
//
// File B.nprobe.json: {"fingerprint", "nprobe", "target", "k", "queries", "flat_recall",
// "ivf_recall", "probes": {nprobe: recall}}, written atomically. Torch-free.
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

struct NprobeCalibrationParams {
  double target = 0.95;  // IVF recall@k over exact recall@k to reach
  int32_t k = 5;
  ProgressFn progress;   // ("calibrating nprobe", searches done, an upper bound of searches)
};

struct NprobeCalibration {
  std::string fingerprint;  // the embedder the index was built with
  int64_t nprobe = 0;
  double target = 0.0;
  int32_t k = 0;
  int64_t queries = 0;
  double flatRecall = 0.0;  // recall@k of exact search on the calibration queries
  double ivfRecall = 0.0;   // recall@k through the IVF at `nprobe`
  std::map<int64_t, double> probes;  // every nprobe tried -> its IVF recall@k
};

// Queries: row-major nq x dim unit vectors; gold: nq passage ids (-1: none, skipped). Searches
// nprobe 1, 2, 4, ... until the ratio holds, then bisects between the last two: the smallest
// nprobe that reaches it among those tried (recall is monotone in nprobe up to ties in the
// top-k). InvalidArgument when no query has a gold passage, or when exact search finds none of
// them (an embedder that does not match the corpus: nothing to calibrate against).
Result<NprobeCalibration> calibrateNprobe(const PassageIndex& index, std::span<const float> queries,
                                          std::span<const int64_t> gold, std::string fingerprint,
                                          const NprobeCalibrationParams& params = {});

std::filesystem::path nprobeCalibrationPath(const std::filesystem::path& indexBase);
Status saveNprobeCalibration(const std::filesystem::path& indexBase, const NprobeCalibration& c);
// nullopt when the file is missing or was measured for another embedder (the index was rebuilt);
// Corrupt (naming the file and `ragraph index build`) when it cannot be read.
Result<std::optional<NprobeCalibration>> loadNprobeCalibration(const std::filesystem::path& indexBase,
                                                               std::string_view fingerprint);

}  // namespace rag::retrieval
