// The speculative aggregation loop (DRAGON §4, Algorithm 1) for one side; see session.h.
#include <algorithm>
#include <deque>

#include "dragon/aggregation.h"
#include "dragon/session_internal.h"
#include "dragon/side_scheduler.h"

namespace rag::dragon {

namespace {

// Each side keeps both draft queues (its own drafts and copies of the peer's) for positions from
// `pos` on, and each side's version (its rollback count). Verdicts arrive in order and after the
// drafts they judge: TCP and the delay line keep order, and a side sends each draft before any
// verdict that uses it. So both sides apply the same verdicts to the same queues, a draft whose
// version is behind its side's is stale, and only the side holding the aggregator decides.
struct SpecState {
  std::deque<Draft> queue[2];
  uint32_t version[2] = {0, 0};
  uint32_t pos = 0;  // next target position
  Side aggregator = Side::Device;
  bool done = false;
  bool peerLost = false;
};

class SpeculativeRun {
public:
  SpeculativeRun(Transport* t, DocDecoder& dec, SideResources& side, const Hello& h, uint32_t maxAhead,
                 AggregatorPolicy policy, RunReport& rep, const SessionOptions& o, Stopwatch& clock)
      : m_t(t), m_dec(dec), m_side(side), m_h(h), m_maxAhead(maxAhead), m_sched(policy, h.seed ^ 0x5C4Eull),
        m_rng(h.seed ^ 0xA66Eull), m_rep(rep), m_o(o), m_clock(clock), m_me(side.side) {
    m_s.aggregator = policy == AggregatorPolicy::Cloud ? Side::Cloud : Side::Device;
    m_prof.setOfflineFit(m_me, side.offlineFit);
  }

  Status run() {
    uint64_t lastPeerNs = nowNs();
    while (!m_s.done) {
      if (m_s.peerLost) {
        if (m_me == Side::Device) RAG_RETURN_IF_ERROR(finishAlone());
        break;
      }
      // 1. Everything that has arrived.
      bool progressed = false;
      for (;;) {
        Result<std::optional<Frame>> f = m_t->receive(0);
        if (!f) {
          lose(f.status().message());
          break;
        }
        if (!*f) break;
        lastPeerNs = nowNs();
        RAG_RETURN_IF_ERROR(handle(**f));
        progressed = true;
        if (m_s.done || m_s.peerLost) break;
      }
      if (m_s.done || m_s.peerLost) continue;
      // 2. Aggregate when this side holds the aggregator and both drafts of the position.
      if (m_s.aggregator == m_me && front(Side::Device) && front(Side::Cloud)) {
        RAG_RETURN_IF_ERROR(aggregateOne());
        continue;
      }
      // 3. Draft ahead.
      if (m_dec.pending() < m_maxAhead && m_s.pos + m_dec.pending() < m_h.maxTokens) {
        RAG_RETURN_IF_ERROR(draftOne());
        continue;
      }
      // 4. Nothing to do: wait for the peer.
      if (!progressed) {
        Result<std::optional<Frame>> f = m_t->receive(20);
        if (!f) {
          lose(f.status().message());
          continue;
        }
        if (*f) {
          lastPeerNs = nowNs();
          RAG_RETURN_IF_ERROR(handle(**f));
        } else if (static_cast<double>(nowNs() - lastPeerNs) * 1e-6 > waitBudgetMs(*m_t, m_o)) {
          lose("no message for " + std::to_string(waitBudgetMs(*m_t, m_o)) + " ms");
        }
      }
    }
    m_rep.rollbacks = m_dec.rollbacks();
    return Status::ok();
  }

private:
  void record(const RunEvent& e) {
    m_rep.events.push_back(e);
    if (m_o.onEvent) m_o.onEvent(e, nowNs() - m_clock.elapsedNs());
  }
  // A peer frame's send and receipt times on this run's clock (RunEvent::sentMs).
  void stampFrame(RunEvent& e, const Frame& f) const {
    const uint64_t start = nowNs() - m_clock.elapsedNs();
    auto ms = [start](uint64_t ns) { return (static_cast<double>(ns) - static_cast<double>(start)) * 1e-6; };
    e.sentMs = ms(f.header.sentNs);
    e.receivedMs = ms(f.receivedNs);
  }

  const Draft* front(Side s) const {
    const auto& q = m_s.queue[static_cast<size_t>(s)];
    return !q.empty() && q.front().pos == m_s.pos ? &q.front() : nullptr;
  }

  void lose(const std::string& why) {
    if (m_s.peerLost) return;
    m_s.peerLost = true;
    m_rep.note = "the " + std::string(sideName(other(m_me))) + " peer was lost at token " + std::to_string(m_s.pos) +
                 " (" + why + ")" +
                 (m_me == Side::Device ? "; the device finished the answer on its own documents" : "");
  }

  Status handle(const Frame& f) {
    switch (f.header.type) {
      case MsgType::Draft: {
        RAG_ASSIGN_OR_RETURN(Draft d, decodeDraft(f.payload));
        if (d.side != other(m_me)) return Status::corrupt("malformed draft: it claims to come from this side");
        const auto s = static_cast<size_t>(d.side);
        m_prof.observeDecode(d.side, d.decodeMs, d.contextLen);
        m_rep.decodeMs[s].push_back(d.decodeMs);
        const bool stale = d.version != m_s.version[s] || d.pos != m_s.pos + m_s.queue[s].size();
        RunEvent e{.kind = stale ? RunEvent::Kind::Stale : RunEvent::Kind::Arrived, .side = d.side, .pos = d.pos,
                   .token = d.token};
        e.startMs = e.endMs = m_clock.elapsedMs();
        e.decodeMs = d.decodeMs;
        stampFrame(e, f);
        record(e);
        if (stale) {
          ++m_rep.staleDrafts;  // drafted before its side learnt of a rollback
          return Status::ok();
        }
        m_s.queue[s].push_back(std::move(d));
        return Status::ok();
      }
      case MsgType::Verdict: {
        RAG_ASSIGN_OR_RETURN(Verdict v, decodeVerdict(f.payload));
        if (v.pos != m_s.pos)
          return Status::corrupt("malformed verdict: position " + std::to_string(v.pos) + ", expected " +
                                 std::to_string(m_s.pos));
        ++m_rep.aggregatedOn[static_cast<size_t>(other(m_me))];
        const RttEstimate rtt = m_t->rtt();  // current when the aggregator comes here
        m_prof.observeRtt(rtt.instantMs, rtt.historicalMs);
        return apply(v, &f);
      }
      case MsgType::Ready: {
        RAG_ASSIGN_OR_RETURN(Ready r, decodeReady(f.payload));
        m_prof.setOfflineFit(other(m_me), {r.decodeSlopeMs, r.decodeInterceptMs});
        m_rep.documents[static_cast<size_t>(other(m_me))] = r.documents;
        return Status::ok();
      }
      case MsgType::Ping: return m_t->send(MsgType::Pong, {});
      case MsgType::Pong: return Status::ok();
      case MsgType::Bye:
      case MsgType::Error: {
        Result<Bye> b = decodeBye(f.payload);
        lose(std::string(f.header.type == MsgType::Error ? "it failed: " : "it left: ") +
             (b ? b->reason : std::string("?")));
        return Status::ok();
      }
      default:
        return Status::corrupt("unexpected " + std::string(msgTypeName(f.header.type)) + " message during a " +
                               std::string(methodName(m_h.method)) + " run");
    }
  }

  Status draftOne() {
    const double startMs = m_clock.elapsedMs();
    RAG_ASSIGN_OR_RETURN(Drafted d, m_dec.draft());
    RunEvent e{.kind = RunEvent::Kind::Decoded, .side = m_me, .pos = d.pos, .token = d.token};
    e.startMs = startMs;
    e.endMs = m_clock.elapsedMs();
    e.decodeMs = d.decodeMs;
    record(e);
    Draft msg;
    msg.side = m_me;
    msg.pos = d.pos;
    msg.version = m_s.version[static_cast<size_t>(m_me)];
    msg.token = d.token;
    msg.weight = d.local.weight;
    msg.decodeMs = d.decodeMs;
    msg.contextLen = d.contextLen;
    msg.dist = std::move(d.local.dist);
    m_prof.observeDecode(m_me, d.decodeMs, d.contextLen);
    m_rep.decodeMs[static_cast<size_t>(m_me)].push_back(d.decodeMs);
    if (m_t && !m_s.peerLost) {
      Status s = sendMsg(*m_t, MsgType::Draft, msg);
      if (!s) lose(s.message());
    }
    m_s.queue[static_cast<size_t>(m_me)].push_back(std::move(msg));
    return Status::ok();
  }

  Status aggregateOne() {
    const Draft& dd = *front(Side::Device);
    const Draft& cd = *front(Side::Cloud);
    AggregateResult r = aggregate(dd, cd, m_h.temperature <= 0, m_rng);
    if (m_h.temperature > 0)  // Eq. 5 needs both distributions: only the aggregator has them
      for (int s = 0; s < 2; ++s) m_prof.observeAcceptance(static_cast<Side>(s), r.acceptance[s]);
    const RttEstimate rtt = m_t->rtt();
    m_prof.observeRtt(rtt.instantMs, rtt.historicalMs);
    Verdict v;
    v.pos = m_s.pos;
    v.token = r.token;
    v.accepted[0] = r.accepted[0];
    v.accepted[1] = r.accepted[1];
    v.done = isEnd(m_side, m_h, r.token) || m_s.pos + 1 >= m_h.maxTokens;
    v.nextAggregator = m_sched.choose(m_me, m_prof, std::max(dd.contextLen, cd.contextLen));
    ++m_rep.aggregatedOn[static_cast<size_t>(m_me)];
    if (!m_s.peerLost) {
      Status s = sendMsg(*m_t, MsgType::Verdict, v);
      if (!s) lose(s.message());
    }
    return apply(v);
  }

  // `from`: the peer's Verdict frame (null when this side aggregated).
  Status apply(const Verdict& v, const Frame* from = nullptr) {
    RunEvent e{.kind = RunEvent::Kind::Verdict, .side = m_s.aggregator, .pos = v.pos, .token = v.token};
    e.startMs = e.endMs = m_clock.elapsedMs();
    e.accepted[0] = v.accepted[0];
    e.accepted[1] = v.accepted[1];
    e.next = v.nextAggregator;
    if (from) stampFrame(e, *from);
    record(e);
    if (!v.accepted[static_cast<size_t>(m_me)])
      record({.kind = RunEvent::Kind::Rollback, .side = m_me, .pos = v.pos, .token = v.token, .startMs = e.endMs,
              .endMs = e.endMs});
    // Greedy: acceptance is the observed outcome, known to both sides, so a side that receives
    // the aggregator has current estimates.
    if (m_h.temperature <= 0)
      for (int s = 0; s < 2; ++s) m_prof.observeAcceptance(static_cast<Side>(s), v.accepted[s] ? 1.0 : 0.0);
    for (int s = 0; s < 2; ++s) {
      auto& q = m_s.queue[s];
      m_rep.acceptTrace[s].push_back(v.accepted[s] ? 1 : 0);
      if (v.accepted[s]) {
        ++m_rep.accepted[s];
        if (!q.empty() && q.front().pos == v.pos) q.pop_front();
      } else {
        ++m_rep.rejected[s];
        for (const Draft& d : q) m_rep.staleDrafts += d.pos > v.pos ? 1 : 0;  // decoded past the rejection
        q.clear();
        ++m_s.version[s];
      }
    }
    if (v.accepted[static_cast<size_t>(m_me)]) m_dec.accept();
    else RAG_RETURN_IF_ERROR(m_dec.reject(v.token));
    if (!isEnd(m_side, m_h, v.token)) m_rep.tokens.push_back(v.token);
    if (m_s.pos == 0) m_rep.ttftMs = m_clock.elapsedMs();
    ++m_s.pos;
    if (v.nextAggregator != m_s.aggregator) ++m_rep.handovers;
    m_s.aggregator = v.nextAggregator;
    m_s.done = v.done;
    return Status::ok();
  }

  // The peer is gone: the device's own drafts become the answer (its documents only).
  Status finishAlone() {
    auto& mine = m_s.queue[static_cast<size_t>(m_me)];
    while (m_s.pos < m_h.maxTokens) {
      if (mine.empty() || mine.front().pos != m_s.pos) {
        mine.clear();
        if (m_dec.pending() > 0) return Status::internal("own drafts out of step after the peer was lost");
        RAG_RETURN_IF_ERROR(draftOne());
      }
      const uint32_t token = mine.front().token;
      mine.pop_front();
      m_dec.accept();
      if (m_s.pos == 0) m_rep.ttftMs = m_clock.elapsedMs();
      ++m_s.pos;
      if (isEnd(m_side, m_h, token)) break;
      m_rep.tokens.push_back(token);
    }
    m_s.done = true;
    return Status::ok();
  }

  Transport* m_t;
  DocDecoder& m_dec;
  SideResources& m_side;
  const Hello& m_h;
  uint32_t m_maxAhead;
  SideScheduler m_sched;
  Rng m_rng;
  RunReport& m_rep;
  const SessionOptions& m_o;
  Stopwatch& m_clock;
  Side m_me;
  Profiler m_prof;
  SpecState m_s;
};

}  // namespace

Status runSpeculative(Transport& t, DocDecoder& dec, SideResources& side, const Hello& h, uint32_t maxAhead,
                      AggregatorPolicy policy, RunReport& rep, const SessionOptions& o, Stopwatch& clock) {
  SpeculativeRun run(&t, dec, side, h, maxAhead, policy, rep, o, clock);
  return run.run();
}

}  // namespace rag::dragon
