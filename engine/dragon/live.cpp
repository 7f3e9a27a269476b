// rag/dragon.h: both DRAGON sides in this process, on worker threads, over loopback TCP.
#include "rag/dragon.h"

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "core/clock.h"
#include "dragon/demo_side.h"
#include "dragon/session.h"
#include "dragon/transport.h"

namespace rag {

using namespace rag::dragon;

static_assert(static_cast<int>(DragonEvent::Kind::Rollback) == static_cast<int>(RunEvent::Kind::Rollback) &&
                  static_cast<int>(DragonEvent::Kind::Verdict) == static_cast<int>(RunEvent::Kind::Verdict) &&
                  static_cast<int>(DragonEvent::Kind::Arrived) == static_cast<int>(RunEvent::Kind::Arrived),
              "DragonEvent::Kind mirrors RunEvent::Kind");

std::string_view dragonEventKindName(DragonEvent::Kind k) {
  switch (k) {
    case DragonEvent::Kind::Decoded: return "decoded";
    case DragonEvent::Kind::Arrived: return "arrived";
    case DragonEvent::Kind::Stale: return "stale";
    case DragonEvent::Kind::Verdict: return "verdict";
    case DragonEvent::Kind::Rollback: return "rollback";
  }
  return "unknown";
}

struct DragonLive::Impl {
  std::shared_ptr<const model::Tokenizer> tokenizer;
  std::unique_ptr<DemoSide> device, cloud;
  std::optional<Listener> listener;
  std::string address;
  std::unique_ptr<Transport> deviceLink;
  std::thread cloudThread, deviceThread;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool busy = false;
  Status cloudStatus;  // why the cloud stopped (ok while it serves)
  bool cloudGone = false;
  std::optional<std::pair<Hello, DoneSink>> job;

  std::mutex sinkMu;  // one event at a time, from either worker
  EventSink sink;
  uint64_t runStartNs = 0;

  // A side's RunEvent as the workbench sees it: on the live run's clock, with the token's text.
  void emit(Side observer, const RunEvent& e, uint64_t sideStartNs) {
    DragonEvent d;
    d.kind = static_cast<DragonEvent::Kind>(e.kind);
    d.observer = static_cast<DragonSide>(observer);
    d.side = static_cast<DragonSide>(e.side);
    d.pos = e.pos;
    d.token = e.token;
    const std::vector<int32_t> one = {static_cast<int32_t>(e.token)};
    if (Result<std::string> t = tokenizer->decode(one, {.skipSpecial = false})) d.text = *t;
    std::lock_guard lock(sinkMu);
    if (!sink) return;
    const double shift = (static_cast<double>(sideStartNs) - static_cast<double>(runStartNs)) * 1e-6;
    d.startMs = e.startMs + shift;
    d.endMs = e.endMs + shift;
    d.sentMs = e.sentMs < 0 ? -1 : e.sentMs + shift;
    d.receivedMs = e.receivedMs < 0 ? -1 : e.receivedMs + shift;
    d.decodeMs = e.decodeMs;
    d.accepted[0] = e.accepted[0];
    d.accepted[1] = e.accepted[1];
    d.next = static_cast<DragonSide>(e.next);
    sink(d);
  }

  void cloudLoop() {
    Status st;
    Result<std::unique_ptr<Transport>> link = listener->accept(30000, {});
    if (!link) {
      st = link.status();
    } else {
      SessionOptions o{.peerTimeoutMs = 30000};
      o.onEvent = [this](const RunEvent& e, uint64_t start) { emit(Side::Cloud, e, start); };
      st = serveCloud(**link, cloud->res, o);
      (*link)->close(200);
    }
    std::lock_guard lock(mu);
    cloudStatus = st;
    cloudGone = true;
    cv.notify_all();
  }

  void deviceLoop() {
    for (;;) {
      std::pair<Hello, DoneSink> j;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stopping || job.has_value(); });
        if (!job) return;
        j = std::move(*job);
        job.reset();
      }
      SessionOptions o{.peerTimeoutMs = 30000};
      o.onEvent = [this](const RunEvent& e, uint64_t start) { emit(Side::Device, e, start); };
      Result<RunReport> rep = runDevice(deviceLink.get(), device->res, j.first, o);
      DragonSummary s;
      if (rep) {
        s.answer = answerText(*tokenizer, rep->tokens);
        s.tokenIds = rep->tokens;
        s.tokens = static_cast<uint32_t>(rep->tokens.size());
        s.totalMs = rep->totalMs;
        s.ttftMs = rep->ttftMs;
        s.perTokenMs = rep->perTokenMs();
        for (int i = 0; i < 2; ++i) {
          s.accepted[i] = rep->accepted[i];
          s.rejected[i] = rep->rejected[i];
        }
        s.handovers = rep->handovers;
        s.staleDrafts = rep->staleDrafts;
        s.bytesSent = rep->link.bytesSent();
        s.bytesReceived = rep->link.bytesReceived();
        s.rttMs = rep->rtt.historicalMs;
        s.note = rep->note;
      }
      if (j.second) j.second(rep ? Result<DragonSummary>(std::move(s)) : Result<DragonSummary>(rep.status()));
      std::lock_guard lock(mu);
      busy = false;
      cv.notify_all();
    }
  }
};

DragonLive::DragonLive(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

DragonLive::~DragonLive() {
  Impl& m = *m_impl;
  {
    std::unique_lock lock(m.mu);
    m.stopping = true;
    m.cv.notify_all();
  }
  if (m.deviceThread.joinable()) m.deviceThread.join();  // after the run in flight, if any
  if (m.deviceLink) m.deviceLink->close(200);            // the cloud's session ends with it
  if (m.cloudThread.joinable()) m.cloudThread.join();
}

Result<std::unique_ptr<DragonLive>> DragonLive::create(const DragonLiveParams& p) {
  std::error_code ec;
  if (!std::filesystem::exists(p.modelDir / "config.json", ec))
    return Status::notFound("no model in " + p.modelDir.string() + " (config.json is missing)");
  if (!std::filesystem::exists(p.modelDir / "tokenizer.json", ec))
    return Status::notFound("the model in " + p.modelDir.string() + " has no tokenizer.json next to it");
  if (!std::filesystem::exists(p.corpusPath, ec))
    return Status::notFound("no corpus at " + p.corpusPath.string() + "; build one with `ragraph corpus build`");
  auto impl = std::make_unique<Impl>();
  RAG_ASSIGN_OR_RETURN(std::shared_ptr<const model::LlamaModel> weights, model::loadModel(p.modelDir, "f32"));
  RAG_ASSIGN_OR_RETURN(model::Tokenizer tok, model::Tokenizer::load(p.modelDir));
  impl->tokenizer = std::make_shared<const model::Tokenizer>(std::move(tok));
  DemoSideParams sp{.modelDir = p.modelDir,
                    .corpusPath = p.corpusPath.string(),
                    .deterministic = p.deterministic,
                    .kernels = true,
                    .kvBudgetBytes = p.kvBudgetBytes};
  RAG_ASSIGN_OR_RETURN(impl->cloud, loadDemoSide(Side::Cloud, weights, impl->tokenizer, sp));
  sp.kernels = p.deviceKernels;
  RAG_ASSIGN_OR_RETURN(impl->device, loadDemoSide(Side::Device, weights, impl->tokenizer, sp));
  RAG_ASSIGN_OR_RETURN(Listener l, Listener::listen("127.0.0.1:0"));
  impl->address = l.address();
  impl->listener.emplace(std::move(l));
  Impl* raw = impl.get();
  impl->cloudThread = std::thread([raw] { raw->cloudLoop(); });
  Result<std::unique_ptr<Transport>> link = Transport::connect(raw->address, {}, 5000);
  std::unique_ptr<DragonLive> live(new DragonLive(std::move(impl)));  // from here the destructor joins
  if (!link) return link.status().withContext("connecting the device to the in-process cloud");
  raw->deviceLink = std::move(*link);
  raw->deviceThread = std::thread([raw] { raw->deviceLoop(); });
  return live;
}

Status DragonLive::run(const DragonRunSettings& s, EventSink onEvent, DoneSink onDone) {
  Hello h;
  if (s.question.find_first_not_of(" \t\n") == std::string::npos) return Status::invalidArgument("the question is empty");
  RAG_ASSIGN_OR_RETURN(h.method, parseMethod(s.method));
  if (h.method != Method::Dragon && h.method != Method::DrdgTw)
    return Status::invalidArgument("method '" + s.method + "': a live run shows dragon or drdg_tw");
  RAG_ASSIGN_OR_RETURN(h.policy, parsePolicy(s.policy));
  if (s.maxTokens < 1 || s.maxTokens > 256) return Status::invalidArgument("maxTokens must be in [1, 256]");
  if (s.docsPerSide > 8) return Status::invalidArgument("docsPerSide must be in [0, 8]");
  if (s.maxAhead < 1 || s.maxAhead > 16) return Status::invalidArgument("maxAhead must be in [1, 16]");
  if (!(s.link.latencyMs >= 0 && s.link.latencyMs <= 5000))
    return Status::invalidArgument("the link's latency must be in [0, 5000] ms");
  if (!(s.link.jitterMs <= 5000)) return Status::invalidArgument("the link's jitter must be at most 5000 ms (< 0: latency / 5)");
  if (!(s.link.bandwidthMbps >= 0)) return Status::invalidArgument("the link's bandwidth must be >= 0 Mbit/s (0: unlimited)");
  h.question = s.question;
  h.maxTokens = s.maxTokens;
  h.docsPerSide = s.docsPerSide;
  h.maxAhead = s.maxAhead;
  h.ignoreEos = s.ignoreEos;
  h.seed = s.seed;
  h.latencyMs = s.link.latencyMs;
  h.jitterMs = s.link.jitterMs;
  h.bandwidthMbps = s.link.bandwidthMbps;
  Impl& m = *m_impl;
  std::lock_guard lock(m.mu);
  if (m.cloudGone)
    return Status::unavailable("the in-process cloud has stopped" +
                               (m.cloudStatus.isOk() ? std::string() : ": " + m.cloudStatus.message()));
  if (m.busy || m.job) return Status::busy("a DRAGON run is in flight; wait for it to finish");
  {
    std::lock_guard sinkLock(m.sinkMu);
    m.sink = std::move(onEvent);
    m.runStartNs = nowNs();
  }
  m.busy = true;
  m.job.emplace(std::move(h), std::move(onDone));
  m.cv.notify_all();
  return Status::ok();
}

bool DragonLive::running() const {
  std::lock_guard lock(m_impl->mu);
  return m_impl->busy;
}

std::string DragonLive::cloudAddress() const { return m_impl->address; }

}  // namespace rag
