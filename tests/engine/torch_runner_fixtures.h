// Shared by the runner tests: a tiny random Llama, the dense reference forward, and helpers that
// drive a ModelRunner to the end. Include after model/llama.h (torch before Qt).
#pragma once

#include <QtTest>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/llama.h"
#include "model/runner.h"
#include "tiny_llama_config.h"

namespace rag::model::testing {

inline std::shared_ptr<const LlamaModel> tinyModel(uint64_t seed = 3, int64_t vocab = 96) {
  auto m = LlamaModel::initRandom(tinyConfig(vocab), seed);
  // Larger weights than HF's init so that attention is far from uniform and masks matter.
  torch::NoGradGuard g;
  for (torch::Tensor p : m->parameters())
    if (p.dim() == 2) p.mul_(4.0);
  return std::make_shared<const LlamaModel>(std::move(*m));
}

inline std::vector<int32_t> randomTokens(int64_t n, int64_t vocab, uint64_t seed) {
  torch::Tensor t = torch::randint(0, vocab, {n}, torch::Generator(at::make_generator<at::CPUGeneratorImpl>(seed)), torch::kLong);
  return std::vector<int32_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
}

inline torch::Tensor i64(const std::vector<int32_t>& v) {
  return torch::tensor(std::vector<int64_t>(v.begin(), v.end()), torch::kLong);
}

// Dense reference logits [n, vocab] for tokens at positions first.. under `mask`.
inline torch::Tensor dense(const LlamaModel& m, const std::vector<int32_t>& tokens, const AttentionMask& mask = {},
                    int64_t first = 0) {
  torch::NoGradGuard g;
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<uint8_t> a = mask.dense(n);
  torch::Tensor allowed = torch::from_blob(a.data(), {1, n, n}, torch::kUInt8).to(torch::kBool);
  return m.forwardDense(i64(tokens).unsqueeze(0), torch::arange(first, first + n, torch::kLong).unsqueeze(0), allowed)
      .squeeze(0);
}

inline double maxDiff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

struct Run {
  std::vector<int32_t> tokens;           // generated
  std::vector<std::vector<float>> rows;  // every logits row reported, in order
  std::vector<float> logprobs;           // per generated token (SequenceRequest::logprobs)
  std::string text;
  FinishReason reason = FinishReason::None;
  torch::Tensor logits() const {
    std::vector<float> flat;
    for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
    const auto vocab = static_cast<int64_t>(rows.empty() ? 0 : rows[0].size());
    return torch::from_blob(flat.data(), {static_cast<int64_t>(rows.size()), vocab}, torch::kFloat32).clone();
  }
};

// Steps the runner until it is idle, collecting per-sequence results.
inline std::map<SeqId, Run> drain(ModelRunner& r, int64_t vocab, int* preempted = nullptr) {
  std::map<SeqId, Run> out;
  for (int guard = 0; r.hasWork() && guard < 10000; ++guard) {
    StepResult s = r.step();
    if (preempted) *preempted += s.stats.preempted;
    for (SeqEvent& e : s.events) {
      Run& run = out[e.id];
      run.tokens.insert(run.tokens.end(), e.tokens.begin(), e.tokens.end());
      if (!e.tokens.empty()) run.logprobs.push_back(e.logprob);
      for (int64_t i = 0; i < e.logitRows; ++i)
        run.rows.emplace_back(e.logits.begin() + i * vocab, e.logits.begin() + (i + 1) * vocab);
      run.text += e.text;
      if (e.finished) run.reason = e.reason;
    }
  }
  return out;
}

inline std::unique_ptr<ModelRunner> makeRunner(std::shared_ptr<const LlamaModel> m, RunnerParams p = {},
                                        std::shared_ptr<const Tokenizer> tok = nullptr) {
  if (p.numBlocks == 0) p.numBlocks = 256;
  auto r = ModelRunner::create(std::move(m), p, std::move(tok));
  if (!r.isOk()) qFatal("%s", r.status().message().c_str());
  return std::move(*r);
}

inline SequenceRequest greedy(std::vector<int32_t> prompt, int32_t maxTokens, bool allLogits = true) {
  SequenceRequest q;
  q.prompt = std::move(prompt);
  q.sampling.maxTokens = maxTokens;
  q.allLogits = allLogits;
  return q;
}

// Block-Attention's path through a runner (vocabulary 96, block size 4): two passages computed
// alone at position 0, the first placed as it is and the second re-encoded to position 9, then a
// question under the block mask. Returns the question's logits and the dense block-masked
// reference; every block it took is released again.
struct LogitsAndReference {
  torch::Tensor logits, reference;
};
inline LogitsAndReference importedPassages(ModelRunner& r, const LlamaModel& m) {
  const std::vector<int32_t> p1 = randomTokens(9, 96, 7), p2 = randomTokens(6, 96, 8), question = randomTokens(5, 96, 9);
  std::vector<KvSegment> segs;
  int64_t at = 0;
  for (const auto& p : {p1, p2}) {
    SequenceRequest q = greedy(p, 0, false);
    q.keepKv = true;
    SeqId id = *r.add(q);
    drain(r, 96);
    segs.push_back({*r.retainKv(id, static_cast<int64_t>(p.size())), at});
    (void)r.release(id);  // the handles keep the blocks alive
    at += static_cast<int64_t>(p.size());
  }
  SequenceRequest q = greedy(question, 1);
  q.cached = segs;
  q.mask = AttentionMask::blocks({0, 9, 15});
  SeqId id = *r.add(q);
  Run run = drain(r, 96)[id];
  for (KvSegment& s : segs) r.releaseKv(s.kv);
  std::vector<int32_t> all = p1;
  all.insert(all.end(), p2.begin(), p2.end());
  all.insert(all.end(), question.begin(), question.end());
  return {run.logits(), dense(m, all, AttentionMask::blocks({0, 9, 15})).narrow(0, 15, 5)};
}

}  // namespace rag::model::testing

using namespace rag::model::testing;
