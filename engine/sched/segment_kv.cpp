#include "sched/segment_kv.h"

#include <algorithm>


namespace rag::sched {

uint64_t segmentNamespace(model::SegmentAttention a) {
  return a == model::SegmentAttention::Block ? kBlockNamespace : kDepCacheNamespace;
}

std::vector<int32_t> segmentKeys(const model::ContextSegment& s, model::SegmentAttention a, int32_t vocab) {
  return a == model::SegmentAttention::Block ? s.tree.tokens : model::structuralKeys(s.tree, vocab);
}

SegmentKvBuilder::SegmentKvBuilder(model::ModelRunner& runner, bool reencode, memory::BlockStore* store)
    : m_runner(runner),
      m_cache(*runner.prefixCache()),
      m_vocab(static_cast<int32_t>(model::modelFacts(runner.model()).config.vocabSize)),
      m_reencode(reencode),
      m_store(store) {}

SegmentKvBuilder::~SegmentKvBuilder() {
  while (!m_tickets.empty()) cancel(m_tickets.begin()->first);
}

Result<SegmentKvBuilder::Ticket> SegmentKvBuilder::begin(model::SegmentedPrompt prompt) {
  const Ticket t = m_next++;
  Entry& e = m_tickets[t];
  e.prompt = std::move(prompt);
  SegmentKvStats& stats = statsOf(e);
  const uint64_t ns = segmentNamespace(e.prompt.attention);
  const std::vector<int64_t> offsets = e.prompt.segmentOffsets();
  ++stats.prompts;
  for (size_t i = 0; i < e.prompt.segments.size(); ++i) {
    const model::ContextSegment& seg = e.prompt.segments[i];
    const model::DepTree& tree = seg.tree;
    const auto n = static_cast<int64_t>(tree.tokens.size());
    Part part;
    part.keys = segmentKeys(seg, e.prompt.attention, m_vocab);
    memory::PrefixMatch m = m_cache.match(part.keys, {.ns = ns, .maxTokens = n});
    SegmentKvUse& use = e.uses.emplace_back();
    use.passageId = seg.passageId;
    use.offset = offsets[i];
    use.tokens = n;
    use.reencoded = m_reencode && offsets[i] != 0;
    ++stats.segments;
    stats.segmentTokens += n;
    // The cache holds whole blocks only: what it lacks of a passage block (all of it, or just
    // its partial last block) comes from the block store when the store has the passage.
    if (m.tokens < n && m_store && seg.passageId >= 0) {
      model::KvHandle stored = fromStore(seg, part.keys, ns, m);
      if (stored.numTokens == n) {
        part.node = m.node;  // fromStore moved the lock to the node ending the segment's whole blocks
        part.kv = std::move(stored);
        stats.hitTokens += n;
        stats.storeHitTokens += n - m.tokens;
        e.hitTokens += n;
        use.cachedTokens = m.tokens;
        use.storedTokens = n - m.tokens;
        e.parts.push_back(std::move(part));
        continue;
      }
    }
    stats.hitTokens += m.tokens;
    e.hitTokens += m.tokens;
    use.cachedTokens = m.tokens;
    model::KvHandle hit;
    if (m.tokens > 0) {
      hit.blocks = m.blocks;
      for (int32_t b : hit.blocks) m_runner.kvPool().retain(b);
      hit.numTokens = m.tokens;
      hit.tokens.assign(tree.tokens.begin(), tree.tokens.begin() + m.tokens);
      hit.positions = m.positions;
    }
    part.node = m.node;  // stays locked while the ticket uses it (unlocked in release)
    if (m.tokens == n) {
      part.kv = std::move(hit);
      e.parts.push_back(std::move(part));
      continue;
    }
    model::SequenceRequest q;
    q.prompt.assign(tree.tokens.begin() + m.tokens, tree.tokens.end());
    q.mask = model::AttentionMask::ancestors(tree.parents);  // a chain's is causal
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
    stats.computedTokens += n - m.tokens;
    e.parts.push_back(std::move(part));
  }
  if (!e.error.isOk()) {
    Status st = e.error;
    cancel(t);
    return st;
  }
  return t;
}

void SegmentKvBuilder::absorb(std::vector<model::SeqEvent>& events) {
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
    const model::ContextSegment& seg = e.prompt.segments[index];
    const auto n = static_cast<int64_t>(seg.tree.tokens.size());
    if (ev.reason == model::FinishReason::MaxTokens) {
      Result<model::KvHandle> kv = m_runner.retainKv(ev.id, n);
      if (kv) {
        part.kv = std::move(*kv);
        if (m_store && seg.passageId >= 0)  // the disk tier keeps it for the next run (a failure only costs a recompute)
          (void)m_store->put(seg.passageId, seg.tree.tokens, m_runner.kvPool(), part.kv.blocks);
        const memory::PrefixNodeId node = m_cache.insert(
            part.keys, part.kv.blocks, {.ns = segmentNamespace(e.prompt.attention), .firstPosition = 0});
        if (node != memory::kNoPrefixNode) {  // the lock moves to the node ending the whole segment
          m_cache.lock(node);
          m_cache.unlock(part.node);
          part.node = node;
        }
      } else if (e.error.isOk()) {
        e.error = kv.status();
      }
    } else if (e.error.isOk()) {
      e.error = Status::unavailable(std::string("a prompt segment could not be computed (") +
                                    std::string(model::finishReasonName(ev.reason)) + ")");
    }
    (void)m_runner.release(ev.id);
    return true;
  });
}

bool SegmentKvBuilder::ready(Ticket t) const {
  auto it = m_tickets.find(t);
  return it != m_tickets.end() && (it->second.running == 0 || !it->second.error.isOk());
}

Status SegmentKvBuilder::error(Ticket t) const {
  auto it = m_tickets.find(t);
  return it == m_tickets.end() ? Status::notFound("no such segment ticket") : it->second.error;
}

int64_t SegmentKvBuilder::hitTokens(Ticket t) const {
  auto it = m_tickets.find(t);
  return it == m_tickets.end() ? 0 : it->second.hitTokens;
}

std::vector<SegmentKvUse> SegmentKvBuilder::uses(Ticket t) const {
  auto it = m_tickets.find(t);
  return it == m_tickets.end() ? std::vector<SegmentKvUse>{} : it->second.uses;
}

Result<model::SequenceRequest> SegmentKvBuilder::request(Ticket t) const {
  auto it = m_tickets.find(t);
  if (it == m_tickets.end()) return Status::notFound("no such segment ticket");
  const Entry& e = it->second;
  if (!e.error.isOk()) return e.error;
  if (e.running > 0) return Status::unavailable("the ticket's segments are still being computed");
  model::SequenceRequest q;
  const std::vector<int64_t> offsets = e.prompt.segmentOffsets();
  for (size_t i = 0; i < e.parts.size(); ++i) q.cached.push_back({e.parts[i].kv, m_reencode ? offsets[i] : -1});
  q.prompt = e.prompt.tail;
  q.mask = e.prompt.mask();
  return q;
}

void SegmentKvBuilder::release(Entry& e) {
  for (Part& p : e.parts) {
    if (p.computing >= 0) {
      m_bySeq.erase(p.computing);
      (void)m_runner.cancel(p.computing);  // its cancellation event reaches no one: dropped
      p.computing = -1;
    }
    if (!p.kv.blocks.empty()) m_runner.releaseKv(p.kv);
    m_cache.unlock(p.node);
    p.node = memory::kNoPrefixNode;
  }
}

void SegmentKvBuilder::finish(Ticket t) {
  auto it = m_tickets.find(t);
  if (it == m_tickets.end()) return;
  release(it->second);
  m_tickets.erase(it);
}

void SegmentKvBuilder::cancel(Ticket t) { finish(t); }

void SegmentKvBuilder::appendPending(std::vector<memory::PendingPrompt>& out) const {
  for (const auto& [t, e] : m_tickets)
    for (const Part& p : e.parts)
      if (p.computing >= 0) out.push_back({segmentNamespace(e.prompt.attention), p.keys});
}

model::KvHandle SegmentKvBuilder::fromStore(const model::ContextSegment& s, const std::vector<int32_t>& keys,
                                            uint64_t ns, memory::PrefixMatch& m) {
  model::KvHandle kv;
  if (!m_store->contains(s.passageId, s.tree.tokens)) return kv;
  memory::KvPool& pool = m_runner.kvPool();
  const auto n = static_cast<int64_t>(s.tree.tokens.size());
  const int64_t bs = pool.params().blockSize;
  std::optional<std::vector<int32_t>> fresh = pool.allocate(static_cast<int32_t>((n - m.tokens + bs - 1) / bs));
  if (!fresh) return kv;  // no room: computed instead
  if (!m_store->load(s.passageId, s.tree.tokens, pool, *fresh, m.tokens).isOk()) {
    pool.release(*fresh);
    return kv;
  }
  kv.blocks = m.blocks;
  for (int32_t b : kv.blocks) pool.retain(b);
  kv.blocks.insert(kv.blocks.end(), fresh->begin(), fresh->end());
  kv.numTokens = n;
  kv.tokens = s.tree.tokens;
  kv.positions.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) kv.positions[static_cast<size_t>(i)] = i;
  const memory::PrefixNodeId node = m_cache.insert(keys, kv.blocks, {.ns = ns, .firstPosition = 0});
  if (node != memory::kNoPrefixNode) {  // the lock moves to the node ending the segment's whole blocks
    m_cache.lock(node);
    m_cache.unlock(m.node);
    m.node = node;
  }
  return kv;
}

}  // namespace rag::sched
