#include "sched/dep_kv.h"

#include <algorithm>


namespace rag::sched {

DepKvBuilder::DepKvBuilder(model::ModelRunner& runner)
    : m_runner(runner), m_cache(*runner.prefixCache()), m_vocab(static_cast<int32_t>(model::modelFacts(runner.model()).config.vocabSize)) {}

DepKvBuilder::~DepKvBuilder() {
  while (!m_tickets.empty()) cancel(m_tickets.begin()->first);
}

Result<DepKvBuilder::Ticket> DepKvBuilder::begin(model::DepPrompt prompt) {
  const Ticket t = m_next++;
  Entry& e = m_tickets[t];
  e.prompt = std::move(prompt);
  ++m_stats.prompts;
  for (size_t i = 0; i < e.prompt.segments.size(); ++i) {
    const model::DepTree& tree = e.prompt.segments[i].tree;
    const auto n = static_cast<int64_t>(tree.tokens.size());
    Part part;
    part.keys = model::structuralKeys(tree, m_vocab);
    memory::PrefixMatch m = m_cache.match(part.keys, {.ns = kDepCacheNamespace, .maxTokens = n});
    ++m_stats.segments;
    m_stats.segmentTokens += n;
    m_stats.hitTokens += m.tokens;
    e.hitTokens += m.tokens;
    model::KvHandle hit;
    if (m.tokens > 0) {
      hit.blocks = m.blocks;
      for (int32_t b : hit.blocks) m_runner.kvPool().retain(b);
      hit.numTokens = m.tokens;
      hit.tokens.assign(tree.tokens.begin(), tree.tokens.begin() + m.tokens);
      hit.positions = m.positions;
    }
    m_cache.unlock(m.node);  // our block references keep the hit alive from here
    if (m.tokens == n) {
      part.kv = std::move(hit);
      e.parts.push_back(std::move(part));
      continue;
    }
    model::SequenceRequest q;
    q.prompt.assign(tree.tokens.begin() + m.tokens, tree.tokens.end());
    q.mask = model::AttentionMask::ancestors(tree.parents);
    q.firstPosition = m.tokens;
    q.sampling.maxTokens = 0;
    q.keepKv = true;
    if (m.tokens > 0) q.cached.push_back({hit, -1});
    Result<model::SeqId> id = m_runner.add(std::move(q));
    if (m.tokens > 0) m_runner.releaseKv(hit);  // the sequence shares the blocks now
    if (!id) {
      e.error = id.status();
      e.parts.push_back(std::move(part));
      break;
    }
    part.computing = *id;
    m_bySeq[*id] = {t, e.parts.size()};
    ++e.running;
    m_stats.computedTokens += n - m.tokens;
    e.parts.push_back(std::move(part));
  }
  if (!e.error.isOk()) {
    Status st = e.error;
    cancel(t);
    return st;
  }
  return t;
}

void DepKvBuilder::absorb(std::vector<model::SeqEvent>& events) {
  std::erase_if(events, [&](model::SeqEvent& ev) {
    auto it = m_bySeq.find(ev.id);
    if (it == m_bySeq.end()) return false;
    if (!ev.finished) return true;
    const auto [ticket, index] = it->second;
    m_bySeq.erase(it);
    auto te = m_tickets.find(ticket);
    if (te == m_tickets.end()) {
      (void)m_runner.release(ev.id);
      return true;
    }
    Entry& e = te->second;
    Part& part = e.parts[index];
    part.computing = -1;
    --e.running;
    const auto n = static_cast<int64_t>(e.prompt.segments[index].tree.tokens.size());
    if (ev.reason == model::FinishReason::MaxTokens) {
      Result<model::KvHandle> kv = m_runner.retainKv(ev.id, n);
      if (kv) {
        part.kv = std::move(*kv);
        m_cache.insert(part.keys, part.kv.blocks, {.ns = kDepCacheNamespace, .firstPosition = 0});
      } else if (e.error.isOk()) {
        e.error = kv.status();
      }
    } else if (e.error.isOk()) {
      e.error = Status::unavailable(std::string("a knowledge-graph segment could not be computed (") +
                                    std::string(model::finishReasonName(ev.reason)) + ")");
    }
    (void)m_runner.release(ev.id);
    return true;
  });
}

bool DepKvBuilder::ready(Ticket t) const {
  auto it = m_tickets.find(t);
  return it != m_tickets.end() && (it->second.running == 0 || !it->second.error.isOk());
}

Status DepKvBuilder::error(Ticket t) const {
  auto it = m_tickets.find(t);
  return it == m_tickets.end() ? Status::notFound("no such DepCache ticket") : it->second.error;
}

int64_t DepKvBuilder::hitTokens(Ticket t) const {
  auto it = m_tickets.find(t);
  return it == m_tickets.end() ? 0 : it->second.hitTokens;
}

Result<model::SequenceRequest> DepKvBuilder::request(Ticket t) const {
  auto it = m_tickets.find(t);
  if (it == m_tickets.end()) return Status::notFound("no such DepCache ticket");
  const Entry& e = it->second;
  if (!e.error.isOk()) return e.error;
  if (e.running > 0) return Status::unavailable("the ticket's segments are still being computed");
  model::SequenceRequest q;
  const std::vector<int64_t> offsets = e.prompt.segmentOffsets();
  for (size_t i = 0; i < e.parts.size(); ++i) q.cached.push_back({e.parts[i].kv, offsets[i]});
  q.prompt = e.prompt.tail;
  q.mask = e.prompt.mask();
  return q;
}

void DepKvBuilder::release(Entry& e) {
  for (Part& p : e.parts) {
    if (p.computing >= 0) {
      m_bySeq.erase(p.computing);
      (void)m_runner.cancel(p.computing);  // its cancellation event reaches no one: dropped
      p.computing = -1;
    }
    if (!p.kv.blocks.empty()) m_runner.releaseKv(p.kv);
  }
}

void DepKvBuilder::finish(Ticket t) {
  auto it = m_tickets.find(t);
  if (it == m_tickets.end()) return;
  release(it->second);
  m_tickets.erase(it);
}

void DepKvBuilder::cancel(Ticket t) { finish(t); }

void DepKvBuilder::appendPending(std::vector<memory::PendingPrompt>& out) const {
  for (const auto& [t, e] : m_tickets)
    for (const Part& p : e.parts)
      if (p.computing >= 0) out.push_back({kDepCacheNamespace, p.keys});
}

}  // namespace rag::sched
