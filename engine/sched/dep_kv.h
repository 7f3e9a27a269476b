// DepCache's KV path over a ModelRunner and its prefix cache (Algorithm 2 with GKVR, §4.1–4.3):
// the KV of a dependency prompt's segments (model/dep_prompt.h) is looked up in the prefix
// cache, the missing part of each segment computed, and the whole placed into the request's
// sequence at the segment's offset by RoPE re-encoding of the keys.
//
//   Phase 1 (begin, then the runner's steps): for each segment, C.match(its structural keys) in
//   the DepCache namespace gives the cached pre-order prefix (blocks whose keys were computed at
//   positions 0..m-1, the segment alone). The rest is one KV-only sequence in the runner: the
//   hit as its first cached segment (blocks shared, not copied), the remaining tokens as its
//   prompt at positions m.., under the segment's ancestor mask. When it finishes, its whole
//   blocks go into the cache (C.insert) and the builder keeps a reference to all of its KV.
//   Phase 2 (request): the sequence the caller adds: every segment's KV as a cached KvSegment
//   re-encoded to the segment's offset in the prompt (k' = R(Δ)·k, values unchanged; the runner
//   copies them into the sequence's own blocks), the tail (the question) as its prompt under the
//   ancestor mask of the whole prompt. The first segment (the template's text at offset 0)
//   needs no shift, so its blocks are shared.
//
// A segment is computed alone because its root is parentless: its KV does not depend on what
// precedes it, only on its own pre-order tokens and structure, which the structural keys encode.
// A pre-order prefix of a tree has the same ancestors and relative positions, so a partial hit
// is exact, and one shift Δ per segment places it.
//
// Not thread-safe: the runner's thread drives it.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "memory/prefix_cache.h"
#include "model/dep_prompt.h"
#include "model/runner.h"

namespace rag::sched {

// The prefix-cache namespace of dependency segments (plain causal prompts are namespace 0).
inline constexpr uint64_t kDepCacheNamespace = 0x44657043616368ull;  // "DepCach"

struct DepKvStats {
  int64_t prompts = 0;
  int64_t segments = 0;
  int64_t segmentTokens = 0;   // tokens of the segments looked up
  int64_t hitTokens = 0;       // of those, found in the cache
  int64_t computedTokens = 0;  // computed by phase-1 sequences
};

class DepKvBuilder {
public:
  using Ticket = uint64_t;
  // `runner` must have a prefix cache (RunnerParams::prefixCache).
  explicit DepKvBuilder(model::ModelRunner& runner);
  ~DepKvBuilder();  // cancels what is still building
  DepKvBuilder(const DepKvBuilder&) = delete;
  DepKvBuilder& operator=(const DepKvBuilder&) = delete;

  // Starts phase 1. Errors: the runner refused a phase-1 sequence (InvalidArgument, Busy).
  Result<Ticket> begin(model::DepPrompt prompt);
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
  void finish(Ticket t);
  void cancel(Ticket t);  // finish() for a ticket that may still be building

  // The structural keys of the segments of tickets still building (LACR's look-ahead).
  void appendPending(std::vector<memory::PendingPrompt>& out) const;
  const DepKvStats& stats() const { return m_stats; }
  int32_t vocab() const { return m_vocab; }
  size_t building() const { return m_tickets.size(); }

private:
  struct Part {
    model::KvHandle kv;            // the segment's whole KV at positions 0..n-1, retained (once ready)
    model::SeqId computing = -1;   // the phase-1 sequence, while it runs
    std::vector<int32_t> keys;     // structural keys
  };
  struct Entry {
    model::DepPrompt prompt;
    std::vector<Part> parts;
    int64_t hitTokens = 0;
    int32_t running = 0;
    Status error;
  };
  void release(Entry& e);

  model::ModelRunner& m_runner;
  memory::PrefixCache& m_cache;
  std::map<Ticket, Entry> m_tickets;
  std::map<model::SeqId, std::pair<Ticket, size_t>> m_bySeq;
  int32_t m_vocab;
  Ticket m_next = 1;
  DepKvStats m_stats;
};

}  // namespace rag::sched
