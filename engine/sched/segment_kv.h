// The KV path of segmented prompts (model/segmented_prompt.h) over a ModelRunner and its prefix
// cache: DepCache's Algorithm 2 with GKVR (§4.1-4.3) and Block-Attention's inference (§2.5,
// Fig. 2) are the same three steps. The KV of every segment is looked up in the prefix cache, the
// missing part computed alone, and the whole placed into the request's sequence at the segment's
// offset by RoPE re-encoding of the keys; only the tail (the question, Block-Attention's last
// block) is prefilled with the request.
//
//   Phase 1 (begin, then the runner's steps): for each segment, C.match(its keys) in its
//   namespace gives the cached prefix (blocks whose keys were computed at positions 0..m-1, the
//   segment alone). Keys are the segment's structural keys for a dependency tree (token and
//   distance to its parent) and its tokens for a block (a chain). What the cache lacks of a
//   passage block (the cache holds whole KV blocks, so at least a passage's partial last one) is
//   next looked for in the block store (memory/block_store.h: records in memory until saved,
//   then on disk): found, it is copied into fresh pool blocks and its whole blocks inserted. The rest is one KV-only sequence in the
//   runner: the hit as its first cached segment (blocks shared, not copied), the remaining
//   tokens as its prompt at positions m.., under the segment's own mask. When it finishes, its
//   whole blocks go into the cache (C.insert), a passage block is also handed to the block
//   store, and the builder keeps a reference to all of its KV.
//   Phase 2 (request): the sequence the caller adds: every segment's KV as a cached KvSegment
//   re-encoded to the segment's offset in the prompt (k' = R(Δ)·k, values unchanged; the runner
//   copies them into the sequence's own blocks), the tail as its prompt under the whole prompt's
//   mask. The first segment (at offset 0) needs no shift, so its blocks are shared.
//
// A segment is computed alone because nothing in it sees what precedes it: its KV depends only
// on its own tokens and structure, which the keys encode. A prefix of a segment has the same
// visibility and relative positions, so a partial hit is exact, and one shift Δ per segment
// places it.
//
// Not thread-safe: the runner's thread drives it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "memory/prefix_cache.h"
#include "memory/block_store.h"
#include "model/segmented_prompt.h"
#include "model/runner.h"
#include "rag/request.h"

namespace rag::sched {

// The prefix-cache namespaces of segments (plain causal prompts are namespace 0).
inline constexpr uint64_t kDepCacheNamespace = 0x44657043616368ull;  // "DepCach"
inline constexpr uint64_t kBlockNamespace = 0x426c6f636b4174ull;     // "BlockAt"
uint64_t segmentNamespace(model::SegmentAttention a);
// What the cache keys a segment by (see the file comment).
std::vector<int32_t> segmentKeys(const model::ContextSegment& s, model::SegmentAttention a, int32_t vocab);

struct SegmentKvStats {
  int64_t prompts = 0;
  int64_t segments = 0;
  int64_t segmentTokens = 0;   // tokens of the segments looked up
  int64_t hitTokens = 0;       // of those, found in the cache (the block store's included)
  int64_t storeHitTokens = 0;  // of the hits, copied in from the block store (the disk tier)
  int64_t computedTokens = 0;  // computed by phase-1 sequences
  double hitRate() const {
    return segmentTokens > 0 ? static_cast<double>(hitTokens) / static_cast<double>(segmentTokens) : 0.0;
  }
};

class SegmentKvBuilder {
public:
  using Ticket = uint64_t;
  // `runner` must have a prefix cache (RunnerParams::prefixCache). reencode = false is DepCache's
  // "without GKVR" ablation: segments keep the positions they were computed at (0..n-1), so every
  // subgraph sits at the start of the RoPE range; the answers show what re-encoding buys.
  // `store` (optional, outliving the builder) is the disk tier of passage blocks.
  explicit SegmentKvBuilder(model::ModelRunner& runner, bool reencode = true, memory::BlockStore* store = nullptr);
  ~SegmentKvBuilder();  // cancels what is still building
  SegmentKvBuilder(const SegmentKvBuilder&) = delete;
  SegmentKvBuilder& operator=(const SegmentKvBuilder&) = delete;

  // Starts phase 1. Errors: the runner refused a phase-1 sequence (InvalidArgument, Busy).
  Result<Ticket> begin(model::SegmentedPrompt prompt);
  // Takes the events of the builder's own sequences out of a step's events.
  void absorb(std::vector<model::SeqEvent>& events);
  // Ready (phase 1 done) or failed; a ticket unknown to the builder is neither.
  bool ready(Ticket t) const;
  Status error(Ticket t) const;
  // Phase 2: the request to add (sampling left to the caller). The ticket keeps its KV
  // references until finish(), which the caller calls right after ModelRunner::add (the runner
  // has copied or retained them then).
  Result<model::SequenceRequest> request(Ticket t) const;
  // Tokens of the ticket's segments found in the cache.
  int64_t hitTokens(Ticket t) const;
  // Where each of the ticket's segments got its KV (StageTiming::segments), in prompt order.
  std::vector<SegmentKvUse> uses(Ticket t) const;
  void finish(Ticket t);
  void cancel(Ticket t);  // finish() for a ticket that may still be building

  // The keys of the segments of tickets still building (LACR's look-ahead).
  void appendPending(std::vector<memory::PendingPrompt>& out) const;
  const SegmentKvStats& stats(model::SegmentAttention a) const { return m_stats[static_cast<size_t>(a)]; }
  int32_t vocab() const { return m_vocab; }
  size_t building() const { return m_tickets.size(); }

private:
  struct Part {
    model::KvHandle kv;            // the segment's whole KV at positions 0..n-1, retained (once ready)
    model::SeqId computing = -1;   // the phase-1 sequence, while it runs
    std::vector<int32_t> keys;     // the cache's keys (segmentKeys)
    memory::PrefixNodeId node = memory::kNoPrefixNode;  // locked while the ticket lives
  };
  struct Entry {
    model::SegmentedPrompt prompt;
    std::vector<Part> parts;
    int64_t hitTokens = 0;
    std::vector<SegmentKvUse> uses;  // one per segment, as begin() found it
    int32_t running = 0;
    Status error;
  };
  void release(Entry& e);
  // The whole KV of a passage block whose cache match `m` fell short: the matched blocks shared,
  // the rest copied in from the block store (its whole blocks then inserted into the cache, and
  // m.node moved to the deepest one). An empty handle when the store does not have the passage.
  model::KvHandle fromStore(const model::ContextSegment& s, const std::vector<int32_t>& keys, uint64_t ns,
                            memory::PrefixMatch& m);
  SegmentKvStats& statsOf(const Entry& e) { return m_stats[static_cast<size_t>(e.prompt.attention)]; }

  model::ModelRunner& m_runner;
  memory::PrefixCache& m_cache;
  std::map<Ticket, Entry> m_tickets;
  std::map<model::SeqId, std::pair<Ticket, size_t>> m_bySeq;
  int32_t m_vocab;
  bool m_reencode;
  memory::BlockStore* m_store;
  Ticket m_next = 1;
  std::array<SegmentKvStats, 2> m_stats{};
};

}  // namespace rag::sched
