#include "retrieval/fusion_calibration.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "core/json_writer.h"

namespace rag::retrieval {

namespace {

bool holds(std::span<const int64_t> top, int64_t id) { return id >= 0 && std::find(top.begin(), top.end(), id) != top.end(); }

bool holdsAll(std::span<const int64_t> top, const std::vector<int64_t>& ids) {
  return !ids.empty() && std::all_of(ids.begin(), ids.end(), [&](int64_t g) { return holds(top, g); });
}

std::span<const int64_t> firstK(const std::vector<int64_t>& row, int32_t k) {
  return std::span<const int64_t>(row).first(std::min<size_t>(row.size(), static_cast<size_t>(k)));
}

// Recall@k of one ranking alone.
double recallOf(std::span<const std::vector<int64_t>> rows, std::span<const int64_t> gold, int32_t k) {
  double hits = 0;
  for (size_t i = 0; i < rows.size(); ++i) hits += holds(firstK(rows[i], k), gold[i]);
  return rows.empty() ? 0.0 : hits / static_cast<double>(rows.size());
}

}  // namespace

std::vector<HybridFusion> fusionGrid() {
  std::vector<HybridFusion> grid;
  for (double c : {1.0, 5.0, 20.0, 60.0})
    for (double w : {0.0, 0.1, 0.25, 0.5, 0.75, 1.0}) grid.push_back({.c = c, .denseWeight = w, .lexicalWeight = 1.0});
  return grid;
}

FusionPoint scoreFusion(const HybridFusion& fusion, std::span<const std::vector<int64_t>> dense,
                        std::span<const std::vector<int64_t>> lexical, std::span<const int64_t> gold,
                        std::span<const std::vector<int64_t>> allGold, int32_t k) {
  FusionPoint p{.fusion = fusion};
  const size_t n = std::min({dense.size(), lexical.size(), gold.size(), allGold.size()});
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int64_t> top = hybridFusion(dense[i], lexical[i], k, fusion);
    p.recall += holds(top, gold[i]);
    p.everyGold += holdsAll(top, allGold[i]);
  }
  if (n > 0) {
    p.recall /= static_cast<double>(n);
    p.everyGold /= static_cast<double>(n);
  }
  return p;
}

Result<FusionCalibration> calibrateFusion(std::span<const std::vector<int64_t>> dense,
                                          std::span<const std::vector<int64_t>> lexical, std::span<const int64_t> gold,
                                          std::span<const std::vector<int64_t>> allGold, std::string fingerprint,
                                          int64_t nprobe, int32_t k, std::span<const HybridFusion> candidates) {
  if (dense.size() != gold.size() || lexical.size() != gold.size() || allGold.size() != gold.size())
    return Status::invalidArgument("fusion calibration needs one dense ranking, one BM25 ranking and the gold passages "
                                   "of every question: got " + std::to_string(dense.size()) + ", " +
                                   std::to_string(lexical.size()) + ", " + std::to_string(gold.size()) + " and " +
                                   std::to_string(allGold.size()));
  if (k < 1) return Status::invalidArgument("fusion calibration needs k >= 1, not " + std::to_string(k));
  if (std::none_of(gold.begin(), gold.end(), [](int64_t g) { return g >= 0; }))
    return Status::invalidArgument("no calibration question has a gold passage: nothing to choose the fusion by");
  const std::vector<HybridFusion> grid = candidates.empty() ? fusionGrid()
                                                            : std::vector<HybridFusion>(candidates.begin(), candidates.end());
  FusionCalibration c;
  c.fingerprint = std::move(fingerprint);
  c.nprobe = nprobe;
  c.k = k;
  c.queries = static_cast<int64_t>(gold.size());
  c.denseRecall = recallOf(dense, gold, k);
  c.lexicalRecall = recallOf(lexical, gold, k);
  c.defaultRecall = scoreFusion(HybridFusion{}, dense, lexical, gold, allGold, k).recall;
  size_t best = 0;
  for (const HybridFusion& f : grid) {
    c.grid.push_back(scoreFusion(f, dense, lexical, gold, allGold, k));
    const FusionPoint& p = c.grid.back();
    const FusionPoint& b = c.grid[best];
    if (p.recall > b.recall || (p.recall == b.recall && p.everyGold > b.everyGold)) best = c.grid.size() - 1;
  }
  c.fusion = c.grid[best].fusion;
  c.recall = c.grid[best].recall;
  return c;
}

std::filesystem::path fusionCalibrationPath(const std::filesystem::path& indexBase) {
  return std::filesystem::path(indexBase.string() + ".fusion.json");
}

Status saveFusionCalibration(const std::filesystem::path& indexBase, const FusionCalibration& c) {
  std::ostringstream out;
  JsonWriter w(out, true);
  w.beginObject();
  w.key("fingerprint").value(c.fingerprint);
  w.key("nprobe").value(c.nprobe);
  w.key("k").value(static_cast<int64_t>(c.k));
  w.key("queries").value(c.queries);
  w.key("c").value(c.fusion.c);
  w.key("dense_weight").value(c.fusion.denseWeight);
  w.key("lexical_weight").value(c.fusion.lexicalWeight);
  w.key("recall").value(c.recall);
  w.key("dense_recall").value(c.denseRecall);
  w.key("lexical_recall").value(c.lexicalRecall);
  w.key("default_recall").value(c.defaultRecall);
  w.key("grid").beginArray();
  for (const FusionPoint& p : c.grid) {
    w.beginObject();
    w.key("c").value(p.fusion.c).key("dense_weight").value(p.fusion.denseWeight);
    w.key("recall").value(p.recall).key("every_gold").value(p.everyGold);
    w.endObject();
  }
  w.endArray();
  w.endObject();
  out << '\n';
  return writeFileAtomic(fusionCalibrationPath(indexBase), out.str());
}

Result<std::optional<FusionCalibration>> loadFusionCalibration(const std::filesystem::path& indexBase,
                                                               std::string_view fingerprint) {
  const std::filesystem::path path = fusionCalibrationPath(indexBase);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<FusionCalibration>();
  RAG_ASSIGN_OR_RETURN(std::string text, readFile(path));
  auto bad = [&](const std::string& what) {
    return Status::corrupt(path.string() + ": " + what + "; delete it and run `ragraph index calibrate` to measure it again");
  };
  Result<JsonValue> doc = parseJson(text);
  if (!doc) return bad(doc.status().message());
  const JsonValue* fp = doc->find("fingerprint");
  if (!fp || !fp->isString()) return bad("needs a string \"fingerprint\"");
  if (fp->asString() != fingerprint) return std::optional<FusionCalibration>();
  auto number = [&](const JsonValue& obj, const char* key) -> std::optional<double> {
    const JsonValue* v = obj.find(key);
    if (!v || !v->isNumber() || !std::isfinite(v->asDouble())) return std::nullopt;
    return v->asDouble();
  };
  const auto fc = number(*doc, "c"), dw = number(*doc, "dense_weight"), lw = number(*doc, "lexical_weight");
  if (!fc || !dw || !lw || *fc < 0 || *dw < 0 || *lw < 0 || *dw + *lw <= 0)
    return bad("needs numbers \"c\", \"dense_weight\" and \"lexical_weight\", none negative, the weights not both 0");
  FusionCalibration c;
  c.fingerprint = fp->asString();
  c.fusion = {.c = *fc, .denseWeight = *dw, .lexicalWeight = *lw};
  c.nprobe = static_cast<int64_t>(number(*doc, "nprobe").value_or(0));
  c.k = static_cast<int32_t>(number(*doc, "k").value_or(0));
  c.queries = static_cast<int64_t>(number(*doc, "queries").value_or(0));
  c.recall = number(*doc, "recall").value_or(0);
  c.denseRecall = number(*doc, "dense_recall").value_or(0);
  c.lexicalRecall = number(*doc, "lexical_recall").value_or(0);
  c.defaultRecall = number(*doc, "default_recall").value_or(0);
  if (const JsonValue* grid = doc->find("grid"); grid && grid->isArray())
    for (const JsonValue& p : grid->asArray())
      if (p.isObject())
        c.grid.push_back({.fusion = {.c = number(p, "c").value_or(0), .denseWeight = number(p, "dense_weight").value_or(0)},
                          .recall = number(p, "recall").value_or(0),
                          .everyGold = number(p, "every_gold").value_or(0)});
  return std::optional<FusionCalibration>(std::move(c));
}

}  // namespace rag::retrieval
