// A served request as callers see it: its handle, its result with per-stage timings, and the
// events the engine publishes while it runs. Shared by the facade (rag/engine.h), the run
// history (rag/run_store.h) and the GUI, none of which needs the others for these types.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rag/status.h"
#include "rag/workflow.h"

namespace rag {

struct KnowledgeUse;  // rag/knowledge.h

// How one context segment of a segmented generation prompt got its KV: a Block-Attention passage
// block or a DepCache subgraph, each computed alone at positions 0..n-1 once and kept.
struct SegmentKvUse {
  int64_t passageId = -1;     // Block-Attention: the passage; -1 for a subgraph or template text
  int64_t offset = 0;         // its first token's position in the prompt
  int64_t tokens = 0;
  int64_t cachedTokens = 0;   // reused from the prefix cache (its memory tiers)
  int64_t storedTokens = 0;   // reused from the block store (the disk tier)
  // The reused KV was re-encoded to `offset` (GKVR; false: used at the positions it was computed
  // at, the segment at offset 0 or the "without GKVR" ablation).
  bool reencoded = false;
  int64_t computedTokens() const { return tokens - cachedTokens - storedTokens; }  // by this request
};

struct StageTiming {
  std::string node;
  NodeKind kind = NodeKind::Generation;
  double beginSeconds = 0;   // since submit
  double endSeconds = 0;
  int64_t work = 0;          // tokens generated, or clusters searched
  bool speculative = false;  // the result came from speculative work that was kept
  // What the node wrote into its output variable: a generation's text, a retrieval's passages as
  // prompts show them, a compression's summary. A node that runs again (a loop) has one stage per
  // run, so every round's output is kept where the variable keeps only the last.
  std::string output;
  // Generation: the first token's time (since submit; -1 before one), the prompt's tokens and
  // how many of them the prefix cache supplied. TTFT of the node = firstTokenSeconds - beginSeconds.
  double firstTokenSeconds = -1;
  int64_t promptTokens = 0;
  int64_t cachedPromptTokens = 0;
  // Generation: the prompt's token ids (shared, not copied with the timing): what the workbench's
  // KV-tree inspector follows down the prefix tree to show the path this stage's prompt has there.
  std::shared_ptr<const std::vector<int32_t>> promptTokenIds = {};
  // Generation: how its prompt's context was attended and where its KV came from: "causal" (one
  // prefill, prefix cache), "block" (Block-Attention: passage blocks from the block KV path, only
  // the last block prefilled), "dependency" (DepCache: subgraph trees from the KV path).
  std::string attention = {};
  // "block" and "dependency": each segment of the prompt, in prompt order (empty otherwise).
  std::vector<SegmentKvUse> segments = {};
  // Knowledge: what the node retrieved (rag/knowledge.h: the entities it linked, every path it
  // scored, kept or pruned, with its score); null for other kinds and for a failed retrieval.
  std::shared_ptr<const KnowledgeUse> knowledge = {};
};

struct RequestResult {
  uint32_t id = 0;
  std::string answer;             // the graph's answer variable at END
  Variables variables;            // every variable at the end
  std::vector<StageTiming> stages;
  double latencySeconds = 0;      // submit to END
  int32_t speculations = 0;       // speculative generations started
  int32_t specAccepted = 0;       // ... whose input turned out final
  int32_t rollbacks = 0;          // ... thrown away
  std::vector<int64_t> lastPassages;  // ids retrieved by the last retrieval node, best first
};

// Published on the scheduler thread as things happen (the GUI bridge turns them into queued
// signals). Callbacks must return quickly and must not call back into the engine.
struct RequestEvent {
  enum class Kind : uint8_t { Submitted, NodeStarted, Tokens, NodeFinished, Speculation, Rollback, Finished, Failed };
  Kind kind = Kind::Submitted;
  uint32_t requestId = 0;
  std::string node;
  std::string text;   // Tokens: the new text; NodeFinished: the output; Failed: the error
};
using RequestEventFn = std::function<void(const RequestEvent&)>;

class RequestHandle {
public:
  struct Shared;
  RequestHandle() = default;
  explicit RequestHandle(std::shared_ptr<Shared> s) : m_s(std::move(s)) {}
  uint32_t id() const;
  bool done() const;
  // Blocks until the request finishes (Cancelled when it was cancelled, the node's error when
  // one failed).
  Result<RequestResult> wait() const;
  // The text generated so far by the node now generating (for streaming displays).
  std::string streamedText() const;

private:
  std::shared_ptr<Shared> m_s;
};

}  // namespace rag
