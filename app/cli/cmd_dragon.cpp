// `ragraph dragon cloud|device`: DRAGON's two processes (device and cloud, each with its own
// model runner and its own documents; see dragon_side.h for the corpus split). Passages never
// cross the link except in the drcg_text and drcg_kv baselines, whose point is to send them.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "core/json_writer.h"
#include "dragon_side.h"

namespace rag::cli {

namespace {

using namespace rag::dragon;

void writeReport(JsonWriter& w, const RunReport& r, const std::string& text, bool withEvents) {
  w.beginObject();
  w.key("method").value(methodName(r.method));
  w.key("answer").value(text);
  w.key("tokens").value(static_cast<int64_t>(r.tokens.size()));
  w.key("total_ms").value(r.totalMs);
  w.key("ttft_ms").value(r.ttftMs);
  w.key("latency_ms_per_token").value(r.perTokenMs());
  w.key("documents").beginObject().key("device").value(static_cast<int64_t>(r.documents[0]));
  w.key("cloud").value(static_cast<int64_t>(r.documents[1])).endObject();
  w.key("accepted").beginObject().key("device").value(r.accepted[0]).key("cloud").value(r.accepted[1]).endObject();
  w.key("rejected").beginObject().key("device").value(r.rejected[0]).key("cloud").value(r.rejected[1]).endObject();
  w.key("aggregated_on").beginObject().key("device").value(r.aggregatedOn[0]).key("cloud").value(r.aggregatedOn[1]).endObject();
  w.key("handovers").value(r.handovers);
  w.key("stale_drafts").value(r.staleDrafts);
  w.key("rollbacks").value(r.rollbacks);
  w.key("rtt_ms").beginObject().key("instant").value(r.rtt.instantMs).key("historical").value(r.rtt.historicalMs);
  w.key("samples").value(r.rtt.samples).endObject();
  w.key("bytes_sent_by_type").beginObject();
  for (int i = 1; i < kMsgTypeCount; ++i)
    if (r.link.sent[i].frames > 0) w.key(msgTypeName(static_cast<MsgType>(i))).value(r.link.sent[i].bytes);
  w.endObject();
  w.key("bytes_received_by_type").beginObject();
  for (int i = 1; i < kMsgTypeCount; ++i)
    if (r.link.received[i].frames > 0) w.key(msgTypeName(static_cast<MsgType>(i))).value(r.link.received[i].bytes);
  w.endObject();
  if (!r.answerLogp.empty()) {
    double sum = 0;
    for (float v : r.answerLogp) sum += v;
    w.key("answer_tokens").value(static_cast<int64_t>(r.answerLogp.size()));
    w.key("answer_perplexity").value(std::exp(-sum / static_cast<double>(r.answerLogp.size())));
  }
  if (r.kvTokensReceived > 0) w.key("kv_tokens_received").value(r.kvTokensReceived);
  if (!r.note.empty()) w.key("note").value(r.note);
  if (withEvents) {
    w.key("events").beginArray();
    for (const RunEvent& e : r.events) {
      w.beginObject();
      w.key("kind").value(runEventName(e.kind));
      w.key("side").value(sideName(e.side));
      w.key("pos").value(static_cast<int64_t>(e.pos));
      w.key("token").value(static_cast<int64_t>(e.token));
      w.key("start_ms").value(e.startMs);
      w.key("end_ms").value(e.endMs);
      if (e.kind == RunEvent::Kind::Arrived || e.kind == RunEvent::Kind::Stale) w.key("decode_ms").value(e.decodeMs);
      if (e.receivedMs >= 0) w.key("received_ms").value(e.receivedMs);
      if (e.sentMs >= 0) w.key("peer_sent_ms").value(e.sentMs);  // the peer's clock: comparable on one machine
      if (e.kind == RunEvent::Kind::Verdict) {
        w.key("accepted").beginObject().key("device").value(e.accepted[0]).key("cloud").value(e.accepted[1]).endObject();
        w.key("next_aggregator").value(sideName(e.next));
      }
      w.endObject();
    }
    w.endArray();
  }
  w.endObject();
}


}  // namespace

int cmdDragonCloud(Args& args) {
  const std::string listenAt = args.getOr("listen", "127.0.0.1:7410");
  const bool once = args.flag("once");
  auto timeout = args.getInt("timeout-ms", 30000);
  auto opts = readSideOptions(args);
  if (!opts) return fail(opts.status());
  if (!timeout) return fail(timeout.status());
  if (Status s = args.finish(); !s) return fail(s);
  restartWithPassiveOpenMp();
  auto listener = Listener::listen(listenAt);
  if (!listener) return fail(listener.status());
  auto side = loadSide(Side::Cloud, *opts);
  if (!side) return fail(side.status());
  std::fprintf(stderr, "dragon cloud: %s, WordNet passages, listening on %s\n", (*side)->model.description.c_str(),
               listener->address().c_str());
  std::printf("listening on %s\n", listener->address().c_str());
  std::fflush(stdout);
  SessionOptions so{.peerTimeoutMs = static_cast<int>(*timeout)};
  for (;;) {
    auto link = listener->accept(3600 * 1000, {});
    if (!link) {
      if (link.status().code() == StatusCode::Cancelled) continue;
      return fail(link.status());
    }
    std::fprintf(stderr, "dragon cloud: device %s connected\n", (*link)->peer().c_str());
    Status s = serveCloud(**link, (*side)->demo->res, so, [&](const Hello& h, const RunReport& r) {
      std::fprintf(stderr, "dragon cloud: %s run, %u passages, %.1f ms, drafts accepted %lld rejected %lld\n",
                   std::string(methodName(h.method)).c_str(), r.documents[1], r.totalMs,
                   static_cast<long long>(r.accepted[1]), static_cast<long long>(r.rejected[1]));
    });
    if (!s) std::fprintf(stderr, "ragraph: error: %s\n", s.message().c_str());
    else std::fprintf(stderr, "dragon cloud: device %s left\n", (*link)->peer().c_str());
    (*link)->close(100);
    if (once) return s ? 0 : 1;
  }
}

int cmdDragonDevice(Args& args) {
  const std::string connectTo = args.getOr("connect", "127.0.0.1:7410");
  const bool json = args.flag("json");
  const bool events = args.flag("events");
  auto timeout = args.getInt("timeout-ms", 30000);
  auto settings = readRunSettings(args);
  auto opts = readSideOptions(args);
  if (!settings) return fail(settings.status());
  if (!opts) return fail(opts.status());
  if (!timeout) return fail(timeout.status());
  if (args.positionals().size() != 1)
    return fail(Status::invalidArgument("give the question as one quoted argument: ragraph dragon device --connect "
                                        "HOST:PORT \"What is a compiler?\""));
  if (Status s = args.finish(); !s) return fail(s);
  settings->question = args.positionals()[0];
  restartWithPassiveOpenMp();
  std::unique_ptr<Transport> link;
  if (settings->method != Method::DeviceOnly &&
      !(settings->method == Method::Score && settings->scored == Method::DeviceOnly)) {
    auto t = Transport::connect(connectTo, {}, static_cast<int>(std::min<int64_t>(*timeout, 10000)));
    if (!t) return fail(t.status());
    link = std::move(*t);
  }
  auto side = loadSide(Side::Device, *opts);
  if (!side) return fail(side.status());
  SessionOptions so{.peerTimeoutMs = static_cast<int>(*timeout)};
  auto rep = runDevice(link.get(), (*side)->demo->res, *settings, so);
  if (!rep) return fail(rep.status());
  std::vector<double> rtts;
  if (link && !link->broken()) {
    if (auto p = pingRtt(*link, 5, so.peerTimeoutMs + static_cast<int>(settings->latencyMs) * 2)) rtts = *p;
  }
  const std::string text = textOf(**side, rep->tokens);
  if (link) link->close(500);
  if (json) {
    std::ostringstream os;
    JsonWriter w(os, true);
    writeReport(w, *rep, text, events);
    os << "\n";
    std::cout << os.str();
  } else if (rep->method == Method::Score) {
    double sum = 0;
    for (float v : rep->answerLogp) sum += v;
    std::printf("perplexity of \"%s\" under %s: %.3f (%zu tokens)\n", settings->answer.c_str(),
                std::string(methodName(settings->scored)).c_str(),
                rep->answerLogp.empty() ? 0.0 : std::exp(-sum / static_cast<double>(rep->answerLogp.size())),
                rep->answerLogp.size());
  } else {
    std::printf("%s\n", text.c_str());
    std::fprintf(stderr,
                 "%s: %zu tokens in %.1f ms (%.2f ms/token, first token %.1f ms); passages: device %u, cloud %u; "
                 "drafts accepted device %lld cloud %lld, rejected device %lld cloud %lld; stale drafts %lld; "
                 "aggregator handovers %lld\n",
                 std::string(methodName(rep->method)).c_str(), rep->tokens.size(), rep->totalMs, rep->perTokenMs(),
                 rep->ttftMs, rep->documents[0], rep->documents[1], static_cast<long long>(rep->accepted[0]),
                 static_cast<long long>(rep->accepted[1]), static_cast<long long>(rep->rejected[0]),
                 static_cast<long long>(rep->rejected[1]), static_cast<long long>(rep->staleDrafts),
                 static_cast<long long>(rep->handovers));
    if (!rtts.empty()) {
      std::sort(rtts.begin(), rtts.end());
      std::fprintf(stderr, "link: added latency %.0f ms, measured ping rtt median %.1f ms (min %.1f, max %.1f)\n",
                   settings->latencyMs, rtts[rtts.size() / 2], rtts.front(), rtts.back());
    }
    if (!rep->note.empty()) std::fprintf(stderr, "note: %s\n", rep->note.c_str());
  }
  return 0;
}

}  // namespace rag::cli
