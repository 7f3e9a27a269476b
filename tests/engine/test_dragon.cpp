// DRAGON: the wire protocol, the transport on loopback sockets, the aggregation maths, the
// decoder's rollback, and whole device/cloud runs on a tiny random model (the cloud in a thread
// with its own runner, over a real TCP connection). No assertion on timings.
#include <QtTest>

#include <cmath>
#include <thread>

#include "dragon/aggregation.h"
#include "dragon/doc_decoder.h"
#include "dragon/kv_transfer.h"
#include "dragon/protocol.h"
#include "dragon/schedule_sim.h"
#include "dragon/session.h"
#include "dragon/side_scheduler.h"
#include "dragon/transport.h"
#include "tiny_llama_config.h"
#include "model/model_config.h"
#include "model/runner.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::dragon;

namespace {

std::shared_ptr<const model::LlamaModel> tinyModel() {
  auto m = model::randomModel(model::testing::tinyConfig(), 11);
  if (!m) qFatal("random model: %s", m.status().message().c_str());
  return *m;
}

std::unique_ptr<model::ModelRunner> tinyRunner(int32_t blockSize = 16) {
  model::RunnerParams p;
  p.deterministic = true;
  p.blockSize = blockSize;
  auto r = model::ModelRunner::create(tinyModel(), p);
  if (!r) qFatal("runner: %s", r.status().message().c_str());
  return std::move(*r);
}

// A side whose "documents" are fixed token strings (a corpus of its own) and whose prompt is
// the concatenation of document tokens and question tokens (one token per character).
struct FakeSide {
  std::unique_ptr<model::ModelRunner> runner = tinyRunner();
  std::vector<std::pair<std::vector<int32_t>, double>> docs;
  SideResources res;

  FakeSide(Side s, uint64_t docSeed, uint64_t fingerprint = 42) {
    Rng rng(docSeed);
    for (int d = 0; d < 3; ++d) {
      std::vector<int32_t> t;
      for (int i = 0; i < 12 + 5 * d; ++i) t.push_back(static_cast<int32_t>(2 + rng.below(90)));
      docs.push_back({t, 3.0 - 0.7 * d + 0.3 * static_cast<double>(docSeed % 3)});
    }
    res.side = s;
    res.runner = runner.get();
    res.fingerprint = fingerprint;
    res.offlineFit = {0.001, 0.2};
    res.retrieve = [this](const std::string&, uint32_t k) -> Result<std::vector<RetrievedPassage>> {
      std::vector<RetrievedPassage> out;
      for (size_t i = 0; i < docs.size() && out.size() < k; ++i) {
        std::string text;
        for (int32_t t : docs[i].first) text.push_back(static_cast<char>(t));
        out.push_back({text, docs[i].second});
      }
      return out;
    };
    res.answerTokens = [](const std::string& answer) {
      std::vector<int32_t> toks;
      for (char c : answer) toks.push_back(2 + static_cast<unsigned char>(c) % 90);
      return toks;
    };
    res.prompt = [](const std::vector<std::string>& passages, const std::string& question) {
      std::vector<int32_t> toks;
      for (const std::string& p : passages)
        for (char c : p) toks.push_back(static_cast<unsigned char>(c));
      for (char c : question) toks.push_back(2 + static_cast<unsigned char>(c) % 90);
      return toks;
    };
  }
};

// The cloud in a thread: accepts one connection and serves it until the device leaves.
struct CloudThread {
  Listener listener;
  std::thread thread;
  Status result;
  explicit CloudThread(SideResources& res, Listener l) : listener(std::move(l)) {
    thread = std::thread([this, &res] {
      auto link = listener.accept(20000, {});
      if (!link) {
        result = link.status();
        return;
      }
      result = serveCloud(**link, res, {.peerTimeoutMs = 5000});
      (*link)->close(100);
    });
  }
  ~CloudThread() {
    if (thread.joinable()) thread.join();
  }
};

Listener listenLoopback() {
  auto l = Listener::listen("127.0.0.1:0");
  if (!l) qFatal("listen: %s", l.status().message().c_str());
  return std::move(*l);
}

Hello settings(Method m, double latencyMs = 0, uint32_t maxTokens = 16) {
  Hello h;
  h.method = m;
  h.maxTokens = maxTokens;
  h.docsPerSide = 3;
  h.maxAhead = 3;
  h.topP = 0.8f;
  h.latencyMs = latencyMs;
  h.question = "what is it";
  return h;
}

// Synchronous aggregation without any link: both decoders draft, the aggregate's argmax is the
// target, both continue from it. The reference the distributed runs must match.
std::vector<uint32_t> synchronousReference(FakeSide& dev, FakeSide& cloud, const Hello& h) {
  DocDecoder dd(*dev.runner, {.topP = h.topP, .greedy = true, .seed = 1});
  DocDecoder cd(*cloud.runner, {.topP = h.topP, .greedy = true, .seed = 2});
  auto inputs = [&](FakeSide& s) {
    std::vector<DocInput> in;
    auto ps = s.res.retrieve(h.question, h.docsPerSide);
    for (const RetrievedPassage& p : *ps) in.push_back({s.res.prompt({p.text}, h.question), p.score});
    return in;
  };
  if (!dd.start(inputs(dev)) || !cd.start(inputs(cloud))) qFatal("start");
  std::vector<uint32_t> out;
  Rng rng(1);
  for (uint32_t i = 0; i < h.maxTokens; ++i) {
    auto a = dd.draft();
    auto b = cd.draft();
    Draft x{.side = Side::Device, .pos = i, .token = a->token, .weight = a->local.weight, .dist = a->local.dist};
    Draft y{.side = Side::Cloud, .pos = i, .token = b->token, .weight = b->local.weight, .dist = b->local.dist};
    const AggregateResult r = aggregate(x, y, true, rng);
    if (r.accepted[0]) dd.accept();
    else (void)dd.reject(r.token);
    if (r.accepted[1]) cd.accept();
    else (void)cd.reject(r.token);
    out.push_back(r.token);
  }
  return out;
}

Result<RunReport> runOnce(FakeSide& dev, FakeSide& cloud, const Hello& h) {
  CloudThread ct(cloud.res, listenLoopback());
  auto link = Transport::connect(ct.listener.address(), {}, 5000);
  if (!link) return link.status();
  Result<RunReport> rep = runDevice(link->get(), dev.res, h, {.peerTimeoutMs = 5000});
  (*link)->close(200);
  return rep;
}

}  // namespace

class TestDragon : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void protocolRoundTrips() {
    Draft d{.side = Side::Cloud, .pos = 7, .version = 2, .token = 5, .weight = 1.5, .decodeMs = 0.25, .contextLen = 40};
    d.dist.ids = {1, 5, 9};
    d.dist.logp = {-2.0f, -0.5f, -1.5f};
    ByteWriter w;
    encode(d, w);
    auto back = decodeDraft(w.bytes());
    QVERIFY(back.isOk());
    QCOMPARE(back->pos, 7u);
    QCOMPARE(back->version, 2u);
    QCOMPARE(back->token, 5u);
    QCOMPARE(back->dist.ids, d.dist.ids);
    QCOMPARE(back->side, Side::Cloud);
    // Truncated and padded payloads are refused, naming the message.
    std::vector<uint8_t> shortP(w.bytes().begin(), w.bytes().end() - 3);
    auto bad = decodeDraft(shortP);
    QVERIFY(!bad.isOk());
    QCOMPARE(bad.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(bad.status(), {"draft", "truncated"}));
    std::vector<uint8_t> longP = w.bytes();
    longP.push_back(0);
    QVERIFY(mentions(decodeDraft(longP).status(), {"trailing"}));
    // A draft token outside its own distribution is malformed (the aggregator would divide by 0).
    d.token = 4;
    ByteWriter w2;
    encode(d, w2);
    QVERIFY(mentions(decodeDraft(w2.bytes()).status(), {"outside its own distribution"}));

    Hello h = settings(Method::DrdgSw, 100);
    ByteWriter hw;
    encode(h, hw);
    auto hb = decodeHello(hw.bytes());
    QVERIFY(hb.isOk());
    QCOMPARE(hb->method, Method::DrdgSw);
    QCOMPARE(hb->question, h.question);
    QCOMPARE(hb->latencyMs, 100.0);

    uint8_t hdr[kHeaderBytes];
    encodeHeader({.type = MsgType::Verdict, .length = 10, .sentNs = 5}, hdr);
    auto fh = decodeHeader(hdr);
    QVERIFY(fh.isOk());
    QCOMPARE(fh->type, MsgType::Verdict);
    hdr[0] ^= 0xFF;
    QVERIFY(mentions(decodeHeader(hdr).status(), {"magic", "DRAGON protocol"}));
    encodeHeader({.version = 9, .type = MsgType::Ping}, hdr);
    QCOMPARE(decodeHeader(hdr).status().code(), StatusCode::SchemaMismatch);
    encodeHeader({.type = MsgType::Ping, .length = kMaxPayloadBytes + 1}, hdr);
    QVERIFY(mentions(decodeHeader(hdr).status(), {"exceeds"}));
  }

  void halfPrecisionLogProbabilities() {
    for (uint32_t h = 0; h < 65536; ++h) {  // every half survives the round trip
      const float f = halfToFloat(static_cast<uint16_t>(h));
      if (!std::isnan(f)) QCOMPARE(floatToHalf(f), static_cast<uint16_t>(h));
    }
    QCOMPARE(roundToHalf(-5.1234f), -5.125f);            // nearest
    QCOMPARE(roundToHalf(-70000.0f), -INFINITY);         // past the largest half
    QCOMPARE(floatToHalf(1.0f + 1.0f / 2048), floatToHalf(1.0f));  // a tie goes to the even half
    // What the wire carries is what the drafting side used: 4 + 2 bytes per entry.
    Draft d{.side = Side::Device, .token = 2};
    d.dist = {{2, 3}, {roundToHalf(std::log(0.7f)), roundToHalf(std::log(0.3f))}};
    ByteWriter w;
    encode(d, w);
    auto back = decodeDraft(w.bytes());
    QVERIFY(back.isOk());
    QCOMPARE(back->dist.logp, d.dist.logp);
    ByteWriter empty;
    encode(Draft{.side = Side::Device, .token = 2, .dist = {{2}, {0.0f}}}, empty);
    QCOMPARE(w.bytes().size() - empty.bytes().size(), size_t{6});
  }

  void transportCarriesFramesInOrderAndCountsBytes() {
    Listener l = listenLoopback();
    auto client = Transport::connect(l.address(), {.latencyMs = 20, .jitterMs = 10}, 2000);
    QVERIFY2(client.isOk(), client.status().message().c_str());
    auto server = l.accept(2000, {});
    QVERIFY(server.isOk());
    for (uint32_t i = 0; i < 50; ++i) {
      ByteWriter w;
      w.u32(i);
      QVERIFY((*client)->send(MsgType::Tokens, w.bytes()).isOk());
    }
    for (uint32_t i = 0; i < 50; ++i) {
      auto f = (*server)->receive(5000);
      QVERIFY(f.isOk() && f->has_value());
      ByteReader r((*f)->payload, "test");
      QCOMPARE(r.u32(), i);  // jitter never reorders frames
    }
    QVERIFY((*server)->send(MsgType::Pong, {}).isOk());
    auto pong = (*client)->receive(5000);
    QVERIFY(pong.isOk() && pong->has_value());
    QVERIFY((*client)->rtt().samples >= 1);  // the pong echoed one of our frames
    const LinkStats s = (*client)->stats();
    QCOMPARE(s.sent[static_cast<size_t>(MsgType::Tokens)].frames, int64_t{50});
    QCOMPARE(s.sent[static_cast<size_t>(MsgType::Tokens)].bytes, int64_t{50 * (kHeaderBytes + 4)});
    QCOMPARE((*server)->stats().received[static_cast<size_t>(MsgType::Tokens)].bytes, int64_t{50 * (kHeaderBytes + 4)});
    // Nothing more: receive times out with no frame.
    auto none = (*server)->receive(50);
    QVERIFY(none.isOk() && !none->has_value());
  }

  void badAddressesGiveClearErrors() {
    auto malformed = Transport::connect("localhost", {}, 500);
    QCOMPARE(malformed.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(malformed.status(), {"HOST:PORT"}));
    // A port nothing listens on: refused, naming the cloud command.
    uint16_t port = 0;
    {
      Listener l = listenLoopback();
      port = parseAddress(l.address())->second;
    }
    auto refused = Transport::connect("127.0.0.1:" + std::to_string(port), {}, 2000);
    QVERIFY(!refused.isOk());
    QVERIFY(mentions(refused.status(), {"refused", "dragon cloud --listen"}));
    auto unresolved = Transport::connect("no-such-host.invalid:7410", {}, 2000);
    QVERIFY(!unresolved.isOk());
    QVERIFY(mentions(unresolved.status(), {"cannot resolve"}));
  }

  void malformedFramesAreErrorsNotCrashes() {
    Listener l = listenLoopback();
    auto client = Transport::connect(l.address(), {}, 2000);
    QVERIFY(client.isOk());
    auto server = l.accept(2000, {});
    QVERIFY(server.isOk());
    const std::string junk = "GET / HTTP/1.1\r\nHost: example.org\r\nAccept: */*\r\n\r\n";  // > one header
    QVERIFY((*client)->sendRawForTest({reinterpret_cast<const uint8_t*>(junk.data()), junk.size()}).isOk());
    auto f = (*server)->receive(2000);
    QVERIFY(!f.isOk());
    QCOMPARE(f.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(f.status(), {"magic"}));
    QVERIFY(!(*server)->send(MsgType::Ping, {}).isOk());  // the link is down for good

    // A header announcing more payload than arrives before the peer closes.
    Listener l2 = listenLoopback();
    auto c2 = Transport::connect(l2.address(), {}, 2000);
    auto s2 = l2.accept(2000, {});
    QVERIFY(c2.isOk() && s2.isOk());
    uint8_t hdr[kHeaderBytes];
    encodeHeader({.type = MsgType::Draft, .length = 100}, hdr);
    QVERIFY((*c2)->sendRawForTest({hdr, kHeaderBytes}).isOk());
    (*c2)->close(0);
    auto g = (*s2)->receive(2000);
    QVERIFY(!g.isOk());
    QVERIFY(mentions(g.status(), {"inside a draft payload"}));
  }

  void aggregationMaths() {
    // Two documents, scores 0 and ln 3: weights 1/4 and 3/4.
    std::vector<float> a = {0, 0, 0, 0}, b = {10, 0, 0, 0};
    std::vector<std::span<const float>> rows = {a, b};
    std::vector<double> scores = {0, std::log(3.0)};
    LocalDist l = localAggregate(rows, scores, {.topP = 1.0});
    QCOMPARE(l.dist.ids.size(), size_t{4});
    const double pb0 = std::exp(10.0) / (std::exp(10.0) + 3);
    QVERIFY(std::abs(l.dist.prob(0) - (0.25 * 0.25 + 0.75 * pb0)) < 1e-3);  // log-probs in half precision
    QVERIFY(std::abs(l.weight - std::log(4.0)) < 1e-9);
    // Top-p keeps the smallest head reaching p.
    LocalDist t = localAggregate(rows, scores, {.topP = 0.5});
    QCOMPARE(t.dist.ids, std::vector<uint32_t>{0});
    QCOMPARE(t.dist.logp[0], 0.0f);
    // A temperature below 1 sharpens each document's distribution.
    std::vector<float> c3 = {1, 0, 0, 0};
    std::vector<std::span<const float>> one = {c3};
    const double single[] = {0};
    QVERIFY(localAggregate(one, single, {.topP = 1.0, .temperature = 0.5}).dist.prob(0) >
            localAggregate(one, single, {.topP = 1.0}).dist.prob(0) + 0.1);
    // Greedy aggregation picks argmax of ω_D p_D + ω_C p_C, not either side's argmax.
    Draft d{.side = Side::Device, .token = 0, .weight = 0};
    d.dist = {{0, 1, 2}, {std::log(0.5f), std::log(0.1f), std::log(0.4f)}};
    Draft c{.side = Side::Cloud, .token = 1, .weight = 0};
    c.dist = {{1, 2}, {std::log(0.55f), std::log(0.45f)}};
    Rng rng(3);
    AggregateResult r = aggregate(d, c, true, rng);
    QCOMPARE(r.token, 2u);  // 0.425 against 0.25 and 0.325
    QVERIFY(!r.accepted[0] && !r.accepted[1]);
    // Sampling mode draws from p: the frequencies follow the mixture.
    std::vector<int> counts(3, 0);
    for (int i = 0; i < 20000; ++i) {
      d.token = drawDraft(d.dist, false, rng);  // Algorithm 1's drafts are draws from p_s
      c.token = drawDraft(c.dist, false, rng);
      counts[aggregate(d, c, false, rng).token]++;
    }
    QVERIFY(std::abs(counts[0] / 20000.0 - 0.25) < 0.02);
    QVERIFY(std::abs(counts[2] / 20000.0 - 0.425) < 0.02);
    // Eq. 8 is Eq. 7's difference.
    Rng g(9);
    for (int i = 0; i < 1000; ++i) {
      const double dl = g.uniform01() * 10, dr = g.uniform01() * 10, al = g.uniform01(), ar = g.uniform01(),
                   rtt = g.uniform01() * 10;
      const double direct = expectedLatency(dl, dr, ar, rtt) - expectedLatency(dr, dl, al, rtt);
      QVERIFY2(std::abs(direct - latencyDifference(dl, dr, al, ar, rtt)) < 1e-9, "Eq. 8 disagrees with Eq. 7");
    }
  }

  void schedulerMovesTheAggregatorTowardsTheBottleneck() {
    Profiler p;
    p.setOfflineFit(Side::Device, {0, 10});  // the device decodes slowly
    p.setOfflineFit(Side::Cloud, {0, 1});
    p.observeRtt(2, 2);
    SideScheduler s(AggregatorPolicy::Greedy, 1);
    QCOMPARE(s.choose(Side::Cloud, p, 50), Side::Device);
    QCOMPARE(s.choose(Side::Device, p, 50), Side::Device);
    SideScheduler fixed(AggregatorPolicy::Cloud, 1);
    QCOMPARE(fixed.choose(Side::Device, p, 50), Side::Cloud);
    const DecodeFit f = fitDecodeTime(std::vector<std::pair<double, double>>{{10, 2}, {20, 3}, {30, 4}});
    QVERIFY(std::abs(f.slopeMs - 0.1) < 1e-9 && std::abs(f.interceptMs - 1) < 1e-9);
  }

  void scheduleSimulator() {
    const std::vector<uint8_t> all(30, 1), none(30, 0);
    SimParams p{.decodeMs = {1, 1}, .rttMs = 0, .maxAhead = 3};
    QCOMPARE(simulateSchedule(p, all, all, AggregatorPolicy::Device, 1), 30.0);  // back to back
    p.rttMs = 30;
    // Everything rejected is token-wise synchronisation, however far drafts may run ahead.
    const double rejectAll = simulateSchedule(p, none, none, AggregatorPolicy::Device, 1);
    SimParams sync = p;
    sync.maxAhead = 1;
    QCOMPARE(rejectAll, simulateSchedule(sync, none, none, AggregatorPolicy::Device, 1));
    QVERIFY(rejectAll >= 30 * 30.0);  // a round trip per token
    // Accepted drafts overlap the link: maxAhead tokens per round trip.
    const double acceptAll = simulateSchedule(p, all, all, AggregatorPolicy::Device, 1);
    QVERIFY(acceptAll < rejectAll / 2);
    // A slower link never makes it faster.
    SimParams slow = p;
    slow.rttMs = 60;
    QVERIFY(simulateSchedule(slow, all, none, AggregatorPolicy::Greedy, 1) >=
            simulateSchedule(p, all, none, AggregatorPolicy::Greedy, 1));
  }

  void rejectedDraftsReallyDropTheirKv() {
    auto runner = tinyRunner(4);
    DocDecoder dec(*runner, {.topP = 0.8, .greedy = true});
    std::vector<int32_t> doc(8, 7);
    QVERIFY(dec.start({{doc, 0.0}, {std::vector<int32_t>(8, 9), 0.0}}).isOk());
    for (int i = 0; i < 5; ++i) QVERIFY(dec.draft().isOk());
    QVERIFY(dec.draft().isOk());  // computes the 5th draft's row: prompt + 5 tokens held
    const int32_t usedBefore = runner->kvStats().used;
    QCOMPARE(dec.kvTokens(), int64_t{2 * (8 + 5)});
    QVERIFY(dec.reject(3).isOk());  // the first draft was wrong: all six go
    QCOMPARE(dec.pending(), 0u);
    QCOMPARE(dec.committed(), 1u);
    QVERIFY(dec.kvTokens() < 2 * (8 + 1));  // the runner recomputes the last kept token
    QVERIFY(runner->kvStats().used < usedBefore);  // blocks went back to the pool
    auto next = dec.draft();
    QVERIFY(next.isOk());
    QCOMPARE(next->pos, 1u);
  }

  void dragonGivesTheTokensOfSynchronousAggregation() {
    FakeSide dev(Side::Device, 1), cloud(Side::Cloud, 2);
    const Hello h = settings(Method::Dragon, 20, 16);
    const std::vector<uint32_t> ref = synchronousReference(dev, cloud, h);
    auto spec = runOnce(dev, cloud, h);
    QVERIFY2(spec.isOk(), spec.status().message().c_str());
    QCOMPARE(spec->tokens, ref);
    auto tw = runOnce(dev, cloud, settings(Method::DrdgTw, 20, 16));
    QVERIFY2(tw.isOk(), tw.status().message().c_str());
    QCOMPARE(tw->tokens, ref);
    QVERIFY(spec->note.empty());
    // The random model disagrees often: the run exercised rejections and rollbacks.
    QVERIFY(spec->rejected[0] + spec->rejected[1] > 0);
    // The run's timeline: one verdict per position in order, a rollback exactly where the
    // device's draft was rejected, and a device decode for every draft it sent.
    uint32_t nextPos = 0;
    int64_t rollbacks = 0, decoded = 0;
    for (size_t i = 0; i < spec->events.size(); ++i) {
      const RunEvent& e = spec->events[i];
      if (e.kind == RunEvent::Kind::Verdict) {
        QCOMPARE(e.pos, nextPos++);
        QCOMPARE(e.token, ref[e.pos]);
        const bool rolled = i + 1 < spec->events.size() && spec->events[i + 1].kind == RunEvent::Kind::Rollback;
        QCOMPARE(rolled, !e.accepted[0]);
      }
      rollbacks += e.kind == RunEvent::Kind::Rollback;
      decoded += e.kind == RunEvent::Kind::Decoded;
      QVERIFY(e.endMs >= e.startMs);
    }
    QCOMPARE(nextPos, static_cast<uint32_t>(ref.size()));
    QCOMPARE(rollbacks, spec->rejected[0]);
    QVERIFY(decoded >= static_cast<int64_t>(ref.size()));
    // Another aggregator policy changes the schedule, never the tokens.
    Hello hc = h;
    hc.policy = AggregatorPolicy::Cloud;
    auto onCloud = runOnce(dev, cloud, hc);
    QVERIFY2(onCloud.isOk(), onCloud.status().message().c_str());
    QCOMPARE(onCloud->tokens, ref);
    QCOMPARE(onCloud->aggregatedOn[0], int64_t{0});
    Hello hr = h;
    hr.policy = AggregatorPolicy::Random;
    auto random = runOnce(dev, cloud, hr);
    QVERIFY(random.isOk());
    QCOMPARE(random->tokens, ref);
  }

  void documentsNeverCrossTheLink() {
    FakeSide dev(Side::Device, 1), cloud(Side::Cloud, 2);
    auto rep = runOnce(dev, cloud, settings(Method::Dragon, 0, 12));
    QVERIFY(rep.isOk());
    const auto& sent = rep->link.sent;
    const auto& recv = rep->link.received;
    auto idx = [](MsgType t) { return static_cast<size_t>(t); };
    for (MsgType t : {MsgType::DocText, MsgType::SeqCandidate, MsgType::SeqScore, MsgType::Tokens}) {
      QCOMPARE(sent[idx(t)].frames, int64_t{0});
      QCOMPARE(recv[idx(t)].frames, int64_t{0});
    }
    // The hello carries the settings and the question, nothing else.
    QCOMPARE(sent[idx(MsgType::Hello)].frames, int64_t{1});
    ByteWriter hw;
    encode(settings(Method::Dragon, 0, 12), hw);
    QCOMPARE(sent[idx(MsgType::Hello)].bytes, static_cast<int64_t>(kHeaderBytes + hw.bytes().size()));
    // Drafts are a fixed header plus 8 bytes per kept token: no room for passages.
    const int64_t drafts = sent[idx(MsgType::Draft)].frames + recv[idx(MsgType::Draft)].frames;
    QVERIFY(drafts >= 2 * 12);
    QCOMPARE(recv[idx(MsgType::Verdict)].frames + sent[idx(MsgType::Verdict)].frames, int64_t{12});
    QCOMPARE(sent[idx(MsgType::Verdict)].bytes + recv[idx(MsgType::Verdict)].bytes, int64_t{12 * (kHeaderBytes + 10)});
    // The baseline that does ship passages shows up under its own type.
    auto text = runOnce(dev, cloud, settings(Method::DrcgText, 0, 4));
    QVERIFY(text.isOk());
    QCOMPARE(text->link.received[idx(MsgType::DocText)].frames, int64_t{1});
    QVERIFY(text->link.received[idx(MsgType::DocText)].bytes > 12 + 17 + 22);
    QCOMPARE(text->link.received[idx(MsgType::Draft)].frames, int64_t{0});
  }

  void prefixKvSurvivesTheWireBitForBit() {
    // The cloud's rows, chunked small, imported into another runner: the sequence that continues
    // after them has the keys (and logits) of one that prefilled everything itself.
    auto cloudRunner = tinyRunner(), devRunner = tinyRunner();
    std::vector<int32_t> prefix, rest;
    Rng rng(5);
    for (int i = 0; i < 37; ++i) prefix.push_back(static_cast<int32_t>(2 + rng.below(90)));
    for (int i = 0; i < 9; ++i) rest.push_back(static_cast<int32_t>(2 + rng.below(90)));
    const model::LlamaConfig c = model::testing::tinyConfig();
    const int64_t tokenBytes = c.numHiddenLayers * 2 * c.numKeyValueHeads * c.headDim * 4;
    auto chunks = computePrefixKv(*cloudRunner, prefix, static_cast<size_t>(10 * tokenBytes));
    QVERIFY2(chunks.isOk(), chunks.status().message().c_str());
    QCOMPARE(chunks->size(), size_t{4});  // 10 + 10 + 10 + 7 tokens
    QVERIFY(!cloudRunner->hasWork());
    QCOMPARE(cloudRunner->kvStats().used, 0);  // the cloud keeps nothing
    int64_t dataBytes = 0;
    for (const KvChunk& ch : *chunks) {
      QCOMPARE(static_cast<int64_t>(ch.data.size()), static_cast<int64_t>(ch.tokens.size()) * tokenBytes);
      dataBytes += static_cast<int64_t>(ch.data.size());
      ByteWriter w;  // each chunk survives its encoding
      encode(ch, w);
      QCOMPARE(w.bytes().size(), kKvChunkFixedBytes + 4 * ch.tokens.size() + ch.data.size());
      auto back = decodeKvChunk(w.bytes());
      QVERIFY2(back.isOk(), back.status().message().c_str());
      QCOMPARE(back->data, ch.data);
    }
    QCOMPARE(dataBytes, int64_t{37} * tokenBytes);
    auto kv = importPrefixKv(*devRunner, *chunks);
    QVERIFY2(kv.isOk(), kv.status().message().c_str());
    QCOMPARE(kv->numTokens, int64_t{37});
    model::SequenceRequest afterKv;
    afterKv.prompt = rest;
    afterKv.cached.push_back({*kv, -1});
    afterKv.sampling.maxTokens = 0;
    afterKv.keepKv = true;
    auto withKv = devRunner->add(std::move(afterKv));
    QVERIFY(withKv.isOk());
    devRunner->releaseKv(*kv);
    std::vector<int32_t> all = prefix;
    all.insert(all.end(), rest.begin(), rest.end());
    model::SequenceRequest whole;
    whole.prompt = all;
    whole.sampling.maxTokens = 0;
    whole.keepKv = true;
    auto plain = devRunner->add(std::move(whole));
    QVERIFY(plain.isOk());
    while (devRunner->hasWork()) devRunner->step();
    for (int32_t l = 0; l < c.numHiddenLayers; ++l) {
      auto a = devRunner->keys(*withKv, l, 46), b = devRunner->keys(*plain, l, 46);
      QVERIFY(a.isOk() && b.isOk());
      QVERIFY(*a == *b);
    }
    // Bad input: a gap, another model's shape, a data length that does not fit the shape.
    std::vector<KvChunk> gap = {(*chunks)[0], (*chunks)[2], (*chunks)[3]};
    QVERIFY(mentions(importPrefixKv(*devRunner, gap).status(), {"not consecutive"}));
    std::vector<KvChunk> other = *chunks;
    for (KvChunk& ch : other) ch.kvHeads = 4;
    QVERIFY(mentions(importPrefixKv(*devRunner, other).status(), {"same --model"}));
    KvChunk bad = (*chunks)[0];
    bad.data.pop_back();
    ByteWriter bw;
    encode(bad, bw);
    auto refused = decodeKvChunk(bw.bytes());
    QCOMPARE(refused.status().code(), StatusCode::Corrupt);
    QVERIFY(mentions(refused.status(), {"kv_chunk", "expected"}));
  }

  void drcgKvShipsKvAndAnswersLikeDrcgText() {
    FakeSide dev(Side::Device, 1), cloud(Side::Cloud, 2);
    auto idx = [](MsgType t) { return static_cast<size_t>(t); };
    const Hello h = settings(Method::DrcgKv, 20, 12);
    // The device's answer is that of a device that prefilled [cloud passages; its passages;
    // question] itself, whatever the scores.
    std::vector<std::string> texts;
    for (FakeSide* s : {&cloud, &dev}) {
      auto ps = s->res.retrieve(h.question, h.docsPerSide);  // kept: *temporary would dangle in the loop
      for (const RetrievedPassage& p : *ps) texts.push_back(p.text);
    }
    std::vector<uint32_t> ref;
    {
      DocDecoder d(*dev.runner, {.topP = h.topP, .greedy = true});
      QVERIFY(d.start({{dev.res.prompt(texts, h.question), 0.0}}).isOk());
      for (uint32_t i = 0; i < h.maxTokens; ++i) {
        auto x = d.draft();
        QVERIFY(x.isOk());
        d.accept();
        ref.push_back(x->token);
      }
    }
    auto kv = runOnce(dev, cloud, h);
    QVERIFY2(kv.isOk(), kv.status().message().c_str());
    QCOMPARE(kv->tokens, ref);
    QCOMPARE(kv->documents[0], 3u);
    QCOMPARE(kv->documents[1], 3u);  // the cloud's passages, as its KV says
    // The cloud's three passages (12 + 17 + 22 tokens) crossed as K/V rows, sized as the pool
    // holds them: layers × 2 × tokens × kv_heads × head_dim × 4 bytes, plus the token ids.
    const model::LlamaConfig c = model::testing::tinyConfig();
    const int64_t tokens = 12 + 17 + 22;
    QCOMPARE(kv->kvTokensReceived, tokens);
    const TypeCounts got = kv->link.received[idx(MsgType::KvChunk)];
    QCOMPARE(got.frames, int64_t{1});
    QCOMPARE(got.bytes, static_cast<int64_t>(kHeaderBytes + kKvChunkFixedBytes) + 4 * tokens +
                            c.numHiddenLayers * 2 * tokens * c.numKeyValueHeads * c.headDim * 4);
    QCOMPARE(kv->link.received[idx(MsgType::DocText)].frames, int64_t{0});
    QCOMPARE(kv->link.received[idx(MsgType::Draft)].frames, int64_t{0});
    // drcg_text ranks both sides' passages by score; here they interleave, so its prompt (and
    // answer) may differ. With every cloud passage ranked first the prompts are the same and
    // so are the tokens: only what crossed the link differs.
    for (auto& d : cloud.docs) d.second += 10;
    auto text = runOnce(dev, cloud, settings(Method::DrcgText, 20, 12));
    auto kv2 = runOnce(dev, cloud, h);
    QVERIFY2(text.isOk(), text.status().message().c_str());
    QVERIFY2(kv2.isOk(), kv2.status().message().c_str());
    QCOMPARE(kv2->tokens, text->tokens);
    QCOMPARE(kv2->tokens, ref);
    QCOMPARE(text->link.received[idx(MsgType::KvChunk)].frames, int64_t{0});
    QVERIFY(got.bytes > 20 * text->link.received[idx(MsgType::DocText)].bytes);
    // No KV left behind on either side once the run is over.
    QCOMPARE(dev.runner->kvStats().used, 0);
    QCOMPARE(cloud.runner->kvStats().used, 0);
  }

  void baselinesRun() {
    FakeSide dev(Side::Device, 1), cloud(Side::Cloud, 2);
    for (Method m : {Method::DrdgSw, Method::CloudOnly, Method::DeviceOnly}) {
      auto rep = m == Method::DeviceOnly ? runDevice(nullptr, dev.res, settings(m, 0, 8))
                                         : runOnce(dev, cloud, settings(m, 0, 8));
      QVERIFY2(rep.isOk(), rep.status().message().c_str());
      QCOMPARE(rep->tokens.size(), size_t{8});
    }
  }

  void answerScoresMixBothSides() {
    FakeSide dev(Side::Device, 1), cloud(Side::Cloud, 2);
    Hello h = settings(Method::Score);
    h.answer = "an answer";
    h.scored = Method::Dragon;
    auto rep = runOnce(dev, cloud, h);
    QVERIFY2(rep.isOk(), rep.status().message().c_str());
    QCOMPARE(rep->answerLogp.size(), h.answer.size());
    // The same scores computed here, side by side without a link.
    std::vector<uint32_t> answer;
    for (int32_t t : dev.res.answerTokens(h.answer)) answer.push_back(static_cast<uint32_t>(t));
    auto scoreOn = [&](FakeSide& s, double& w) {
      DocDecoder d(*s.runner, {.topP = 1.0});
      std::vector<DocInput> in;
      auto ps = s.res.retrieve(h.question, h.docsPerSide);  // kept: *temporary would dangle in the loop
      for (const RetrievedPassage& p : *ps) in.push_back({s.res.prompt({p.text}, h.question), p.score});
      if (!d.start(in)) qFatal("start");
      w = d.weight();
      auto sc = d.score(answer);
      if (!sc) qFatal("score: %s", sc.status().message().c_str());
      return *sc;
    };
    double wd = 0, wc = 0;
    const std::vector<float> ld = scoreOn(dev, wd), lc = scoreOn(cloud, wc);
    const auto [od, oc] = sideWeights(wd, wc);
    for (size_t j = 0; j < answer.size(); ++j) {
      const double expect = std::log(od * std::exp(double(ld[j])) + oc * std::exp(double(lc[j])));
      QVERIFY(std::abs(rep->answerLogp[j] - expect) < 1e-4);
      QVERIFY(rep->answerLogp[j] < 0);
    }
    // Device-only scoring needs no cloud at all.
    h.scored = Method::DeviceOnly;
    auto alone = runDevice(nullptr, dev.res, h);
    QVERIFY2(alone.isOk(), alone.status().message().c_str());
    QCOMPARE(alone->answerLogp.size(), answer.size());
  }

  void staleDraftsAfterARollbackAreIgnored() {
    FakeSide dev(Side::Device, 1);
    Listener l = listenLoopback();
    Status cloudSaw;
    // A scripted cloud whose distribution dominates (W = 50): its draft 7 is rejected for the
    // 8 its own distribution prefers, and its draft for position 1, decoded before it learnt
    // that, is stale; after the verdict it drafts position 1 again with version 1.
    std::thread fake([&] {
      auto link = l.accept(5000, {});
      if (!link) return;
      Transport& t = **link;
      auto send = [&](const Draft& d) {
        ByteWriter w;
        encode(d, w);
        (void)t.send(MsgType::Draft, w.bytes());
      };
      (void)t.receive(5000);  // hello
      ByteWriter ack;
      encode(HelloAck{.accepted = true, .modelFingerprint = 42}, ack);
      (void)t.send(MsgType::HelloAck, ack.bytes());
      Draft d0{.side = Side::Cloud, .pos = 0, .version = 0, .token = 7, .weight = 50};
      d0.dist = {{7, 8}, {std::log(0.4f), std::log(0.6f)}};
      send(d0);
      Draft stale{.side = Side::Cloud, .pos = 1, .version = 0, .token = 9, .weight = 50};
      stale.dist = {{9}, {0.0f}};
      send(stale);
      for (;;) {  // until the verdict on position 0
        auto f = t.receive(5000);
        if (!f || !*f) return;
        if ((*f)->header.type != MsgType::Verdict) continue;
        auto v = decodeVerdict((*f)->payload);
        if (!v || v->token != 8 || v->accepted[1]) cloudSaw = Status::internal("unexpected verdict");
        break;
      }
      Draft d1{.side = Side::Cloud, .pos = 1, .version = 1, .token = 11, .weight = 50};
      d1.dist = {{11}, {0.0f}};
      send(d1);
      for (;;) {  // the device's end of run
        auto f = t.receive(5000);
        if (!f || !*f) break;
        if ((*f)->header.type == MsgType::Bye) {
          ByteWriter bw;
          encode(Bye{"end"}, bw);
          (void)t.send(MsgType::Bye, bw.bytes());
          break;
        }
      }
      t.close(500);
    });
    auto link = Transport::connect(l.address(), {}, 2000);
    QVERIFY(link.isOk());
    Hello h = settings(Method::Dragon, 0, 2);
    h.policy = AggregatorPolicy::Device;
    auto rep = runDevice(link->get(), dev.res, h, {.peerTimeoutMs = 3000});
    fake.join();
    QVERIFY2(rep.isOk(), rep.status().message().c_str());
    QVERIFY2(cloudSaw.isOk(), cloudSaw.message().c_str());
    QCOMPARE(rep->tokens, (std::vector<uint32_t>{8, 11}));  // the stale 9 never became a token
    QCOMPARE(rep->rejected[1], int64_t{1});
    QVERIFY(rep->staleDrafts >= 1);
    QVERIFY(rep->note.empty());
  }

  void aModelMismatchIsRefused() {
    FakeSide dev(Side::Device, 1, 42), cloud(Side::Cloud, 2, 43);
    auto rep = runOnce(dev, cloud, settings(Method::Dragon));
    QVERIFY(!rep.isOk());
    QVERIFY(mentions(rep.status(), {"refused", "fingerprint", "same --model"}));
  }

  void aLostCloudLeavesTheDeviceToFinishAlone() {
    FakeSide dev(Side::Device, 1);
    Listener l = listenLoopback();
    // A cloud that agrees, sends one draft and dies.
    std::thread fake([&] {
      auto link = l.accept(5000, {});
      if (!link) return;
      auto f = (*link)->receive(5000);
      ByteWriter ack;
      encode(HelloAck{.accepted = true, .modelFingerprint = 42}, ack);
      (void)(*link)->send(MsgType::HelloAck, ack.bytes());
      Draft d{.side = Side::Cloud, .pos = 0, .token = 3, .weight = 0};
      d.dist = {{3}, {0.0f}};
      ByteWriter dw;
      encode(d, dw);
      (void)(*link)->send(MsgType::Draft, dw.bytes());
      (*link)->close(500);
    });
    auto link = Transport::connect(l.address(), {}, 2000);
    QVERIFY(link.isOk());
    auto rep = runDevice(link->get(), dev.res, settings(Method::Dragon, 0, 10), {.peerTimeoutMs = 3000});
    fake.join();
    QVERIFY2(rep.isOk(), rep.status().message().c_str());
    QCOMPARE(rep->tokens.size(), size_t{10});
    QVERIFY(mentions(Status::unavailable(rep->note), {"cloud peer was lost", "finished the answer on its own"}));
  }
};

QTEST_GUILESS_MAIN(TestDragon)
#include "test_dragon.moc"
