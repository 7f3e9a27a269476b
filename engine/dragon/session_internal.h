// Internal to engine/dragon/ (session.cpp and speculative_run.cpp): the helpers both use and
// the speculative loop. Not part of the module's interface.
#pragma once

#include <algorithm>

#include "core/clock.h"
#include "dragon/doc_decoder.h"
#include "dragon/protocol.h"
#include "dragon/session.h"
#include "dragon/transport.h"

namespace rag::dragon {

template <typename M>
inline Status sendMsg(Transport& t, MsgType type, const M& m) {
  ByteWriter w;
  encode(m, w);
  return t.send(type, w.bytes());
}

// The longest wait for the peer: the session's timeout plus the link's latency and jitter.
inline int waitBudgetMs(const Transport& t, const SessionOptions& o) {
  const LinkParams l = t.link();
  return o.peerTimeoutMs + static_cast<int>(l.latencyMs + l.jitterMs) + 1000;
}

inline bool isEnd(const SideResources& side, const Hello& h, uint32_t token) {
  return !h.ignoreEos && side.eos && token == *side.eos;
}

// One side's part of a dragon or drdg_tw run (the loop of session.h's file comment): drafts up
// to `maxAhead` ahead, aggregates while this side holds the aggregator, applies verdicts, and,
// on the device, finishes alone when the cloud is lost.
Status runSpeculative(Transport& t, DocDecoder& dec, SideResources& side, const Hello& h, uint32_t maxAhead,
                      AggregatorPolicy policy, RunReport& rep, const SessionOptions& o, Stopwatch& clock);

}  // namespace rag::dragon
