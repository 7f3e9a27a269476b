#include "dragon/doc_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/clock.h"

namespace rag::dragon {

DocDecoder::DocDecoder(model::ModelRunner& runner, const DecoderParams& params)
    : m_runner(runner), m_params(params), m_rng(params.seed) {}

DocDecoder::~DocDecoder() { release(); }

void DocDecoder::release() {
  for (Seq& s : m_seqs) {
    if (s.id < 0) continue;
    Result<model::SequenceInfo> info = m_runner.info(s.id);
    if (info && !info->finished) (void)m_runner.cancel(s.id);
    (void)m_runner.release(s.id);
  }
  // Let the runner report (and forget) cancelled sequences.
  for (int guard = 0; m_runner.hasWork() && guard < 4; ++guard) m_runner.step();
  m_seqs.clear();
}

Status DocDecoder::start(std::vector<DocInput> docs) {
  release();
  m_committed = 0;
  m_pending.clear();
  m_rollbacks = 0;
  if (docs.empty()) return Status::invalidArgument("a decoder needs at least one sequence (the question alone)");
  for (DocInput& d : docs) {
    if (d.tokens.empty()) return Status::invalidArgument("a document sequence has no tokens");
    model::SequenceRequest req;
    const int64_t cachedTokens = d.cached.numTokens;
    if (cachedTokens > 0) req.cached.push_back({d.cached, -1});
    req.prompt = std::move(d.tokens);
    req.sampling.maxTokens = 0;  // compute what we give it, sample nothing
    req.keepKv = true;
    req.allLogits = true;
    Seq s;
    s.promptLen = cachedTokens + static_cast<int64_t>(req.prompt.size());
    s.score = d.score;
    RAG_ASSIGN_OR_RETURN(s.id, m_runner.add(std::move(req)));
    m_seqs.push_back(std::move(s));
  }
  m_scores.clear();
  for (const Seq& s : m_seqs) m_scores.push_back(s.score);
  Stopwatch sw;
  m_needStep = true;
  RAG_RETURN_IF_ERROR(stepUntilLogits());
  m_prefillMs = sw.elapsedMs();
  return Status::ok();
}

Status DocDecoder::stepUntilLogits() {
  for (Seq& s : m_seqs) s.fresh = false;
  size_t fresh = 0;
  for (int guard = 0; fresh < m_seqs.size(); ++guard) {
    if (!m_runner.hasWork() || guard > 100000)
      return Status::internal("the runner stopped before every document sequence had its logits");
    model::StepResult r = m_runner.step();
    for (model::SeqEvent& e : r.events) {
      auto it = std::find_if(m_seqs.begin(), m_seqs.end(), [&](const Seq& s) { return s.id == e.id; });
      if (it == m_seqs.end()) continue;
      if (e.finished && e.reason != model::FinishReason::MaxTokens)
        return Status::unavailable("a document sequence stopped: " + std::string(model::finishReasonName(e.reason)) +
                                   " (the context window or the KV pool is full; use fewer or shorter documents)");
      if (e.logitRows > 0 && e.finished) {
        const size_t vocab = e.logits.size() / static_cast<size_t>(e.logitRows);
        it->lastRow.assign(e.logits.end() - static_cast<std::ptrdiff_t>(vocab), e.logits.end());
        if (!it->fresh) ++fresh;
        it->fresh = true;
      }
    }
  }
  m_needStep = false;
  return Status::ok();
}

Result<Drafted> DocDecoder::draft() {
  if (m_seqs.empty()) return Status::invalidArgument("draft() before start()");
  Drafted d;
  Stopwatch sw;
  if (m_needStep) RAG_RETURN_IF_ERROR(stepUntilLogits());
  std::vector<std::span<const float>> rows;
  for (const Seq& s : m_seqs) rows.emplace_back(s.lastRow);
  d.local = localAggregate(rows, m_scores,
                           {.topP = m_params.topP, .temperature = m_params.greedy ? 1.0 : m_params.temperature});
  d.decodeMs = sw.elapsedMs();
  d.pos = m_committed + pending();
  d.token = drawDraft(d.local.dist, m_params.greedy, m_rng);
  int64_t longest = 0;
  for (const Seq& s : m_seqs) longest = std::max(longest, s.promptLen);
  d.contextLen = static_cast<uint32_t>(longest + d.pos);
  const auto tok = static_cast<int32_t>(d.token);
  for (const Seq& s : m_seqs) RAG_RETURN_IF_ERROR(m_runner.append(s.id, std::span<const int32_t>(&tok, 1), true));
  m_pending.push_back(d.token);
  m_needStep = true;
  return d;
}

void DocDecoder::accept() {
  if (m_pending.empty()) return;
  m_pending.erase(m_pending.begin());
  ++m_committed;
}

Status DocDecoder::reject(uint32_t y) {
  ++m_rollbacks;
  m_pending.clear();
  for (const Seq& s : m_seqs) RAG_RETURN_IF_ERROR(m_runner.truncate(s.id, s.promptLen + m_committed));
  return commit(y);
}

Status DocDecoder::commit(uint32_t y) {
  if (!m_pending.empty()) return Status::internal("commit() with drafts pending; reject() them first");
  const auto tok = static_cast<int32_t>(y);
  for (const Seq& s : m_seqs) RAG_RETURN_IF_ERROR(m_runner.append(s.id, std::span<const int32_t>(&tok, 1), true));
  ++m_committed;
  m_needStep = true;
  return Status::ok();
}

double DocDecoder::weight() const {
  double m = -std::numeric_limits<double>::infinity();
  for (double r : m_scores) m = std::max(m, r);
  if (!std::isfinite(m)) return m;
  double z = 0;
  for (double r : m_scores) z += std::exp(r - m);
  return m + std::log(z);
}

int64_t DocDecoder::kvTokens() const {
  int64_t n = 0;
  for (const Seq& s : m_seqs)
    if (Result<model::SequenceInfo> info = m_runner.info(s.id)) n += info->computed;
  return n;
}

Result<std::vector<float>> DocDecoder::score(const std::vector<uint32_t>& tokens) {
  if (m_seqs.empty()) return Status::invalidArgument("score() before start()");
  if (tokens.empty()) return std::vector<float>();
  m_pending.clear();
  std::vector<int32_t> toks(tokens.begin(), tokens.end());
  for (const Seq& s : m_seqs) {
    RAG_RETURN_IF_ERROR(m_runner.truncate(s.id, s.promptLen));
    RAG_RETURN_IF_ERROR(m_runner.append(s.id, toks, true));
  }
  // Rows per sequence: from the last prompt token on; row j predicts tokens[j].
  std::unordered_map<model::SeqId, std::vector<float>> rows;
  size_t done = 0;
  size_t vocab = 0;
  for (int guard = 0; done < m_seqs.size(); ++guard) {
    if (!m_runner.hasWork() || guard > 100000) return Status::internal("the runner stopped while scoring");
    model::StepResult r = m_runner.step();
    for (model::SeqEvent& e : r.events) {
      if (e.logitRows > 0) {
        vocab = e.logits.size() / static_cast<size_t>(e.logitRows);
        auto& v = rows[e.id];
        v.insert(v.end(), e.logits.begin(), e.logits.end());
      }
      if (e.finished) {
        if (e.reason != model::FinishReason::MaxTokens)
          return Status::unavailable("a document sequence stopped while scoring: " +
                                     std::string(model::finishReasonName(e.reason)));
        ++done;
      }
    }
  }
  std::vector<float> out(tokens.size());
  for (size_t j = 0; j < tokens.size(); ++j) {
    std::vector<std::span<const float>> perDoc;
    for (const Seq& s : m_seqs) {
      const std::vector<float>& v = rows[s.id];
      const size_t nrows = v.size() / vocab;
      const size_t row = nrows - 1 - tokens.size() + j;  // the last tokens.size()+1 rows are ours
      perDoc.emplace_back(v.data() + row * vocab, vocab);
    }
    const LocalDist full = localAggregate(perDoc, m_scores, {.topP = 1.0});
    const double p = full.dist.prob(tokens[j]);
    out[j] = static_cast<float>(p > 0 ? std::log(p) : -1e30);
  }
  for (const Seq& s : m_seqs) RAG_RETURN_IF_ERROR(m_runner.truncate(s.id, s.promptLen));
  m_committed = 0;
  m_needStep = true;
  return out;
}

}  // namespace rag::dragon
