// DRAGON sessions: one question answered by a device process and a cloud process over a
// Transport, with DRAGON itself or one of the paper's baselines, all in the same code.
//
//   // cloud process
//   RAG_ASSIGN_OR_RETURN(Listener l, Listener::listen("0.0.0.0:7410"));
//   RAG_ASSIGN_OR_RETURN(auto link, l.accept(timeoutMs, {}));
//   RAG_RETURN_IF_ERROR(serveCloud(*link, cloudSide, {}));          // until the device hangs up
//   // device process
//   RAG_ASSIGN_OR_RETURN(auto link, Transport::connect("host:7410", {}, 5000));
//   RAG_ASSIGN_OR_RETURN(RunReport r, runDevice(link.get(), deviceSide, settings));
//
// Methods (protocol.h Method):
//   dragon      speculative aggregation: both sides draft up to maxAhead tokens ahead on their own
//               documents; the aggregator (moved by the side scheduler) accepts or rejects drafts
//               against the aggregate; a rejected side rolls back (DocDecoder::reject).
//   drdg_tw     token-wise synchronisation: the same loop with maxAhead 1 and the aggregator fixed
//               on the device, so every token waits for both sides' distributions.
//   drdg_sw     sequence-wise: each side generates its whole answer on its own documents; the
//               two candidates are exchanged once, each side scores the other's, and the device
//               keeps the candidate with the larger p(y) = ω_D·p_D(y) + ω_C·p_C(y).
//   device_only CRCG on the device: its documents concatenated in one prompt, no link.
//   cloud_only  CRCG in the cloud; the tokens are streamed to the device.
//   drcg_text   the cloud sends its passages' text (DocText), the device prefills every passage
//               (both sides', best score first) in one prompt and decodes alone.
//   drcg_kv     the cloud prefills its passages (without the question) and sends their K/V rows
//               (KvChunk frames, kv_transfer.h); the device imports them as its prompt's cached
//               prefix, prefills its own passages and the question after them, decodes alone.
//               Its prompt is [cloud passages; device passages; question]: a KV prefix cannot be
//               interleaved with the device's passages by score as drcg_text's text can (rows
//               computed without the passages before them are another model input), so the
//               two answer alike exactly when every cloud passage outranks every device one
//               (then bit-identically in deterministic mode). The DRCG pair are the only
//               methods that ship documents.
//   score       no generation: Hello::answer is teacher-forced under Hello::scored's distribution
//               (dragon: p = ω_D·p_D + ω_C·p_C per token, the cloud sending its per-token
//               log-probabilities and W_C; device_only / cloud_only: one concatenated prompt),
//               for answer perplexity.
//
// Timing (measured on the device): totalMs from the Hello (or, device_only, the start) to the
// last target token; latency per token = totalMs / tokens; ttftMs to the first target token.
//
// Every wait has a timeout (SessionOptions::peerTimeoutMs plus the link's latency). A peer that
// disappears mid-generation makes the device finish on its own documents, saying so in
// RunReport::note; the cloud returns to waiting for the next connection.
// Not thread-safe: one thread runs a session, with its own runner.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dragon/doc_decoder.h"
#include "dragon/profiler.h"
#include "dragon/protocol.h"
#include "dragon/transport.h"
#include "model/runner.h"

namespace rag::dragon {

struct RetrievedPassage {
  std::string text;  // as a prompt shows it (with its newline)
  double score = 0;  // retrieval score, larger is better
};

// One side's own resources: its runner, its retrieval and its prompt format.
struct SideResources {
  Side side = Side::Device;
  model::ModelRunner* runner = nullptr;
  // The side's top-k passages for a question (its own corpus only).
  std::function<Result<std::vector<RetrievedPassage>>(const std::string& question, uint32_t k)> retrieve;
  // Prompt tokens for passages (in order) followed by the question, tokenized piece by piece:
  // prompt(A ++ B, q) is A's tokens followed by prompt(B, q) (drcg_kv sends A's KV as a prefix).
  std::function<std::vector<int32_t>(const std::vector<std::string>& passages, const std::string& question)> prompt;
  // Tokens of an answer as the model continues a prompt with it (Score runs).
  std::function<std::vector<int32_t>(const std::string& answer)> answerTokens;
  std::optional<uint32_t> eos;   // the model's end-of-sequence token
  uint64_t fingerprint = 0;      // the model's identity; both sides must agree
  DecodeFit offlineFit;          // profileDecodeTime() at start-up
  double scoreTemperature = 1;   // r_i = score / temperature in the aggregation weights
};

struct RunEvent;
struct SessionOptions {
  int peerTimeoutMs = 30000;  // longest wait for the peer (plus the link's latency)
  // Live observer of dragon / drdg_tw runs (the workbench's timeline): each RunEvent as it is
  // recorded, with nowNs() at the run clock's start (the event's times are ms after it). Called
  // on the session's thread, between decoding steps: it must return quickly.
  std::function<void(const RunEvent& e, uint64_t runStartNs)> onEvent = {};
};

// One event of a dragon / drdg_tw run as this side saw it, on the run's clock (ms since the
// run began): what a timeline of the run draws (decode lanes, transfers, accept/reject marks,
// rollbacks, who holds the aggregator).
struct RunEvent {
  enum class Kind : uint8_t {
    Decoded,    // this side computed a draft: [startMs, endMs)
    Arrived,    // the other side's draft arrived at endMs (decoded there in `decodeMs`)
    Stale,      // ... and was dropped: drafted before its side learnt of a rollback
    Verdict,    // a target token was fixed at endMs by `side`; accepted[], next aggregator
    Rollback,   // this side dropped its drafts past `pos` and continued from the target
  };
  Kind kind = Kind::Decoded;
  Side side = Side::Device;
  uint32_t pos = 0;
  uint32_t token = 0;
  double startMs = 0, endMs = 0;
  double decodeMs = 0;
  // A frame from the peer (Arrived, Stale, and a Verdict the peer decided): when the peer sent
  // it and when this side's receiver had it, on this run's clock; -1 for local events. The send
  // time is read off the peer's clock (the frame header's sentNs): meaningful when both sides
  // run on one machine (one monotonic clock), as loopback and in-process runs do.
  double sentMs = -1, receivedMs = -1;
  bool accepted[2] = {false, false};
  Side next = Side::Device;  // Verdict: who aggregates next
};
std::string_view runEventName(RunEvent::Kind k);

struct RunReport {
  Method method = Method::Dragon;
  std::vector<uint32_t> tokens;  // the answer's tokens (EOS excluded)
  double totalMs = 0, ttftMs = 0, prefillMs = 0;
  double perTokenMs() const { return tokens.empty() ? 0 : totalMs / static_cast<double>(tokens.size()); }
  uint32_t documents[2] = {0, 0};      // passages each side used
  int64_t accepted[2] = {0, 0}, rejected[2] = {0, 0};
  int64_t aggregatedOn[2] = {0, 0};    // aggregations performed on each side
  int64_t handovers = 0;
  int64_t staleDrafts = 0;             // drafts discarded because their side rolled back (queued
                                       // past the rejected one, or arriving with an old version)
  int64_t rollbacks = 0;               // this side's decoder rollbacks
  std::vector<uint8_t> acceptTrace[2]; // 1/0 per aggregated position, by side (Fig. 8's input)
  std::vector<double> decodeMs[2];     // measured decode time per draft, by side
  LinkStats link;                      // this run's frames (sent/received by this side)
  RttEstimate rtt;
  std::string note;                    // e.g. the peer was lost and the device finished alone
  // Score runs: log p(answer token | question, passages, previous answer tokens) per token.
  std::vector<float> answerLogp;
  std::vector<RunEvent> events;  // dragon / drdg_tw runs, in order
  int64_t kvTokensReceived = 0;  // drcg_kv on the device: tokens whose K/V came over the link
};

// Device: runs one question with settings.method (the question is settings.question). `link`
// may be null for device_only. The tokens are the answer.
Result<RunReport> runDevice(Transport* link, SideResources& side, const Hello& settings,
                            const SessionOptions& options = {});

// Cloud: answers sessions on `link` until the device says Bye or the connection closes
// (ok), or a protocol error (returned). `onRun` hears about each finished run.
Status serveCloud(Transport& link, SideResources& side, const SessionOptions& options = {},
                  const std::function<void(const Hello&, const RunReport&)>& onRun = {});

// The offline profile: decode steps of `sequences` sequences of random tokens at a few context
// lengths, fitted to d(l) = k·l + b (the runner must be idle; it is left idle).
Result<DecodeFit> profileDecodeTime(model::ModelRunner& runner, int sequences, int32_t vocab, uint64_t seed);

// A model fingerprint from what makes two models interchangeable for aggregation: the
// architecture's shape, the vocabulary and a sample of the weights' bytes (FNV-1a).
uint64_t fingerprintBytes(uint64_t seed, const void* data, size_t n);

}  // namespace rag::dragon
