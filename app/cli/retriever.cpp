#include "retriever.h"

#include "rag/engine.h"

#include "core/fs.h"
#include "retrieval/fusion_calibration.h"
#include "retrieval/nprobe_calibration.h"

namespace rag::cli {

std::filesystem::path defaultEmbedderDir() { return defaultEmbedderDirectory(); }

Result<std::filesystem::path> readEmbedderDir(Args& args) {
  if (auto e = args.get("embedder")) return std::filesystem::path(*e);
  const std::filesystem::path def = defaultEmbedderDir();
  std::error_code ec;
  if (def.empty() || !std::filesystem::exists(def / "config.json", ec))
    return Status::notFound("no embedder at " + (def.empty() ? std::string("datasets/models/rag-embedder") : def.string()) +
                            "; train one with `ragraph train embedder --out DIR` and pass --embedder DIR");
  return def;
}

Result<Retriever> Retriever::load(const std::filesystem::path& embedderDir, const std::filesystem::path& base,
                                  const std::string& dtype) {
  Retriever r;
  r.base = base;
  RAG_ASSIGN_OR_RETURN(r.embedder, model::TextEmbedder::load(embedderDir, dtype));
  Result<retrieval::PassageIndex> index = retrieval::PassageIndex::load(r.base, r.embedder->fingerprint());
  if (!index && index.status().code() == StatusCode::SchemaMismatch)  // another embedder's index: keep it
    return Status::schemaMismatch(index.status().message() + " (or give embedder " + embedderDir.string() +
                                  " an index of its own: `ragraph index build --embedder " + embedderDir.string() +
                                  " --index BASE`, then pass --index BASE)");
  if (!index) return index.status().withContext("passage index for embedder " + embedderDir.string());
  r.index.emplace(std::move(*index));
  RAG_ASSIGN_OR_RETURN(auto fusion, retrieval::loadFusionCalibration(r.base, r.embedder->fingerprint()));
  if (fusion) {
    r.fusion = fusion->fusion;
    r.fusionFrom = "calibration";
  }
  return r;
}

Result<Retriever> Retriever::open(Args& args, const std::filesystem::path& corpus) {
  RAG_ASSIGN_OR_RETURN(std::filesystem::path dir, readEmbedderDir(args));
  const std::filesystem::path base =
      args.get("index") ? std::filesystem::path(*args.get("index")) : retrieval::defaultIndexBase(corpus);
  const bool given = args.get("nprobe").has_value();
  RAG_ASSIGN_OR_RETURN(int64_t nprobe, args.getInt("nprobe", kDefaultNprobe));
  if (nprobe < 1) return Status::invalidArgument("--nprobe must be at least 1");
  RAG_ASSIGN_OR_RETURN(Retriever r, load(dir, base, args.getOr("embedder-dtype", "f32")));
  r.nprobe = nprobe;
  if (given) {
    r.nprobeFrom = "option";
  } else {
    RAG_ASSIGN_OR_RETURN(auto calibrated, retrieval::loadNprobeCalibration(r.base, r.embedder->fingerprint()));
    if (calibrated) {
      r.nprobe = std::min(calibrated->nprobe, r.index->ivf().nlist());
      r.nprobeFrom = "calibration";
    }
  }
  return r;
}

Result<std::vector<std::vector<int64_t>>> Retriever::search(std::span<const std::string> texts,
                                                            int32_t k) const {
  RAG_ASSIGN_OR_RETURN(std::vector<float> q, embedder->embed(texts));
  return index->searchIvf(q, k, nprobe);
}

Result<KgSetup> KgSetup::open(const std::filesystem::path& corpus, const model::TextEmbedder& embedder) {
  KgSetup k;
  RAG_ASSIGN_OR_RETURN(k.graph, knowledge::KnowledgeGraph::load(corpus));
  RAG_ASSIGN_OR_RETURN(retrieval::Bm25Index bm25, retrieval::Bm25Index::openOrBuild(corpus));
  k.bm25 = std::make_unique<retrieval::Bm25Index>(std::move(bm25));
  RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(corpus));
  k.reader = std::make_unique<corpus::QaPromptReader>(std::move(reader));
  retrieval::Bm25Index* b = k.bm25.get();
  corpus::QaPromptReader* r = k.reader.get();
  k.retriever = std::make_unique<knowledge::KgRetriever>(
      k.graph, [&embedder](std::span<const std::string> t) { return embedder.embed(t); },
      [b](std::string_view q, int32_t n) { return b->search(q, n); },
      [r](int64_t pid) -> Result<std::string> {
        RAG_ASSIGN_OR_RETURN(Passage p, r->passage(pid));
        return std::move(p.text);
      });
  return k;
}

}  // namespace rag::cli
