#include "dragon_side.h"

#include "core/clock.h"
#include "core/fs.h"
#include "retrieval/embedding_service.h"

namespace rag::cli {

using namespace rag::dragon;

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
  if (o.core >= 0) {
    const int cores[] = {o.core};
    RAG_RETURN_IF_ERROR(retrieval::pinCurrentThread(cores));
  }
  model::setComputeThreads(1);
  RAG_ASSIGN_OR_RETURN(a->model, loadChosenModel(o.model));
  RAG_ASSIGN_OR_RETURN(a->demo, loadDemoSide(side, a->model.model, a->model.tokenizer,
                                             {.modelDir = o.model.dir,
                                              .corpusPath = o.corpusPath,
                                              .deterministic = o.deterministic,
                                              .kernels = o.kernels,
                                              .scoreTemperature = o.scoreTemperature,
                                              .backend = o.model.backend}));
  return a;
}

std::string textOf(const SideAssets& a, const std::vector<uint32_t>& tokens) {
  return answerText(*a.demo->tokenizer, tokens);
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
