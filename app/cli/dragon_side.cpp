#include "dragon_side.h"

#include <algorithm>
#include <fstream>

#include "core/clock.h"
#include "core/fs.h"
#include "corpus/corpus_db.h"
#include "corpus/qa_reader.h"
#include "model/prompt.h"
#include "retrieval/embedding_service.h"

namespace rag::cli {

using namespace rag::dragon;

namespace {

uint64_t modelFingerprint(const LoadedModel& m, const ModelChoice& choice) {
  const model::ModelFacts f = model::modelFacts(*m.model);
  const int64_t shape[] = {f.config.hiddenSize, f.config.intermediateSize, f.config.numHiddenLayers,
                           f.config.numAttentionHeads, f.config.numKeyValueHeads, f.config.vocabSize,
                           f.parameters, f.weightBytes};
  uint64_t h = fingerprintBytes(0, shape, sizeof shape);
  // A sample of the weights file: two models of one shape but other training differ here.
  std::ifstream in(choice.dir / "model.safetensors", std::ios::binary);
  if (in) {
    std::vector<char> buf(1 << 20);
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fingerprintBytes(h, buf.data(), static_cast<size_t>(in.gcount()));
  }
  return h;
}

}  // namespace

Result<SideOptions> readSideOptions(Args& args) {
  SideOptions o;
  RAG_ASSIGN_OR_RETURN(o.model, readModelChoice(args, false));
  o.corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  o.deterministic = args.flag("deterministic");
  const std::string kernels = args.getOr("kernels", "on");
  if (kernels != "on" && kernels != "off")
    return Status::invalidArgument("--kernels takes on or off (off: libtorch ops, a slower device)");
  o.kernels = kernels == "on";
  RAG_ASSIGN_OR_RETURN(o.scoreTemperature, args.getDouble("score-temperature", 1.0));
  if (!(o.scoreTemperature > 0)) return Status::invalidArgument("--score-temperature must be > 0");
  RAG_ASSIGN_OR_RETURN(int64_t core, args.getInt("core", -1));
  o.core = static_cast<int>(core);
  return o;
}

Result<std::unique_ptr<SideAssets>> loadSide(Side side, const SideOptions& o) {
  auto a = std::make_unique<SideAssets>();
  a->source = side == Side::Device ? "foldoc" : "wordnet";
  if (o.core >= 0) {
    const int cores[] = {o.core};
    RAG_RETURN_IF_ERROR(retrieval::pinCurrentThread(cores));
  }
  model::setComputeThreads(1);
  RAG_ASSIGN_OR_RETURN(a->corpus, corpus::openCorpus(o.corpusPath));
  RAG_ASSIGN_OR_RETURN(retrieval::Bm25Index bm25, retrieval::Bm25Index::openOrBuild(o.corpusPath));
  a->bm25.emplace(std::move(bm25));
  RAG_ASSIGN_OR_RETURN(a->model, loadChosenModel(o.model));
  if (!a->model.tokenizer)
    return Status::notFound("the model in " + o.model.dir.string() + " has no tokenizer.json next to it");
  model::RunnerParams rp;
  rp.deterministic = o.deterministic;
  rp.kernels = o.kernels;
  RAG_ASSIGN_OR_RETURN(a->runner, model::ModelRunner::create(a->model.model, rp, a->model.tokenizer));
  SideResources& r = a->res;
  r.side = side;
  r.runner = a->runner.get();
  r.scoreTemperature = o.scoreTemperature;
  if (auto eos = a->model.tokenizer->eosId()) r.eos = static_cast<uint32_t>(*eos);
  r.fingerprint = modelFingerprint(a->model, o.model);
  SideAssets* raw = a.get();
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
  std::shared_ptr<const model::Tokenizer> tok = a->model.tokenizer;
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

std::string textOf(const SideAssets& a, const std::vector<uint32_t>& tokens) {
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  Result<std::string> t = a.model.tokenizer->decode(ids, {.skipSpecial = true});
  if (!t) return "";
  std::string s = *t;
  const auto b = s.find_first_not_of(" \t\n");
  const auto e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

Result<Hello> readRunSettings(Args& args) {
  Hello h;
  RAG_ASSIGN_OR_RETURN(h.method, parseMethod(args.getOr("method", "dragon")));
  RAG_ASSIGN_OR_RETURN(h.policy, parsePolicy(args.getOr("policy", "greedy")));
  RAG_ASSIGN_OR_RETURN(int64_t maxTokens, args.getInt("max-tokens", 20));
  RAG_ASSIGN_OR_RETURN(int64_t docs, args.getInt("docs", 2));
  RAG_ASSIGN_OR_RETURN(int64_t ahead, args.getInt("max-ahead", 3));
  RAG_ASSIGN_OR_RETURN(double temperature, args.getDouble("temperature", 0));
  RAG_ASSIGN_OR_RETURN(double topP, args.getDouble("top-p", 0.8));
  RAG_ASSIGN_OR_RETURN(int64_t seed, args.getInt("seed", 1));
  RAG_ASSIGN_OR_RETURN(h.latencyMs, args.getDouble("latency", 0));
  RAG_ASSIGN_OR_RETURN(h.jitterMs, args.getDouble("jitter", -1));
  RAG_ASSIGN_OR_RETURN(h.bandwidthMbps, args.getDouble("bandwidth", 0));
  h.ignoreEos = args.flag("ignore-eos");
  h.answer = args.getOr("answer", "");
  RAG_ASSIGN_OR_RETURN(h.scored, parseMethod(args.getOr("scored", "dragon")));
  if (h.scored != Method::Dragon && h.scored != Method::DeviceOnly && h.scored != Method::CloudOnly)
    return Status::invalidArgument("--scored takes dragon, device_only or cloud_only");
  if (h.method == Method::Score && h.answer.empty())
    return Status::invalidArgument("--method score needs --answer TEXT (the answer to score)");
  if (maxTokens < 1 || maxTokens > 1024) return Status::invalidArgument("--max-tokens must be in [1, 1024]");
  if (docs < 0 || docs > 16) return Status::invalidArgument("--docs must be in [0, 16]");
  if (ahead < 1 || ahead > 64) return Status::invalidArgument("--max-ahead must be in [1, 64]");
  if (!(temperature >= 0)) return Status::invalidArgument("--temperature must be >= 0 (0: greedy)");
  if (!(topP > 0 && topP <= 1)) return Status::invalidArgument("--top-p must be in (0, 1]");
  if (!(h.latencyMs >= 0 && h.latencyMs <= 10000)) return Status::invalidArgument("--latency must be in [0, 10000] ms");
  if (!(h.bandwidthMbps >= 0)) return Status::invalidArgument("--bandwidth must be >= 0 Mbit/s (0: unlimited)");
  h.maxTokens = static_cast<uint32_t>(maxTokens);
  h.docsPerSide = static_cast<uint32_t>(docs);
  h.maxAhead = static_cast<uint32_t>(ahead);
  h.temperature = static_cast<float>(temperature);
  h.topP = static_cast<float>(topP);
  h.seed = static_cast<uint64_t>(seed);
  return h;
}

// Round trips of `n` pings (the link as the delay line makes it); the peer's loop answers them.
Result<std::vector<double>> pingRtt(Transport& t, int n, int timeoutMs) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    Stopwatch sw;
    RAG_RETURN_IF_ERROR(t.send(MsgType::Ping, {}));
    for (;;) {
      const int left = timeoutMs - static_cast<int>(sw.elapsedMs());
      if (left <= 0) return Status::unavailable("no pong from " + t.peer() + " within " + std::to_string(timeoutMs) + " ms");
      RAG_ASSIGN_OR_RETURN(std::optional<Frame> f, t.receive(left));
      if (f && f->header.type == MsgType::Pong) break;
    }
    out.push_back(sw.elapsedMs());
  }
  return out;
}

}  // namespace rag::cli
