#include "retrieval/nprobe_calibration.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "core/json_writer.h"

namespace rag::retrieval {

namespace {

// Per question with a gold passage: whether its top-k row holds it.
std::vector<uint8_t> hitsAtK(const std::vector<std::vector<int64_t>>& rows, std::span<const int64_t> gold, int32_t k) {
  std::vector<uint8_t> hits;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (gold[i] < 0) continue;
    const auto end = rows[i].begin() + std::min<std::ptrdiff_t>(k, static_cast<std::ptrdiff_t>(rows[i].size()));
    hits.push_back(std::find(rows[i].begin(), end, gold[i]) != end);
  }
  return hits;
}

double share(std::span<const uint8_t> hits) {
  return hits.empty() ? 0.0 : static_cast<double>(std::count(hits.begin(), hits.end(), 1)) / static_cast<double>(hits.size());
}

// The standard normal quantile of p in [0.5, 1): bisection on the upper tail 0.5 erfc(z / sqrt 2).
double normalQuantile(double p) {
  if (p <= 0.5) return 0.0;
  double lo = 0.0, hi = 10.0;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > 1.0 - p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

double recallRatioLowerBound(std::span<const uint8_t> ivfHits, std::span<const uint8_t> exactHits, double confidence) {
  const size_t n = std::min(ivfHits.size(), exactHits.size());
  double v = 0, e = 0;
  for (size_t i = 0; i < n; ++i) v += ivfHits[i], e += exactHits[i];
  if (e <= 0) return 0.0;
  const double ratio = v / e;
  if (n < 2) return ratio;
  double ss = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = ivfHits[i] - ratio * exactHits[i];
    ss += d * d;
  }
  const double meanExact = e / static_cast<double>(n);
  const double se = std::sqrt(ss / (static_cast<double>(n) * static_cast<double>(n - 1))) / meanExact;
  return ratio - normalQuantile(confidence) * se;
}

Result<NprobeCalibration> calibrateNprobe(const PassageIndex& index, std::span<const float> queries,
                                          std::span<const int64_t> gold, std::string fingerprint,
                                          const NprobeCalibrationParams& params) {
  const int64_t dim = index.dim();
  if (dim < 1 || queries.size() % static_cast<size_t>(dim) != 0 || queries.size() / static_cast<size_t>(dim) != gold.size())
    return Status::invalidArgument("calibration needs one gold id per query vector of dimension " + std::to_string(dim) +
                                   ": got " + std::to_string(queries.size()) + " floats and " +
                                   std::to_string(gold.size()) + " gold ids");
  if (params.target <= 0.0 || params.target > 1.0 || params.k < 1 || params.confidence < 0.0 ||
      params.confidence >= 1.0)
    return Status::invalidArgument("calibration target must be in (0, 1], confidence in [0, 1) and k >= 1");
  if (std::none_of(gold.begin(), gold.end(), [](int64_t g) { return g >= 0; }))
    return Status::invalidArgument("no calibration question has a gold passage: nothing to calibrate nprobe against");

  NprobeCalibration c;
  c.fingerprint = std::move(fingerprint);
  c.target = params.target;
  c.confidence = params.confidence;
  c.k = params.k;
  c.queries = std::count_if(gold.begin(), gold.end(), [](int64_t g) { return g >= 0; });
  RAG_ASSIGN_OR_RETURN(auto exact, index.searchExact(queries, params.k));
  const std::vector<uint8_t> exactHits = hitsAtK(exact, gold, params.k);
  c.flatRecall = share(exactHits);
  if (c.flatRecall <= 0.0)
    return Status::invalidArgument("exact search finds none of the " + std::to_string(c.queries) +
                                   " calibration questions' gold passages: the embedder does not match this corpus "
                                   "(rebuild the index with `ragraph index build`)");

  const int64_t nlist = index.ivf().nlist();
  int64_t ladderSteps = 1;
  for (int64_t n = 1; n < nlist; n *= 2) ++ladderSteps;
  const uint64_t maxSearches = static_cast<uint64_t>(2 * ladderSteps);
  std::map<int64_t, double> lowerBounds;  // per nprobe tried
  auto reaches = [&](int64_t nprobe) -> Result<bool> {
    auto it = lowerBounds.find(nprobe);
    if (it == lowerBounds.end()) {
      RAG_ASSIGN_OR_RETURN(auto rows, index.searchIvf(queries, params.k, nprobe));
      const std::vector<uint8_t> hits = hitsAtK(rows, gold, params.k);
      c.probes[nprobe] = share(hits);
      it = lowerBounds.emplace(nprobe, recallRatioLowerBound(hits, exactHits, params.confidence)).first;
      if (params.progress) params.progress("calibrating nprobe", c.probes.size(), maxSearches);
    }
    return it->second >= params.target;
  };
  // Doubling until the bound holds (nlist is exact search, but even its bound can fall short of a
  // target of 1.0 when ties order the top-k differently: then nlist it is).
  int64_t lo = 0, hi = 1;  // lo fails (0: nothing searched), hi is being tried
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool ok, reaches(hi));
    if (ok || hi >= nlist) break;
    lo = hi;
    hi = std::min(nlist, hi * 2);
  }
  // Bisection: the smallest passing nprobe in (lo, hi].
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    RAG_ASSIGN_OR_RETURN(bool ok, reaches(mid));
    (ok ? hi : lo) = mid;
  }
  c.nprobe = hi;
  c.ivfRecall = c.probes.at(hi);
  c.ratioLowerBound = lowerBounds.at(hi);
  return c;
}

std::filesystem::path nprobeCalibrationPath(const std::filesystem::path& indexBase) {
  return std::filesystem::path(indexBase.string() + ".nprobe.json");
}

Status saveNprobeCalibration(const std::filesystem::path& indexBase, const NprobeCalibration& c) {
  std::ostringstream out;
  JsonWriter w(out, true);
  w.beginObject();
  w.key("fingerprint").value(c.fingerprint);
  w.key("nprobe").value(c.nprobe);
  w.key("target").value(c.target);
  w.key("confidence").value(c.confidence);
  w.key("k").value(static_cast<int64_t>(c.k));
  w.key("queries").value(c.queries);
  w.key("flat_recall").value(c.flatRecall);
  w.key("ivf_recall").value(c.ivfRecall);
  w.key("ratio_lower_bound").value(c.ratioLowerBound);
  w.key("probes").beginObject();
  for (const auto& [nprobe, recall] : c.probes) w.key(std::to_string(nprobe)).value(recall);
  w.endObject();
  w.endObject();
  out << '\n';
  return writeFileAtomic(nprobeCalibrationPath(indexBase), out.str());
}

Result<std::optional<NprobeCalibration>> loadNprobeCalibration(const std::filesystem::path& indexBase,
                                                               std::string_view fingerprint) {
  const std::filesystem::path path = nprobeCalibrationPath(indexBase);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<NprobeCalibration>();
  RAG_ASSIGN_OR_RETURN(std::string text, readFile(path));
  auto bad = [&](const std::string& what) {
    return Status::corrupt(path.string() + ": " + what + "; delete it and run `ragraph index build` to measure it again");
  };
  Result<JsonValue> doc = parseJson(text);
  if (!doc) return bad(doc.status().message());
  const JsonValue* fp = doc->find("fingerprint");
  const JsonValue* nprobe = doc->find("nprobe");
  if (!fp || !fp->isString() || !nprobe || !nprobe->asInt64() || *nprobe->asInt64() < 1)
    return bad("needs a string \"fingerprint\" and a positive integer \"nprobe\"");
  const JsonValue* confidence = doc->find("confidence");
  if (fp->asString() != fingerprint || !confidence) return std::optional<NprobeCalibration>();
  NprobeCalibration c;
  c.fingerprint = fp->asString();
  c.nprobe = *nprobe->asInt64();
  auto number = [&](const char* key) {
    const JsonValue* v = doc->find(key);
    return v && v->isNumber() ? v->asDouble() : 0.0;
  };
  c.target = number("target");
  c.confidence = number("confidence");
  c.k = static_cast<int32_t>(number("k"));
  c.queries = static_cast<int64_t>(number("queries"));
  c.flatRecall = number("flat_recall");
  c.ivfRecall = number("ivf_recall");
  c.ratioLowerBound = number("ratio_lower_bound");
  if (const JsonValue* probes = doc->find("probes"); probes && probes->isObject())
    for (const auto& [key, v] : probes->asObject())
      if (int64_t n = 0; v.isNumber() && std::from_chars(key.data(), key.data() + key.size(), n).ec == std::errc())
        c.probes[n] = v.asDouble();
  return std::optional<NprobeCalibration>(std::move(c));
}

}  // namespace rag::retrieval
