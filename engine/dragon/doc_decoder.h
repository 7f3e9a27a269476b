// DocDecoder: one side's decoder (DRAGON's "Decoder"): a sequence per retrieved document,
// [doc_i; question], on the side's own ModelRunner, locally aggregated into one draft
// distribution per step, with rollback when a draft is rejected.
//
//   DocDecoder dec(runner, {.topP = 0.8, .greedy = true});
//   RAG_RETURN_IF_ERROR(dec.start({{docTokens + questionTokens, bm25Score}, ...}));
//   RAG_ASSIGN_OR_RETURN(Drafted d, dec.draft());       // a draft for position dec.drafted()-1
//   dec.accept();                                        // the oldest undecided draft matched
//   RAG_RETURN_IF_ERROR(dec.reject(y));                  // it did not: roll back, continue with y
//
// Positions count generated tokens from 0. The decoder keeps `committed()` target tokens and
// `pending()` drafts beyond them; every document sequence holds prompt + committed + pending
// tokens. reject(y) truncates every sequence to prompt + committed (runner->truncate frees the
// KV of the dropped tokens; the runner recomputes the last kept token, one extra row) and
// appends y, so the next draft continues from the target sequence.
//
// How the runner is driven: each sequence is added with maxTokens 0, keepKv and allLogits, so
// the runner computes what it is given, reports the logits rows and samples nothing; tokens are
// appended as prompt (append(..., asPrompt = true)). The runner's own sampler never runs, and
// deterministic mode (RunnerParams::deterministic) makes every row's logits independent of
// batching, so two decoders on the same documents produce bit-identical distributions however
// their steps interleave.
//
// Zero documents: one sequence of the question alone, with score 0.
// Not thread-safe: one thread drives the decoder and its runner.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "dragon/aggregation.h"
#include "model/runner.h"

namespace rag::dragon {

struct DocInput {
  std::vector<int32_t> tokens;  // the document's prompt tokens then the question's
  double score = 0;             // retrieval score r_i (larger: more relevant)
  // KV already computed for the tokens before `tokens` (at positions 0..n-1; numTokens 0: none),
  // e.g. received from the peer (DRCG/KV). The sequence takes its own reference on the blocks;
  // the caller still releases its handle.
  model::KvHandle cached = {};
};

struct DecoderParams {
  double topP = 0.8;      // truncation of the local distribution (what is sent and drawn from)
  bool greedy = true;     // drafts are the argmax; else drawn with `seed`
  double temperature = 1; // sampling: each document's softmax(logits / temperature)
  uint64_t seed = 1;
};

struct Drafted {
  uint32_t pos = 0;
  uint32_t token = 0;
  LocalDist local;
  double decodeMs = 0;      // the runner steps that produced this draft's distribution
  uint32_t contextLen = 0;  // tokens of the longest sequence when it was computed
};

class DocDecoder {
public:
  DocDecoder(model::ModelRunner& runner, const DecoderParams& params);
  ~DocDecoder();
  DocDecoder(const DocDecoder&) = delete;
  DocDecoder& operator=(const DocDecoder&) = delete;

  // Adds the sequences and prefills them (runner steps until every one reported logits).
  // InvalidArgument for an empty document list entry or a prompt the runner refuses.
  Status start(std::vector<DocInput> docs);
  // The next draft (position committed() + pending()), computed now; appended to every sequence.
  Result<Drafted> draft();
  // The oldest pending draft was the target token.
  void accept();
  // The oldest pending draft was not the target `y`: drop every pending draft and continue from
  // committed + y.
  Status reject(uint32_t y);
  // Appends target tokens with no draft of ours pending (the other side's tokens, a forced
  // continuation).
  Status commit(uint32_t y);

  uint32_t committed() const { return m_committed; }
  uint32_t pending() const { return static_cast<uint32_t>(m_pending.size()); }
  double prefillMs() const { return m_prefillMs; }
  int64_t rollbacks() const { return m_rollbacks; }
  // Tokens whose KV is held across the document sequences (runner info().computed summed).
  int64_t kvTokens() const;
  size_t documents() const { return m_seqs.size(); }
  double weight() const;  // W_s = logsumexp of the sequences' scores

  // Scores a token sequence teacher-forced after the current committed prefix (DRDG/SW): the
  // local log-probability of each token (untruncated), then rolls back to the committed prefix.
  Result<std::vector<float>> score(const std::vector<uint32_t>& tokens);

private:
  Status stepUntilLogits();
  void release();

  model::ModelRunner& m_runner;
  DecoderParams m_params;
  Rng m_rng;
  struct Seq {
    model::SeqId id = -1;
    int64_t promptLen = 0;
    double score = 0;
    std::vector<float> lastRow;  // F32 [vocab]: logits after the sequence's last token
    bool fresh = false;          // lastRow is up to date
  };
  std::vector<Seq> m_seqs;
  std::vector<double> m_scores;
  uint32_t m_committed = 0;
  std::vector<uint32_t> m_pending;  // drafted tokens beyond the committed ones
  bool m_needStep = true;           // the sequences hold tokens whose logits are not computed
  double m_prefillMs = 0;
  int64_t m_rollbacks = 0;
};

}  // namespace rag::dragon
