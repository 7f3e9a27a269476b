#include "dragon/demo_side.h"

#include <algorithm>
#include <fstream>

#include "corpus/corpus_db.h"
#include "corpus/qa_reader.h"
#include "model/prompt.h"

namespace rag::dragon {

namespace {

uint64_t modelFingerprint(const model::LlamaModel& m, const std::filesystem::path& dir) {
  const model::ModelFacts f = model::modelFacts(m);
  const int64_t shape[] = {f.config.hiddenSize, f.config.intermediateSize, f.config.numHiddenLayers,
                           f.config.numAttentionHeads, f.config.numKeyValueHeads, f.config.vocabSize,
                           f.parameters, f.weightBytes};
  uint64_t h = fingerprintBytes(0, shape, sizeof shape);
  // A sample of the weights file: two models of one shape but other training differ here.
  std::ifstream in(dir / "model.safetensors", std::ios::binary);
  if (in) {
    std::vector<char> buf(1 << 20);
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fingerprintBytes(h, buf.data(), static_cast<size_t>(in.gcount()));
  }
  return h;
}

}  // namespace

Result<std::unique_ptr<DemoSide>> loadDemoSide(Side side, std::shared_ptr<const model::LlamaModel> model,
                                               std::shared_ptr<const model::Tokenizer> tokenizer,
                                               const DemoSideParams& params) {
  if (!model) return Status::invalidArgument("a DRAGON side needs a model");
  if (!tokenizer)
    return Status::notFound("the model in " + params.modelDir.string() + " has no tokenizer.json next to it");
  auto a = std::make_unique<DemoSide>();
  a->model = std::move(model);
  a->tokenizer = std::move(tokenizer);
  a->source = side == Side::Device ? "foldoc" : "wordnet";
  RAG_ASSIGN_OR_RETURN(a->corpus, corpus::openCorpus(params.corpusPath));
  RAG_ASSIGN_OR_RETURN(retrieval::Bm25Index bm25, retrieval::Bm25Index::openOrBuild(params.corpusPath));
  a->bm25.emplace(std::move(bm25));
  model::RunnerParams rp;
  rp.deterministic = params.deterministic;
  rp.kernels = params.kernels;
  rp.kvBudgetBytes = params.kvBudgetBytes;
  rp.backend = params.backend;
  RAG_ASSIGN_OR_RETURN(a->runner, model::ModelRunner::create(a->model, rp, a->tokenizer));
  SideResources& r = a->res;
  r.side = side;
  r.runner = a->runner.get();
  r.scoreTemperature = params.scoreTemperature;
  if (auto eos = a->tokenizer->eosId()) r.eos = static_cast<uint32_t>(*eos);
  r.fingerprint = modelFingerprint(*a->model, params.modelDir);
  DemoSide* raw = a.get();
  r.retrieve = [raw](const std::string& question, uint32_t k) -> Result<std::vector<RetrievedPassage>> {
    std::vector<RetrievedPassage> out;
    if (k == 0) return out;
    // One index over both sources: search deep enough that this side's own passages show up.
    RAG_ASSIGN_OR_RETURN(auto hits, raw->bm25->searchScored(question, 400));
    if (hits.empty()) return out;
    std::string ids;
    for (const auto& hit : hits) ids += (ids.empty() ? "" : ",") + std::to_string(hit.id);
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, raw->corpus.prepare("SELECT id FROM passages WHERE source = ?1 AND id IN (" +
                                                            ids + ")"));
    st.bind(1, raw->source);
    std::vector<int64_t> mine;
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      mine.push_back(st.columnInt64(0));
    }
    std::sort(mine.begin(), mine.end());
    for (const auto& hit : hits) {  // in rank order
      if (!std::binary_search(mine.begin(), mine.end(), hit.id)) continue;
      RAG_ASSIGN_OR_RETURN(Passage p, corpus::readPassage(raw->corpus, hit.id));
      out.push_back({model::passageText(p).text, hit.score});
      if (out.size() == k) break;
    }
    return out;
  };
  std::shared_ptr<const model::Tokenizer> tok = a->tokenizer;
  r.prompt = [tok](const std::vector<std::string>& passages, const std::string& question) {
    std::vector<model::PromptPiece> pieces;
    for (const std::string& p : passages) pieces.push_back({p, model::SegmentOrigin::Passage, -1});
    pieces.push_back({"Question: " + question + "\nAnswer:", model::SegmentOrigin::Text, -1});
    return model::tokenizePieces(*tok, pieces).tokens;
  };
  r.answerTokens = [tok](const std::string& answer) {
    return tok->encode(" " + answer, {.parseSpecial = false});  // the completion of qa_prompt.h
  };
  RAG_ASSIGN_OR_RETURN(r.offlineFit, profileDecodeTime(*a->runner, 2, static_cast<int32_t>(tok->vocabSize()), 7));
  return a;
}

std::string answerText(const model::Tokenizer& tokenizer, const std::vector<uint32_t>& tokens) {
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  Result<std::string> t = tokenizer.decode(ids, {.skipSpecial = true});
  if (!t) return "";
  std::string s = *t;
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

}  // namespace rag::dragon
