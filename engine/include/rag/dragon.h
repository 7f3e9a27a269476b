// DRAGON live runs for the workbench: a cloud side and a device side in this process, each on a
// worker thread of its own with its own model runner and its own share of the corpus (the cloud
// WordNet, the device FOLDOC), talking over a real loopback TCP connection whose delay line adds
// the link's latency, jitter and bandwidth (the same sessions, transport and protocol as
// `ragraph dragon cloud|device`). What each side does is streamed as DragonEvents.
//
//   RAG_ASSIGN_OR_RETURN(auto live, rag::DragonLive::create({.modelDir = dir, .corpusPath = db}));  // seconds
//   RAG_RETURN_IF_ERROR(live->run({.question = "What is a compiler?", .link = {.latencyMs = 100}},
//       [](const rag::DragonEvent& e) { ... },                     // a worker thread, one call at a time
//       [](const rag::Result<rag::DragonSummary>& r) { ... }));    // the device's worker, once, last
//   ...
//   live.reset();  // waits for a run in flight (bounded by maxTokens), closes the link
//
// Times are milliseconds since run() was called, on one monotonic clock for both sides, so a
// transfer's latency is receivedMs − sentMs. Both sides record the verdict of every position
// (the aggregator when it decides, the other side when the verdict arrives); rollbacks are
// recorded by the side that rolls back.
//
// Threading: create() blocks (it loads the model twice and profiles both runners): call it off
// the GUI thread. run() returns at once; one run at a time. The callbacks must return quickly
// and must not call back into this object.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag {

enum class DragonSide : uint8_t { Device = 0, Cloud = 1 };

struct DragonLiveParams {
  std::filesystem::path modelDir;   // HF Llama-family directory with tokenizer.json (both sides)
  std::filesystem::path corpusPath; // corpus.db with its FTS5 index (read only)
  bool deterministic = true;        // batch-invariant numerics (answers reproducible run to run)
  bool deviceKernels = true;        // false: the device on libtorch ops, a slower device
  int64_t kvBudgetBytes = 64ll << 20;  // each side's KV pool
};

struct DragonLinkSettings {
  double latencyMs = 0;      // added to the round trip, half each way
  double jitterMs = -1;      // width of the uniform per-frame jitter; < 0: latencyMs / 5
  double bandwidthMbps = 0;  // 0: unlimited
};

struct DragonRunSettings {
  std::string question;
  std::string method = "dragon";  // "dragon" or "drdg_tw" (the methods with a token-wise timeline)
  std::string policy = "greedy";  // who aggregates: greedy | device | cloud | random
  uint32_t maxTokens = 20;        // [1, 256]
  uint32_t docsPerSide = 2;       // [0, 8]
  uint32_t maxAhead = 3;          // drafts past the last target token, [1, 16]
  bool ignoreEos = false;
  uint64_t seed = 1;
  DragonLinkSettings link;
};

struct DragonEvent {
  enum class Kind : uint8_t {
    Decoded,   // `observer` computed its draft for `pos`: [startMs, endMs)
    Arrived,   // the peer's draft reached `observer` (sent at sentMs, received at receivedMs)
    Stale,     // ... and was dropped: drafted before its side learnt of a rollback
    Verdict,   // the target token of `pos`, decided by `side`; accepted[], next aggregator
    Rollback,  // `observer` dropped its drafts past `pos` and continued from the target token
  };
  Kind kind = Kind::Decoded;
  DragonSide observer = DragonSide::Device;  // the side that recorded the event
  DragonSide side = DragonSide::Device;      // whose draft; Verdict: the aggregator that decided
  uint32_t pos = 0;
  uint32_t token = 0;
  std::string text;           // the token's text
  double startMs = 0, endMs = 0;
  double sentMs = -1, receivedMs = -1;  // a frame from the peer; -1 for local events
  double decodeMs = 0;                  // Decoded / Arrived: the draft's decode time
  bool accepted[2] = {false, false};    // Verdict: indexed by DragonSide
  DragonSide next = DragonSide::Device; // Verdict: who aggregates next
};
std::string_view dragonEventKindName(DragonEvent::Kind k);

struct DragonSummary {
  std::string answer;
  std::vector<uint32_t> tokenIds;  // the answer's tokens (EOS excluded unless ignoreEos)
  uint32_t tokens = 0;
  double totalMs = 0, ttftMs = 0, perTokenMs = 0;
  int64_t accepted[2] = {0, 0}, rejected[2] = {0, 0};  // drafts, by side
  int64_t handovers = 0, staleDrafts = 0;
  int64_t bytesSent = 0, bytesReceived = 0;  // the device's frames, headers included
  double rttMs = 0;                          // the in-band echo's historical average
  std::string note;                          // e.g. the cloud was lost and the device finished alone
};

class DragonLive {
public:
  using EventSink = std::function<void(const DragonEvent&)>;
  using DoneSink = std::function<void(const Result<DragonSummary>&)>;

  // Loads both sides (model, tokenizer, corpus, BM25 index, runners), starts the cloud's worker
  // listening on a free loopback port and connects the device to it. NotFound for a missing
  // model directory, tokenizer or corpus, naming it; the loaders' errors otherwise.
  static Result<std::unique_ptr<DragonLive>> create(const DragonLiveParams& params);
  ~DragonLive();
  DragonLive(const DragonLive&) = delete;
  DragonLive& operator=(const DragonLive&) = delete;

  // Starts one run on the device's worker. InvalidArgument for bad settings (naming the field
  // and its range), Busy while a run is in flight, Unavailable once the cloud is gone.
  Status run(const DragonRunSettings& settings, EventSink onEvent, DoneSink onDone);
  bool running() const;
  std::string cloudAddress() const;  // the loopback address the cloud listens on

  struct Impl;

private:
  explicit DragonLive(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag
