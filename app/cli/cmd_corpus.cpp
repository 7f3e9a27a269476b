// `ragraph corpus build` and `ragraph corpus stats`.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "corpus/corpus_builder.h"
#include "corpus/corpus_db.h"

namespace rag::cli {

int cmdCorpusBuild(Args& args) {
  corpus::CorpusBuildParams p;
  p.out = args.getOr("out", defaultCorpusPath().string());
  p.sources.wordnetDir = args.getOr("wordnet", p.sources.wordnetDir.string());
  p.sources.foldocDir = args.getOr("foldoc", p.sources.foldocDir.string());
  Result<int64_t> seed = args.getInt("seed", static_cast<int64_t>(p.qa.seed));
  if (!seed) return fail(seed.status());
  if (*seed < 0) return fail(Status::invalidArgument("--seed must not be negative"));
  p.qa.seed = static_cast<uint64_t>(*seed);
  const bool quiet = args.flag("quiet");
  if (Status s = args.finish(); !s) return fail(s);

  ProgressPrinter printer(quiet);
  p.progress = [&printer](std::string_view phase, uint64_t done, uint64_t total) {
    printer(phase, done, total);
  };
  Result<corpus::CorpusBuildReport> r = corpus::buildCorpus(p);
  printer.finish();
  if (!r) return fail(r.status());
  std::printf("corpus written to %s: %lld passages, %lld entities, %lld relations, %lld QA items "
              "in %.1f s\n",
              p.out.c_str(), static_cast<long long>(r->passages), static_cast<long long>(r->entities),
              static_cast<long long>(r->relations), static_cast<long long>(r->qa), r->seconds);
  return 0;
}

namespace {

void writeCountsJson(const corpus::CorpusCounts& c) {
  JsonWriter w(std::cout, true);
  w.beginObject();
  w.key("path").value(c.path.string());
  w.key("size_bytes").value(c.sizeBytes);
  w.key("schema_version").value(c.schemaVersion);
  w.key("passages").value(c.passages);
  w.key("entities").value(c.entities);
  w.key("relations").value(c.relations);
  w.key("qa").beginObject();
  for (const auto& [split, byType] : c.qa) {
    w.key(split).beginObject();
    for (const auto& [type, n] : byType) w.key(type).value(n);
    w.endObject();
  }
  w.endObject();
  w.key("qa_total").value(c.qaTotal);
  auto map = [&](std::string_view key, const std::map<std::string, int64_t>& m) {
    w.key(key).beginObject();
    for (const auto& [k, n] : m) w.key(k).value(n);
    w.endObject();
  };
  map("passages_by_source", c.passagesBySource);
  map("entities_by_kind", c.entitiesByKind);
  map("relations_by_type", c.relationsByType);
  w.key("meta").beginObject();
  for (const auto& [k, v] : c.meta) w.key(k).value(v);
  w.endObject();
  w.endObject();
  std::cout << std::endl;
}

void writeCountsText(const corpus::CorpusCounts& c) {
  auto ll = [](int64_t v) { return static_cast<long long>(v); };
  std::printf("corpus     %s (%.1f MiB, schema %d)\n", c.path.c_str(),
              static_cast<double>(c.sizeBytes) / (1024.0 * 1024.0), c.schemaVersion);
  std::printf("passages   %lld", ll(c.passages));
  for (const auto& [k, n] : c.passagesBySource) std::printf("  %s %lld", k.c_str(), ll(n));
  std::printf("\nentities   %lld", ll(c.entities));
  for (const auto& [k, n] : c.entitiesByKind) std::printf("  %s %lld", k.c_str(), ll(n));
  std::printf("\nrelations  %lld (%zu types)\n", ll(c.relations), c.relationsByType.size());
  std::printf("qa         %lld\n", ll(c.qaTotal));
  for (const auto& [split, byType] : c.qa) {
    std::printf("  %-6s", split.c_str());
    for (const auto& [type, n] : byType) std::printf("  %s %lld", type.c_str(), ll(n));
    std::printf("\n");
  }
  if (auto it = c.meta.find("built_at"); it != c.meta.end())
    std::printf("built      %s\n", it->second.c_str());
}

}  // namespace

int cmdCorpusStats(Args& args) {
  const std::string path = args.getOr("corpus", defaultCorpusPath().string());
  const bool json = args.flag("json");
  if (Status s = args.finish(); !s) return fail(s);
  Result<sql::Db> db = corpus::openCorpus(path);
  if (!db) return fail(db.status());
  Result<corpus::CorpusCounts> counts = corpus::readCorpusCounts(*db);
  if (!counts) return fail(counts.status());
  if (json) writeCountsJson(*counts);
  else writeCountsText(*counts);
  return 0;
}

}  // namespace rag::cli
