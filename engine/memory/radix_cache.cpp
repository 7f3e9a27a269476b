#include "memory/radix_cache.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>

namespace rag::memory {

RadixCache::RadixCache(KvPool& pool, std::unique_ptr<EvictionPolicy> policy)
    : m_pool(pool), m_policy(std::move(policy)), m_bs(pool.params().blockSize) {}

RadixCache::~RadixCache() {
  // Give back every block the cache holds (the pool may outlive it).
  for (Node& n : m_nodes) {
    if (!n.live || n.blocks.empty()) continue;
    if (n.tier == KvTier::Compute) m_pool.release(n.blocks);
    else m_pool.releaseHost(n.blocks);
  }
}

// ---- nodes -------------------------------------------------------------------------------------

PrefixNodeId RadixCache::newNode() {
  if (!m_freeIds.empty()) {
    const PrefixNodeId id = m_freeIds.back();
    m_freeIds.pop_back();
    m_nodes[static_cast<size_t>(id)] = Node{};
    m_nodes[static_cast<size_t>(id)].live = true;
    return id;
  }
  m_nodes.emplace_back();
  m_nodes.back().live = true;
  return static_cast<PrefixNodeId>(m_nodes.size() - 1);
}

void RadixCache::freeNode(PrefixNodeId id) {
  m_nodes[static_cast<size_t>(id)] = Node{};
  m_freeIds.push_back(id);
}

PrefixNodeId RadixCache::root(uint64_t ns) {
  auto it = m_roots.find(ns);
  if (it != m_roots.end()) return it->second;
  const PrefixNodeId id = newNode();
  m_nodes[static_cast<size_t>(id)].ns = ns;
  m_roots.emplace(ns, id);
  return id;
}

uint64_t RadixCache::blockHash(std::span<const int32_t> block) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the token ids
  for (int32_t t : block) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ull;
  }
  return h;
}

PrefixNodeId RadixCache::childFor(const Node& n, std::span<const int32_t> firstBlock) const {
  auto it = n.children.find(blockHash(firstBlock));
  return it == n.children.end() ? kNoPrefixNode : it->second;
}

int64_t RadixCache::commonBlocks(std::span<const int32_t> a, std::span<const int32_t> b) const {
  const int64_t blocks = static_cast<int64_t>(std::min(a.size(), b.size())) / m_bs;
  for (int64_t k = 0; k < blocks; ++k)
    if (!std::equal(a.begin() + k * m_bs, a.begin() + (k + 1) * m_bs, b.begin() + k * m_bs)) return k;
  return blocks;
}

PrefixNodeId RadixCache::split(PrefixNodeId id, int64_t blocks) {
  const PrefixNodeId upperId = newNode();  // may reallocate m_nodes: take references after it
  Node& lower = m_nodes[static_cast<size_t>(id)];
  Node& upper = m_nodes[static_cast<size_t>(upperId)];
  const int64_t cut = blocks * m_bs;
  upper.parent = lower.parent;
  upper.ns = lower.ns;
  upper.key.assign(lower.key.begin(), lower.key.begin() + cut);
  upper.blocks.assign(lower.blocks.begin(), lower.blocks.begin() + blocks);
  upper.tier = lower.tier;
  upper.firstPosition = lower.firstPosition;
  upper.depth = lower.depth - static_cast<int64_t>(lower.key.size()) + cut;
  upper.locks = lower.locks;  // every lock below passes through the one child
  upper.evict = lower.evict;
  const int64_t prefix = upper.depth - cut;
  const int64_t rest = static_cast<int64_t>(lower.key.size()) - cut;
  upper.evict.recomputeSeconds = m_cost ? m_cost(prefix, cut) : static_cast<double>(cut);
  lower.evict.recomputeSeconds = m_cost ? m_cost(upper.depth, rest) : static_cast<double>(rest);
  lower.key.erase(lower.key.begin(), lower.key.begin() + cut);
  lower.blocks.erase(lower.blocks.begin(), lower.blocks.begin() + blocks);
  lower.firstPosition += cut;
  lower.parent = upperId;
  const uint64_t h = blockHash(std::span<const int32_t>(upper.key).first(static_cast<size_t>(m_bs)));
  m_nodes[static_cast<size_t>(upper.parent)].children[h] = upperId;
  upper.children.emplace(blockHash(std::span<const int32_t>(lower.key).first(static_cast<size_t>(m_bs))), id);
  upper.computeChildren = lower.tier == KvTier::Compute ? 1 : 0;
  return upperId;
}

void RadixCache::touch(Node& n) {
  n.evict.lastAccess = ++m_clock;
  m_policy->onAccess(n.evict);
}

void RadixCache::setTier(PrefixNodeId id, KvTier tier, std::vector<int32_t> blocks) {
  Node& n = m_nodes[static_cast<size_t>(id)];
  if (n.tier != tier && n.parent != kNoPrefixNode)
    m_nodes[static_cast<size_t>(n.parent)].computeChildren += tier == KvTier::Compute ? 1 : -1;
  n.tier = tier;
  n.blocks = std::move(blocks);
}

void RadixCache::removeLeaf(PrefixNodeId id) {
  Node& n = m_nodes[static_cast<size_t>(id)];
  Node& parent = m_nodes[static_cast<size_t>(n.parent)];
  parent.children.erase(blockHash(std::span<const int32_t>(n.key).first(static_cast<size_t>(m_bs))));
  if (n.tier == KvTier::Compute) --parent.computeChildren;
  freeNode(id);
}

void RadixCache::lock(PrefixNodeId id) {
  for (PrefixNodeId p = id; p != kNoPrefixNode; p = m_nodes[static_cast<size_t>(p)].parent)
    ++m_nodes[static_cast<size_t>(p)].locks;
}

void RadixCache::unlock(PrefixNodeId id) {
  for (PrefixNodeId p = id; p != kNoPrefixNode; p = m_nodes[static_cast<size_t>(p)].parent) {
    Node& n = m_nodes[static_cast<size_t>(p)];
    if (n.locks <= 0) throw std::logic_error("prefix cache node unlocked more often than locked");
    --n.locks;
  }
}

// ---- match and insert --------------------------------------------------------------------------

PrefixMatch RadixCache::match(std::span<const int32_t> tokens, const MatchParams& params) {
  const int64_t offered = std::min<int64_t>(static_cast<int64_t>(tokens.size()), std::max<int64_t>(0, params.maxTokens));
  ++m_stats.matches;
  m_stats.queriedTokens += offered;
  const int64_t limit = offered / m_bs * m_bs;
  PrefixMatch out;
  auto r = m_roots.find(params.ns);
  if (r == m_roots.end() || limit == 0) return out;
  std::vector<PrefixNodeId> path;
  PrefixNodeId cur = r->second;
  int64_t pos = 0;
  while (pos < limit) {
    const std::span<const int32_t> rest = tokens.subspan(static_cast<size_t>(pos), static_cast<size_t>(limit - pos));
    PrefixNodeId child = childFor(m_nodes[static_cast<size_t>(cur)], rest.first(static_cast<size_t>(m_bs)));
    if (child == kNoPrefixNode) break;
    const Node& c = m_nodes[static_cast<size_t>(child)];
    const int64_t k = commonBlocks(c.key, rest);
    if (k == 0) break;  // a hash collision: the first blocks differ
    const bool partial = k * m_bs < static_cast<int64_t>(c.key.size());
    if (partial) child = split(child, k);
    path.push_back(child);
    pos += k * m_bs;
    cur = child;
    if (partial) break;
  }
  if (path.empty()) return out;
  lock(path.back());  // the copies below may evict: never this path
  // Host nodes come last on a path: copy them back, or stop before the first that cannot be.
  size_t kept = path.size();
  for (size_t i = 0; i < path.size(); ++i) {
    Node& n = m_nodes[static_cast<size_t>(path[i])];
    if (n.tier == KvTier::Compute) continue;
    std::optional<std::vector<int32_t>> back = params.loadFromHost ? m_pool.copyToCompute(n.blocks) : std::nullopt;
    if (!back) {
      kept = i;
      break;
    }
    m_pool.releaseHost(m_nodes[static_cast<size_t>(path[i])].blocks);
    m_stats.hostHitTokens += static_cast<int64_t>(m_nodes[static_cast<size_t>(path[i])].key.size());
    out.hostTokens += static_cast<int64_t>(m_nodes[static_cast<size_t>(path[i])].key.size());
    setTier(path[i], KvTier::Compute, std::move(*back));
  }
  if (kept < path.size()) {
    unlock(path.back());
    path.resize(kept);
    if (path.empty()) return out;
    lock(path.back());
  }
  for (PrefixNodeId id : path) {
    Node& n = m_nodes[static_cast<size_t>(id)];
    ++n.evict.hits;
    touch(n);
    out.blocks.insert(out.blocks.end(), n.blocks.begin(), n.blocks.end());
    for (size_t i = 0; i < n.key.size(); ++i) out.positions.push_back(n.firstPosition + static_cast<int64_t>(i));
    out.tokens += static_cast<int64_t>(n.key.size());
  }
  out.node = path.back();
  m_stats.hitTokens += out.tokens;
  return out;
}

PrefixNodeId RadixCache::insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks,
                                const InsertParams& params) {
  const int64_t nb = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / m_bs, static_cast<int64_t>(blocks.size()));
  if (nb == 0) return kNoPrefixNode;
  const std::span<const int32_t> keyTokens = tokens.first(static_cast<size_t>(nb * m_bs));
  PrefixNodeId cur = root(params.ns);
  int64_t b = 0;
  while (b < nb) {
    const std::span<const int32_t> rest = keyTokens.subspan(static_cast<size_t>(b * m_bs));
    PrefixNodeId child = childFor(m_nodes[static_cast<size_t>(cur)], rest.first(static_cast<size_t>(m_bs)));
    if (child == kNoPrefixNode) {
      const PrefixNodeId leaf = newNode();
      Node& n = m_nodes[static_cast<size_t>(leaf)];
      Node& parent = m_nodes[static_cast<size_t>(cur)];
      n.parent = cur;
      n.ns = params.ns;
      n.key.assign(rest.begin(), rest.end());
      n.blocks.assign(blocks.begin() + b, blocks.begin() + nb);
      for (int32_t blk : n.blocks) m_pool.retain(blk);
      n.firstPosition = params.firstPosition + b * m_bs;
      n.depth = parent.depth + static_cast<int64_t>(n.key.size());
      n.evict.recomputeSeconds = m_cost ? m_cost(parent.depth, static_cast<int64_t>(n.key.size()))
                                        : static_cast<double>(n.key.size());
      parent.children.emplace(blockHash(rest.first(static_cast<size_t>(m_bs))), leaf);
      ++parent.computeChildren;
      touch(n);
      m_stats.insertedTokens += static_cast<int64_t>(n.key.size());
      return leaf;
    }
    const int64_t k = commonBlocks(m_nodes[static_cast<size_t>(child)].key, rest);
    if (k == 0) break;  // a hash collision with a different block: cache what matched so far
    if (k * m_bs < static_cast<int64_t>(m_nodes[static_cast<size_t>(child)].key.size())) child = split(child, k);
    if (m_nodes[static_cast<size_t>(child)].tier == KvTier::Host) {
      // The caller computed these blocks again: take them instead of the host copy.
      m_pool.releaseHost(m_nodes[static_cast<size_t>(child)].blocks);
      std::vector<int32_t> fresh(blocks.begin() + b, blocks.begin() + b + k);
      for (int32_t blk : fresh) m_pool.retain(blk);
      setTier(child, KvTier::Compute, std::move(fresh));
    }
    touch(m_nodes[static_cast<size_t>(child)]);
    b += k;
    cur = child;
  }
  return m_nodes[static_cast<size_t>(cur)].parent == kNoPrefixNode ? kNoPrefixNode : cur;
}

// ---- eviction ----------------------------------------------------------------------------------

bool RadixCache::evictable(const Node& n) const {
  return n.live && n.parent != kNoPrefixNode && n.tier == KvTier::Compute && n.locks == 0 && n.computeChildren == 0;
}

double RadixCache::priorityOf(const Node& n) const {
  EvictionNode e = n.evict;
  e.blocks = static_cast<int32_t>(n.blocks.size());
  return m_policy->priority(e);
}

int64_t RadixCache::peek(std::span<const int32_t> tokens, uint64_t ns) const {
  auto r = m_roots.find(ns);
  if (r == m_roots.end()) return 0;
  PrefixNodeId cur = r->second;
  int64_t pos = 0;
  const auto limit = static_cast<int64_t>(tokens.size()) / m_bs * m_bs;
  while (pos < limit) {
    const std::span<const int32_t> rest = tokens.subspan(static_cast<size_t>(pos), static_cast<size_t>(limit - pos));
    const PrefixNodeId child = childFor(m_nodes[static_cast<size_t>(cur)], rest.first(static_cast<size_t>(m_bs)));
    if (child == kNoPrefixNode) break;
    const Node& c = m_nodes[static_cast<size_t>(child)];
    const int64_t k = commonBlocks(c.key, rest);
    if (k == 0) break;
    pos += k * m_bs;
    if (k * m_bs < static_cast<int64_t>(c.key.size())) break;
    cur = child;
  }
  return pos;
}

void RadixCache::scoreLookahead() {
  for (Node& n : m_nodes) n.evict.lookahead = 0;
  if (!m_pending) return;
  const std::vector<PendingPrompt> pending = m_pending();
  const double w = static_cast<double>(pending.size());
  for (size_t j = 0; j < pending.size(); ++j) {
    const double weight = 1.0 - static_cast<double>(j) / w;  // the head of the queue counts most
    auto r = m_roots.find(pending[j].ns);
    if (r == m_roots.end()) continue;
    const std::span<const int32_t> tokens(pending[j].tokens);
    PrefixNodeId cur = r->second;
    size_t pos = 0;
    while (pos + static_cast<size_t>(m_bs) <= tokens.size()) {
      const PrefixNodeId child = childFor(m_nodes[static_cast<size_t>(cur)], tokens.subspan(pos, static_cast<size_t>(m_bs)));
      if (child == kNoPrefixNode) break;
      Node& c = m_nodes[static_cast<size_t>(child)];
      const int64_t k = commonBlocks(c.key, tokens.subspan(pos));
      if (k == 0) break;
      c.evict.lookahead += weight;
      if (k * m_bs < static_cast<int64_t>(c.key.size())) break;
      pos += c.key.size();
      cur = child;
    }
  }
}

// Drops unlocked host-tier leaves, lowest priority first, until `blocks` host blocks are free.
int32_t RadixCache::dropHostLeaves(int32_t blocks, PrefixNodeId keep) {
  using Entry = std::tuple<double, uint64_t, PrefixNodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto push = [&](PrefixNodeId id) {
    const Node& n = m_nodes[static_cast<size_t>(id)];
    if (n.live && id != keep && n.parent != kNoPrefixNode && n.tier == KvTier::Host && n.locks == 0 && n.children.empty())
      heap.emplace(priorityOf(n), n.evict.lastAccess, id);
  };
  for (size_t i = 0; i < m_nodes.size(); ++i) push(static_cast<PrefixNodeId>(i));
  int32_t dropped = 0;
  while (m_pool.hostFreeBlocks() < blocks && !heap.empty()) {
    const PrefixNodeId id = std::get<2>(heap.top());
    heap.pop();
    Node& n = m_nodes[static_cast<size_t>(id)];
    if (!n.live || n.tier != KvTier::Host || !n.children.empty()) continue;
    m_pool.releaseHost(n.blocks);
    dropped += static_cast<int32_t>(n.blocks.size());
    m_stats.hostDroppedBlocks += static_cast<int64_t>(n.blocks.size());
    const PrefixNodeId parent = n.parent;
    removeLeaf(id);
    push(parent);  // a host parent whose last child went is a leaf now
  }
  return dropped;
}

int32_t RadixCache::evict(int32_t blocks) {
  if (blocks <= 0) return 0;
  if (m_policy->usesLookahead()) scoreLookahead();
  using Entry = std::tuple<double, uint64_t, PrefixNodeId>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto push = [&](PrefixNodeId id) {
    const Node& n = m_nodes[static_cast<size_t>(id)];
    if (evictable(n)) heap.emplace(priorityOf(n), n.evict.lastAccess, id);
  };
  for (size_t i = 0; i < m_nodes.size(); ++i) push(static_cast<PrefixNodeId>(i));
  int32_t freed = 0;
  auto releaseCompute = [&](const std::vector<int32_t>& bl) {
    for (int32_t b : bl)
      if (m_pool.release(b)) ++freed;
  };
  while (freed < blocks && !heap.empty()) {
    const auto [priority, tick, id] = heap.top();
    heap.pop();
    if (!evictable(m_nodes[static_cast<size_t>(id)])) continue;  // changed since it was pushed
    const PrefixNodeId parent = m_nodes[static_cast<size_t>(id)].parent;
    const auto nb = static_cast<int32_t>(m_nodes[static_cast<size_t>(id)].blocks.size());
    bool demoted = false;
    if (m_pool.hasHostTier() && nb <= m_pool.hostCapacity()) {
      if (m_pool.hostFreeBlocks() < nb) dropHostLeaves(nb, id);
      if (std::optional<std::vector<int32_t>> host = m_pool.copyToHost(m_nodes[static_cast<size_t>(id)].blocks)) {
        releaseCompute(m_nodes[static_cast<size_t>(id)].blocks);
        m_stats.demotedBlocks += nb;
        setTier(id, KvTier::Host, std::move(*host));
        demoted = true;
      }
    }
    if (!demoted) {
      // Dropped: with it go its host-tier descendants (unlocked, since it is), deepest first.
      std::vector<PrefixNodeId> subtree{id};
      for (size_t i = 0; i < subtree.size(); ++i)
        for (const auto& [h, c] : m_nodes[static_cast<size_t>(subtree[i])].children) subtree.push_back(c);
      for (auto it = subtree.rbegin(); it != subtree.rend(); ++it) {
        Node& n = m_nodes[static_cast<size_t>(*it)];
        if (n.tier == KvTier::Compute) releaseCompute(n.blocks);
        else {
          m_pool.releaseHost(n.blocks);
          m_stats.hostDroppedBlocks += static_cast<int64_t>(n.blocks.size());
        }
        removeLeaf(*it);
      }
    }
    m_stats.evictedBlocks += nb;
    m_policy->onEvicted(priority);
    push(parent);
  }
  return freed;
}

void RadixCache::clear() {
  std::vector<PrefixNodeId> ids;
  for (size_t i = 0; i < m_nodes.size(); ++i) {
    const Node& n = m_nodes[i];
    if (n.live && n.parent != kNoPrefixNode && n.locks == 0) ids.push_back(static_cast<PrefixNodeId>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](PrefixNodeId a, PrefixNodeId b) {
    return m_nodes[static_cast<size_t>(a)].depth > m_nodes[static_cast<size_t>(b)].depth;
  });
  for (PrefixNodeId id : ids) {
    Node& n = m_nodes[static_cast<size_t>(id)];
    if (!n.live || !n.children.empty()) continue;
    if (n.tier == KvTier::Compute) m_pool.release(n.blocks);
    else m_pool.releaseHost(n.blocks);
    removeLeaf(id);
  }
}

// ---- inspection --------------------------------------------------------------------------------

PrefixCacheStats RadixCache::stats() const {
  PrefixCacheStats s = m_stats;
  for (const Node& n : m_nodes) {
    if (!n.live || n.parent == kNoPrefixNode) continue;
    ++s.nodes;
    (n.tier == KvTier::Compute ? s.computeBlocks : s.hostBlocks) += static_cast<int32_t>(n.blocks.size());
  }
  return s;
}

std::vector<PrefixNodeInfo> RadixCache::snapshot() const {
  std::vector<PrefixNodeInfo> out;
  for (size_t i = 0; i < m_nodes.size(); ++i) {
    const Node& n = m_nodes[i];
    if (!n.live || n.parent == kNoPrefixNode) continue;
    const bool underRoot = m_nodes[static_cast<size_t>(n.parent)].parent == kNoPrefixNode;
    out.push_back({static_cast<PrefixNodeId>(i), underRoot ? kNoPrefixNode : n.parent, n.ns, n.key, n.depth, n.tier,
                   n.locks, n.evict.hits, priorityOf(n)});
  }
  return out;
}

void RadixCache::forEachComputeBlock(const std::function<void(uint64_t ns, int32_t block)>& fn) const {
  for (const Node& n : m_nodes) {
    if (!n.live || n.parent == kNoPrefixNode || n.tier != KvTier::Compute) continue;
    for (int32_t b : n.blocks) fn(n.ns, b);
  }
}

}  // namespace rag::memory
