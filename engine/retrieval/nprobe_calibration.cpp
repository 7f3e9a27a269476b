#include "retrieval/nprobe_calibration.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "core/fs.h"
#include "core/json.h"
#include "core/json_writer.h"

namespace rag::retrieval {

namespace {

// Share of the queries with a gold passage whose top-k rows hold it.
double recallAtK(const std::vector<std::vector<int64_t>>& rows, std::span<const int64_t> gold, int32_t k) {
  int64_t asked = 0, found = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (gold[i] < 0) continue;
    ++asked;
    const auto end = rows[i].begin() + std::min<std::ptrdiff_t>(k, static_cast<std::ptrdiff_t>(rows[i].size()));
    found += std::find(rows[i].begin(), end, gold[i]) != end;
  }
  return asked ? static_cast<double>(found) / static_cast<double>(asked) : 0.0;
}

}  // namespace

Result<NprobeCalibration> calibrateNprobe(const PassageIndex& index, std::span<const float> queries,
                                          std::span<const int64_t> gold, std::string fingerprint,
                                          const NprobeCalibrationParams& params) {
  const int64_t dim = index.dim();
  if (dim < 1 || queries.size() % static_cast<size_t>(dim) != 0 || queries.size() / static_cast<size_t>(dim) != gold.size())
    return Status::invalidArgument("calibration needs one gold id per query vector of dimension " + std::to_string(dim) +
                                   ": got " + std::to_string(queries.size()) + " floats and " +
                                   std::to_string(gold.size()) + " gold ids");
  if (params.target <= 0.0 || params.target > 1.0 || params.k < 1)
    return Status::invalidArgument("calibration target must be in (0, 1] and k >= 1");
  if (std::none_of(gold.begin(), gold.end(), [](int64_t g) { return g >= 0; }))
    return Status::invalidArgument("no calibration question has a gold passage: nothing to calibrate nprobe against");

  NprobeCalibration c;
  c.fingerprint = std::move(fingerprint);
  c.target = params.target;
  c.k = params.k;
  c.queries = std::count_if(gold.begin(), gold.end(), [](int64_t g) { return g >= 0; });
  RAG_ASSIGN_OR_RETURN(auto exact, index.searchExact(queries, params.k));
  c.flatRecall = recallAtK(exact, gold, params.k);
  if (c.flatRecall <= 0.0)
    return Status::invalidArgument("exact search finds none of the " + std::to_string(c.queries) +
                                   " calibration questions' gold passages: the embedder does not match this corpus "
                                   "(rebuild the index with `ragraph index build`)");

  const int64_t nlist = index.ivf().nlist();
  int64_t ladderSteps = 1;
  for (int64_t n = 1; n < nlist; n *= 2) ++ladderSteps;
  const uint64_t maxSearches = static_cast<uint64_t>(2 * ladderSteps);
  auto reaches = [&](int64_t nprobe) -> Result<bool> {
    auto it = c.probes.find(nprobe);
    if (it == c.probes.end()) {
      RAG_ASSIGN_OR_RETURN(auto rows, index.searchIvf(queries, params.k, nprobe));
      it = c.probes.emplace(nprobe, recallAtK(rows, gold, params.k)).first;
      if (params.progress) params.progress("calibrating nprobe", c.probes.size(), maxSearches);
    }
    return it->second >= params.target * c.flatRecall;
  };
  // Doubling until the ratio holds (nlist always does: it is exact search).
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
  w.key("k").value(static_cast<int64_t>(c.k));
  w.key("queries").value(c.queries);
  w.key("flat_recall").value(c.flatRecall);
  w.key("ivf_recall").value(c.ivfRecall);
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
  if (fp->asString() != fingerprint) return std::optional<NprobeCalibration>();
  NprobeCalibration c;
  c.fingerprint = fp->asString();
  c.nprobe = *nprobe->asInt64();
  auto number = [&](const char* key) {
    const JsonValue* v = doc->find(key);
    return v && v->isNumber() ? v->asDouble() : 0.0;
  };
  c.target = number("target");
  c.k = static_cast<int32_t>(number("k"));
  c.queries = static_cast<int64_t>(number("queries"));
  c.flatRecall = number("flat_recall");
  c.ivfRecall = number("ivf_recall");
  if (const JsonValue* probes = doc->find("probes"); probes && probes->isObject())
    for (const auto& [key, v] : probes->asObject())
      if (int64_t n = 0; v.isNumber() && std::from_chars(key.data(), key.data() + key.size(), n).ec == std::errc())
        c.probes[n] = v.asDouble();
  return std::optional<NprobeCalibration>(std::move(c));
}

}  // namespace rag::retrieval
