#include "dragon/session.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "core/clock.h"
#include "dragon/aggregation.h"
#include "dragon/kv_transfer.h"
#include "dragon/session_internal.h"

namespace rag::dragon {

namespace {

Status sendError(Transport& t, const Status& s) {
  Bye b{s.message()};
  return sendMsg(t, MsgType::Error, b);
}

// Waits for a frame of `type`, answering pings; a Bye or Error from the peer, a broken link or
// the timeout is an error naming what was awaited.
Result<Frame> expect(Transport& t, MsgType type, const SessionOptions& o) {
  const int budget = waitBudgetMs(t, o);
  Stopwatch sw;
  for (;;) {
    const int left = budget - static_cast<int>(sw.elapsedMs());
    if (left <= 0)
      return Status::unavailable("no " + std::string(msgTypeName(type)) + " message from " + t.peer() + " within " +
                                 std::to_string(budget) + " ms");
    RAG_ASSIGN_OR_RETURN(std::optional<Frame> f, t.receive(std::min(left, 200)));
    if (!f) continue;
    if (f->header.type == type) return std::move(*f);
    if (f->header.type == MsgType::Ping) {
      RAG_RETURN_IF_ERROR(t.send(MsgType::Pong, {}));
      continue;
    }
    if (f->header.type == MsgType::Pong || f->header.type == MsgType::Ready) continue;
    if (f->header.type == MsgType::Error || f->header.type == MsgType::Bye) {
      Result<Bye> b = decodeBye(f->payload);
      return Status::unavailable("the peer " + t.peer() + (f->header.type == MsgType::Error ? " failed: " : " left: ") +
                                 (b ? b->reason : std::string("(unreadable reason)")));
    }
    if (f->header.type == MsgType::Draft || f->header.type == MsgType::Verdict) continue;  // a late frame of a run
    return Status::corrupt("expected a " + std::string(msgTypeName(type)) + " message from " + t.peer() + ", got " +
                           std::string(msgTypeName(f->header.type)));
  }
}

// End of a run on a connection: both sides send Bye and read up to the peer's, so that frames
// still in flight (drafts decoded past the end) never reach the next run.
void finishRun(Transport& t, const SessionOptions& o) {
  if (!sendMsg(t, MsgType::Bye, Bye{"end of run"}).isOk()) return;
  const int budget = waitBudgetMs(t, o);
  Stopwatch sw;
  while (sw.elapsedMs() < budget) {
    Result<std::optional<Frame>> f = t.receive(200);
    if (!f) return;
    if (*f && (*f)->header.type == MsgType::Bye) return;
    if (*f && (*f)->header.type == MsgType::Ping) (void)t.send(MsgType::Pong, {});
  }
}

std::vector<DocInput> perDocumentInputs(SideResources& side, const std::vector<RetrievedPassage>& passages,
                                        const std::string& question) {
  std::vector<DocInput> in;
  for (const RetrievedPassage& p : passages) in.push_back({side.prompt({p.text}, question), p.score / side.scoreTemperature});
  if (in.empty()) in.push_back({side.prompt({}, question), 0.0});
  return in;
}

// The leading tokens that prompt(passages, question) gives its passages: the prompt is tokenized
// piece by piece (SideResources::prompt), so it is those tokens followed by prompt({}, question).
// The KV of this prefix is the same whatever follows it (a causal prompt).
Result<std::vector<int32_t>> passagePrefix(const SideResources& side, const std::vector<std::string>& passages,
                                           const std::string& question) {
  if (passages.empty()) return std::vector<int32_t>{};
  std::vector<int32_t> all = side.prompt(passages, question);
  const std::vector<int32_t> tail = side.prompt({}, question);
  if (all.size() < tail.size() || !std::equal(tail.begin(), tail.end(), all.end() - static_cast<std::ptrdiff_t>(tail.size())))
    return Status::internal("this side's prompt does not end with the question's own tokens, so its passages' KV "
                            "cannot be sent as a prefix (the prompt must be tokenized piece by piece)");
  all.resize(all.size() - tail.size());
  return all;
}

// A side alone on one prompt: draft, accept, until EOS or the budget. `onToken` sees each.
Status decodeAlone(DocDecoder& dec, const SideResources& side, const Hello& h, RunReport& rep, Stopwatch& clock,
                   const std::function<Status(uint32_t token, bool done)>& onToken) {
  const uint32_t maxTokens = h.maxTokens;
  for (uint32_t i = 0; i < maxTokens; ++i) {
    RAG_ASSIGN_OR_RETURN(Drafted d, dec.draft());
    dec.accept();
    rep.decodeMs[static_cast<size_t>(side.side)].push_back(d.decodeMs);
    const bool end = isEnd(side, h, d.token);
    const bool done = end || i + 1 == maxTokens;
    if (!end) rep.tokens.push_back(d.token);
    if (rep.tokens.size() == 1 && !end) rep.ttftMs = clock.elapsedMs();
    if (onToken) RAG_RETURN_IF_ERROR(onToken(d.token, done));
    if (done) break;
  }
  return Status::ok();
}

// The shared part of a run on either side once the Hello is agreed.
Status runSide(Transport* t, SideResources& side, const Hello& h, RunReport& rep, const SessionOptions& o,
               Stopwatch& clock) {
  const Side me = side.side;
  const auto mi = static_cast<size_t>(me);
  rep.method = h.method;
  DecoderParams dp{.topP = h.topP,
                   .greedy = h.temperature <= 0,
                   .temperature = h.temperature > 0 ? h.temperature : 1.0,
                   .seed = h.seed + static_cast<uint64_t>(me) * 7919};
  switch (h.method) {
    case Method::Dragon:
    case Method::DrdgTw: {
      RAG_ASSIGN_OR_RETURN(std::vector<RetrievedPassage> ps, side.retrieve(h.question, h.docsPerSide));
      rep.documents[mi] = static_cast<uint32_t>(ps.size());
      DocDecoder dec(*side.runner, dp);
      RAG_RETURN_IF_ERROR(dec.start(perDocumentInputs(side, ps, h.question)));
      rep.prefillMs = dec.prefillMs();
      Ready ready{static_cast<uint32_t>(ps.size()), dec.prefillMs(), side.offlineFit.slopeMs,
                  side.offlineFit.interceptMs};
      // A link that broke already is noticed by the run's first receive (the device then
      // finishes alone), so a failed send is not an error here.
      (void)sendMsg(*t, MsgType::Ready, ready);
      const bool tw = h.method == Method::DrdgTw;
      RAG_RETURN_IF_ERROR(runSpeculative(*t, dec, side, h, tw ? 1 : h.maxAhead,
                                         tw ? AggregatorPolicy::Device : h.policy, rep, o, clock));
      break;
    }
    case Method::DrdgSw: {
      RAG_ASSIGN_OR_RETURN(std::vector<RetrievedPassage> ps, side.retrieve(h.question, h.docsPerSide));
      rep.documents[mi] = static_cast<uint32_t>(ps.size());
      dp.topP = 1.0;  // the candidate's own scores, untruncated like score()'s
      DocDecoder dec(*side.runner, dp);
      RAG_RETURN_IF_ERROR(dec.start(perDocumentInputs(side, ps, h.question)));
      rep.prefillMs = dec.prefillMs();
      SeqCandidate mine;
      for (uint32_t i = 0; i < h.maxTokens; ++i) {
        RAG_ASSIGN_OR_RETURN(Drafted d, dec.draft());
        dec.accept();
        mine.weight = d.local.weight;
        rep.decodeMs[mi].push_back(d.decodeMs);
        mine.tokens.push_back(d.token);
        mine.logp.push_back(static_cast<float>(std::log(std::max(d.local.dist.prob(d.token), 1e-300))));
        if (isEnd(side, h, d.token)) break;
      }
      RAG_RETURN_IF_ERROR(sendMsg(*t, MsgType::SeqCandidate, mine));
      RAG_ASSIGN_OR_RETURN(Frame f, expect(*t, MsgType::SeqCandidate, o));
      RAG_ASSIGN_OR_RETURN(SeqCandidate theirs, decodeSeqCandidate(f.payload));
      RAG_ASSIGN_OR_RETURN(std::vector<float> mineOnTheirs, dec.score(theirs.tokens));
      if (me == Side::Cloud) {
        RAG_RETURN_IF_ERROR(sendMsg(*t, MsgType::SeqScore, SeqScore{mineOnTheirs}));
        break;
      }
      RAG_ASSIGN_OR_RETURN(Frame g, expect(*t, MsgType::SeqScore, o));
      RAG_ASSIGN_OR_RETURN(SeqScore theirsOnMine, decodeSeqScore(g.payload));
      if (theirsOnMine.logp.size() != mine.tokens.size())
        return Status::corrupt("malformed seq_score: " + std::to_string(theirsOnMine.logp.size()) + " scores for " +
                               std::to_string(mine.tokens.size()) + " tokens");
      const auto [od, oc] = sideWeights(mine.weight, theirs.weight);
      auto seqLogp = [&](const std::vector<float>& dLogp, const std::vector<float>& cLogp) {
        double a = std::log(od), b = std::log(oc);
        for (float v : dLogp) a += v;
        for (float v : cLogp) b += v;
        const double m = std::max(a, b);
        return m + std::log(std::exp(a - m) + std::exp(b - m));
      };
      const double pMine = seqLogp(mine.logp, theirsOnMine.logp);
      const double pTheirs = seqLogp(mineOnTheirs, theirs.logp);
      const std::vector<uint32_t>& chosen = pTheirs > pMine ? theirs.tokens : mine.tokens;
      for (uint32_t tok : chosen)
        if (!isEnd(side, h, tok)) rep.tokens.push_back(tok);
      rep.ttftMs = clock.elapsedMs();  // every token arrives at once
      break;
    }
    case Method::DeviceOnly:
    case Method::CloudOnly: {
      if ((h.method == Method::DeviceOnly) != (me == Side::Device)) break;  // the other side idles
      RAG_ASSIGN_OR_RETURN(std::vector<RetrievedPassage> ps, side.retrieve(h.question, h.docsPerSide));
      rep.documents[mi] = static_cast<uint32_t>(ps.size());
      std::vector<std::string> texts;
      for (const RetrievedPassage& p : ps) texts.push_back(p.text);
      DocDecoder dec(*side.runner, dp);
      RAG_RETURN_IF_ERROR(dec.start({{side.prompt(texts, h.question), 0.0}}));
      rep.prefillMs = dec.prefillMs();
      uint32_t pos = 0;
      RAG_RETURN_IF_ERROR(decodeAlone(dec, side, h, rep, clock, [&](uint32_t tok, bool done) -> Status {
        if (me != Side::Cloud || !t) return Status::ok();
        return sendMsg(*t, MsgType::Tokens, TokenList{pos++, {tok}, done});
      }));
      break;
    }
    case Method::Score: {
      const bool both = h.scored == Method::Dragon;
      const Side owner = h.scored == Method::CloudOnly ? Side::Cloud : Side::Device;
      if (!both && me != owner) {
        if (me == Side::Cloud) break;  // device_only: the cloud idles
      } else {
        if (!side.answerTokens) return Status::invalidArgument("this side cannot tokenize answers");
        RAG_ASSIGN_OR_RETURN(std::vector<RetrievedPassage> ps, side.retrieve(h.question, h.docsPerSide));
        rep.documents[mi] = static_cast<uint32_t>(ps.size());
        std::vector<int32_t> answer = side.answerTokens(h.answer);
        if (side.eos) answer.push_back(static_cast<int32_t>(*side.eos));
        if (answer.empty()) return Status::invalidArgument("a score run needs a non-empty answer");
        std::vector<DocInput> in;
        if (both) {
          in = perDocumentInputs(side, ps, h.question);
        } else {
          std::vector<std::string> texts;
          for (const RetrievedPassage& p : ps) texts.push_back(p.text);
          in.push_back({side.prompt(texts, h.question), 0.0});
        }
        DocDecoder dec(*side.runner, {.topP = 1.0, .greedy = true, .seed = h.seed});
        RAG_RETURN_IF_ERROR(dec.start(std::move(in)));
        rep.prefillMs = dec.prefillMs();
        SeqCandidate mine;
        mine.tokens.assign(answer.begin(), answer.end());
        mine.weight = dec.weight();
        RAG_ASSIGN_OR_RETURN(mine.logp, dec.score(mine.tokens));
        if (me == Side::Cloud) {
          RAG_RETURN_IF_ERROR(sendMsg(*t, MsgType::SeqCandidate, mine));
          break;
        }
        if (!both) {
          rep.answerLogp = mine.logp;
          break;
        }
        RAG_ASSIGN_OR_RETURN(Frame f, expect(*t, MsgType::SeqCandidate, o));
        RAG_ASSIGN_OR_RETURN(SeqCandidate theirs, decodeSeqCandidate(f.payload));
        if (theirs.tokens != mine.tokens)
          return Status::corrupt("the cloud scored other answer tokens than the device (a tokenizer mismatch)");
        const auto [od, oc] = sideWeights(mine.weight, theirs.weight);
        for (size_t j = 0; j < mine.logp.size(); ++j)
          rep.answerLogp.push_back(static_cast<float>(
              std::log(od * std::exp(static_cast<double>(mine.logp[j])) + oc * std::exp(static_cast<double>(theirs.logp[j])))));
        break;
      }
      // device side of cloud_only: the cloud's scores
      RAG_ASSIGN_OR_RETURN(Frame f, expect(*t, MsgType::SeqCandidate, o));
      RAG_ASSIGN_OR_RETURN(SeqCandidate theirs, decodeSeqCandidate(f.payload));
      rep.answerLogp = theirs.logp;
      break;
    }
    case Method::DrcgText: {
      RAG_ASSIGN_OR_RETURN(std::vector<RetrievedPassage> ps, side.retrieve(h.question, h.docsPerSide));
      rep.documents[mi] = static_cast<uint32_t>(ps.size());
      if (me == Side::Cloud) {
        DocTexts dt;
        for (const RetrievedPassage& p : ps) {
          dt.texts.push_back(p.text);
          dt.scores.push_back(p.score);
        }
        RAG_RETURN_IF_ERROR(sendMsg(*t, MsgType::DocText, dt));
        break;
      }
      RAG_ASSIGN_OR_RETURN(Frame f, expect(*t, MsgType::DocText, o));
      RAG_ASSIGN_OR_RETURN(DocTexts dt, decodeDocTexts(f.payload));
      rep.documents[1] = static_cast<uint32_t>(dt.texts.size());
      for (size_t i = 0; i < dt.texts.size(); ++i) ps.push_back({dt.texts[i], dt.scores[i]});
      std::stable_sort(ps.begin(), ps.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
      std::vector<std::string> texts;
      for (const RetrievedPassage& p : ps) texts.push_back(p.text);
      DocDecoder dec(*side.runner, dp);
      RAG_RETURN_IF_ERROR(dec.start({{side.prompt(texts, h.question), 0.0}}));
      rep.prefillMs = dec.prefillMs();
      RAG_RETURN_IF_ERROR(decodeAlone(dec, side, h, rep, clock, {}));
      break;
    }
    case Method::DrcgKv: {
      RAG_ASSIGN_OR_RETURN(std::vector<RetrievedPassage> ps, side.retrieve(h.question, h.docsPerSide));
      rep.documents[mi] = static_cast<uint32_t>(ps.size());
      if (me == Side::Cloud) {
        std::vector<std::string> texts;
        for (const RetrievedPassage& p : ps) texts.push_back(p.text);
        RAG_ASSIGN_OR_RETURN(std::vector<int32_t> prefix, passagePrefix(side, texts, h.question));
        Stopwatch sw;
        RAG_ASSIGN_OR_RETURN(std::vector<KvChunk> chunks, computePrefixKv(*side.runner, prefix, kDefaultKvChunkBytes,
                                                                         static_cast<uint32_t>(ps.size())));
        rep.prefillMs = sw.elapsedMs();
        for (const KvChunk& c : chunks) RAG_RETURN_IF_ERROR(sendMsg(*t, MsgType::KvChunk, c));
        break;
      }
      std::vector<KvChunk> chunks;
      for (uint32_t got = 0;;) {
        RAG_ASSIGN_OR_RETURN(Frame f, expect(*t, MsgType::KvChunk, o));
        RAG_ASSIGN_OR_RETURN(KvChunk c, decodeKvChunk(f.payload));
        got += static_cast<uint32_t>(c.tokens.size());
        const bool last = got >= c.totalTokens;
        chunks.push_back(std::move(c));
        if (last) break;
      }
      RAG_ASSIGN_OR_RETURN(model::KvHandle kv, importPrefixKv(*side.runner, chunks));
      rep.kvTokensReceived = kv.numTokens;
      rep.documents[1] = chunks.front().passages;
      std::vector<std::string> texts;
      for (const RetrievedPassage& p : ps) texts.push_back(p.text);
      DocDecoder dec(*side.runner, dp);
      Status started = dec.start({{side.prompt(texts, h.question), 0.0, kv}});
      if (kv.numTokens > 0) side.runner->releaseKv(kv);  // the decoder's sequence holds the blocks now
      RAG_RETURN_IF_ERROR(started);
      rep.prefillMs = dec.prefillMs();
      RAG_RETURN_IF_ERROR(decodeAlone(dec, side, h, rep, clock, {}));
      break;
    }
  }
  if (t) rep.rtt = t->rtt();
  return Status::ok();
}

// The frames of one run: `after` minus `before`.
LinkStats linkDelta(const LinkStats& before, const LinkStats& after) {
  LinkStats d;
  for (int i = 0; i < kMsgTypeCount; ++i) {
    d.sent[i] = {after.sent[i].frames - before.sent[i].frames, after.sent[i].bytes - before.sent[i].bytes};
    d.received[i] = {after.received[i].frames - before.received[i].frames,
                     after.received[i].bytes - before.received[i].bytes};
  }
  return d;
}

LinkParams linkOf(const Hello& h) {
  return {.latencyMs = h.latencyMs, .jitterMs = h.jitterMs, .bandwidthMbps = h.bandwidthMbps, .seed = h.seed};
}

}  // namespace

std::string_view runEventName(RunEvent::Kind k) {
  switch (k) {
    case RunEvent::Kind::Decoded: return "decoded";
    case RunEvent::Kind::Arrived: return "arrived";
    case RunEvent::Kind::Stale: return "stale";
    case RunEvent::Kind::Verdict: return "verdict";
    case RunEvent::Kind::Rollback: return "rollback";
  }
  return "unknown";
}

Result<RunReport> runDevice(Transport* t, SideResources& side, const Hello& settings, const SessionOptions& o) {
  if (side.side != Side::Device) return Status::invalidArgument("runDevice needs the device's resources");
  RunReport rep;
  rep.method = settings.method;
  Stopwatch clock;
  if (settings.method == Method::DeviceOnly ||
      (settings.method == Method::Score && settings.scored == Method::DeviceOnly)) {
    RAG_RETURN_IF_ERROR(runSide(nullptr, side, settings, rep, o, clock));
    rep.totalMs = clock.elapsedMs();
    return rep;
  }
  if (!t) return Status::invalidArgument(std::string(methodName(settings.method)) + " needs a link to the cloud");
  t->setLink(linkOf(settings));
  const LinkStats before = t->stats();
  Hello h = settings;
  h.modelFingerprint = side.fingerprint;
  h.protocolVersion = kProtocolVersion;
  RAG_RETURN_IF_ERROR(sendMsg(*t, MsgType::Hello, h));
  RAG_ASSIGN_OR_RETURN(Frame f, expect(*t, MsgType::HelloAck, o));
  RAG_ASSIGN_OR_RETURN(HelloAck ack, decodeHelloAck(f.payload));
  if (!ack.accepted) return Status::invalidArgument("the cloud refused the run: " + ack.reason);
  Status s = runSide(t, side, h, rep, o, clock);
  rep.totalMs = clock.elapsedMs();
  if (!s) {
    (void)sendError(*t, s);
    return s;
  }
  if (settings.method == Method::CloudOnly) {
    // The tokens come from the cloud.
    rep.tokens.clear();
    for (;;) {
      RAG_ASSIGN_OR_RETURN(Frame tf, expect(*t, MsgType::Tokens, o));
      RAG_ASSIGN_OR_RETURN(TokenList tl, decodeTokenList(tf.payload));
      for (uint32_t tok : tl.tokens) {
        if (isEnd(side, h, tok)) continue;
        rep.tokens.push_back(tok);
        if (rep.tokens.size() == 1) rep.ttftMs = clock.elapsedMs();
      }
      if (tl.done) break;
    }
    rep.totalMs = clock.elapsedMs();
    rep.rtt = t->rtt();
  }
  // This run's frames, from the Hello to the last target token (not the end-of-run Byes).
  rep.link = linkDelta(before, t->stats());
  if (!t->broken()) finishRun(*t, o);
  return rep;
}

Status serveCloud(Transport& t, SideResources& side, const SessionOptions& o,
                  const std::function<void(const Hello&, const RunReport&)>& onRun) {
  if (side.side != Side::Cloud) return Status::invalidArgument("serveCloud needs the cloud's resources");
  for (;;) {
    Result<std::optional<Frame>> f = t.receive(1000);
    if (!f) {
      if (f.status().code() == StatusCode::Unavailable || f.status().code() == StatusCode::Cancelled)
        return Status::ok();  // the device hung up
      return f.status();
    }
    if (!*f) continue;
    const Frame& fr = **f;
    if (fr.header.type == MsgType::Bye) continue;  // a late end-of-run marker
    if (fr.header.type == MsgType::Ping) {
      RAG_RETURN_IF_ERROR(t.send(MsgType::Pong, {}));
      continue;
    }
    if (fr.header.type != MsgType::Hello) {
      if (fr.header.type == MsgType::Draft || fr.header.type == MsgType::Verdict || fr.header.type == MsgType::Pong)
        continue;  // late frames of a finished run
      Status bad = Status::corrupt("expected a hello message from " + t.peer() + ", got " +
                                   std::string(msgTypeName(fr.header.type)));
      (void)sendError(t, bad);
      return bad;
    }
    Result<Hello> h = decodeHello(fr.payload);
    if (!h) {
      (void)sendError(t, h.status());
      return h.status();
    }
    HelloAck ack;
    ack.modelFingerprint = side.fingerprint;
    if (h->modelFingerprint != side.fingerprint) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "model fingerprint %016llx differs from the cloud's %016llx",
                    static_cast<unsigned long long>(h->modelFingerprint),
                    static_cast<unsigned long long>(side.fingerprint));
      ack.reason = std::string(buf) + "; run both sides with the same --model";
    } else {
      ack.accepted = true;
    }
    RAG_RETURN_IF_ERROR(sendMsg(t, MsgType::HelloAck, ack));
    if (!ack.accepted) continue;
    t.setLink(linkOf(*h));
    RunReport rep;
    Stopwatch clock;
    const LinkStats before = t.stats();
    Status s = runSide(&t, side, *h, rep, o, clock);
    rep.totalMs = clock.elapsedMs();
    rep.link = linkDelta(before, t.stats());
    if (!s) {
      (void)sendError(t, s);
      return s;
    }
    if (onRun) onRun(*h, rep);
    if (t.broken()) return Status::ok();
    finishRun(t, o);
  }
}

Result<DecodeFit> profileDecodeTime(model::ModelRunner& runner, int sequences, int32_t vocab, uint64_t seed) {
  std::vector<std::pair<double, double>> samples;
  Rng rng(seed);
  for (int len : {24, 72, 144}) {
    std::vector<DocInput> docs;
    for (int i = 0; i < std::max(1, sequences); ++i) {
      DocInput d;
      for (int k = 0; k < len; ++k) d.tokens.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab))));
      docs.push_back(std::move(d));
    }
    DocDecoder dec(runner, {.topP = 0.8, .greedy = true, .seed = seed});
    RAG_RETURN_IF_ERROR(dec.start(std::move(docs)));
    RAG_ASSIGN_OR_RETURN(Drafted first, dec.draft());  // logits already there: aggregation only
    (void)first;
    for (int s = 0; s < 4; ++s) {
      RAG_ASSIGN_OR_RETURN(Drafted d, dec.draft());
      samples.emplace_back(static_cast<double>(d.contextLen), d.decodeMs);
    }
  }
  return fitDecodeTime(samples);
}

uint64_t fingerprintBytes(uint64_t h, const void* data, size_t n) {
  if (h == 0) h = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace rag::dragon
