#include "memory/kv_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "core/clock.h"
#include "telemetry/trace_ring.h"

namespace rag::memory {

std::string_view kvTierName(KvTier t) { return t == KvTier::Compute ? "compute" : "host"; }

KvPool::KvPool(const KvPoolParams& params)
    : m_params(params), m_compute(params.computeBlocks), m_host(params.hostBlocks) {}

KvPool::~KvPool() {
  for (auto* tier : {&m_computeK, &m_computeV, &m_hostK, &m_hostV})
    for (Buffer& b : *tier) std::free(b.data);
}

Result<std::unique_ptr<KvPool>> KvPool::create(const KvPoolParams& p) {
  if (p.layers < 1 || p.kvHeads < 1 || p.headDim < 1 || p.blockSize < 1)
    return Status::invalidArgument("a KV pool needs at least one layer, KV head, head dimension and token per block");
  if (p.elementBytes != 4 && p.elementBytes != 2)
    return Status::invalidArgument("KV elements are 4 (F32) or 2 (BF16) bytes, not " + std::to_string(p.elementBytes));
  if (p.computeBlocks < 1)
    return Status::invalidArgument("the KV pool's compute tier holds no block (" + std::to_string(p.computeBlocks) +
                                   " blocks); raise the KV budget to at least one block");
  if (p.hostBlocks < 0)
    return Status::invalidArgument("the host KV tier cannot have a negative size; use 0 for no host tier");
  std::unique_ptr<KvPool> pool(new KvPool(p));
  pool->m_rowBytes = static_cast<int64_t>(p.kvHeads) * p.headDim * p.elementBytes;
  pool->m_blockBytesLayer = pool->m_rowBytes * p.blockSize;
  pool->m_bytesPerBlock = 2 * pool->m_blockBytesLayer * p.layers;
  // calloc: zeroed pages the kernel hands out lazily, so a large host tier costs nothing until used.
  auto make = [&](std::vector<Buffer>& out, int32_t blocks) -> Status {
    for (int32_t l = 0; l < p.layers && blocks > 0; ++l) {
      const size_t bytes = static_cast<size_t>(pool->m_blockBytesLayer) * static_cast<size_t>(blocks);
      auto* data = static_cast<std::byte*>(std::calloc(bytes, 1));
      if (!data)
        return Status::invalidArgument("could not allocate " + std::to_string(bytes >> 20) +
                                       " MiB for a KV tier of " + std::to_string(blocks) +
                                       " blocks; lower the KV budget");
      out.push_back({data, bytes});
    }
    return Status::ok();
  };
  if (!p.computeStore) {
    RAG_RETURN_IF_ERROR(make(pool->m_computeK, p.computeBlocks));
    RAG_RETURN_IF_ERROR(make(pool->m_computeV, p.computeBlocks));
  }
  RAG_RETURN_IF_ERROR(make(pool->m_hostK, p.hostBlocks));
  RAG_RETURN_IF_ERROR(make(pool->m_hostV, p.hostBlocks));
  if (p.ring) pool->m_lane = p.ring->registerLane("kv tiers", LaneKind::KvTiers);
  return pool;
}

bool KvPool::ensureFree(int32_t n) {
  if (n <= m_compute.freeBlocks()) return true;
  if (m_reclaimer && !m_reclaiming) {
    m_reclaiming = true;
    const int32_t freed = m_reclaimer(n - m_compute.freeBlocks());
    m_reclaiming = false;
    m_moves.reclaimedBlocks += freed;
  }
  return n <= m_compute.freeBlocks();
}

std::optional<std::vector<int32_t>> KvPool::allocate(int32_t n) {
  if (n < 0 || !ensureFree(n)) return std::nullopt;
  return m_compute.allocate(n);
}

std::optional<int32_t> KvPool::allocateOne() {
  if (!ensureFree(1)) return std::nullopt;
  return m_compute.allocate();
}

void KvPool::retain(int32_t block) { m_compute.retain(block); }
bool KvPool::release(int32_t block) { return m_compute.release(block); }
void KvPool::release(std::span<const int32_t> blocks) { m_compute.release(blocks); }
void KvPool::releaseHost(std::span<const int32_t> hostBlocks) { m_host.release(hostBlocks); }

void KvPool::copyBetween(const std::vector<Buffer>& from, int32_t fromBlock, std::vector<Buffer>& to,
                         int32_t toBlock) {
  const size_t n = static_cast<size_t>(m_blockBytesLayer);
  for (size_t l = 0; l < from.size(); ++l)
    std::memcpy(to[l].data + n * static_cast<size_t>(toBlock), from[l].data + n * static_cast<size_t>(fromBlock), n);
}

void KvPool::copyBlock(int32_t from, int32_t to) {
  if (m_params.computeStore) {
    keep(m_params.computeStore->copyBlock(from, to));
    return;
  }
  copyBetween(m_computeK, from, m_computeK, to);
  copyBetween(m_computeV, from, m_computeV, to);
}

void KvPool::keep(Status s) {
  if (m_storeStatus.isOk() && !s.isOk()) m_storeStatus = std::move(s);
}

Status KvPool::checkRows(int32_t layer, std::span<const int64_t> slots) const {
  if (layer < 0 || layer >= m_params.layers)
    return Status::invalidArgument("KV layer " + std::to_string(layer) + " is outside the pool's " +
                                   std::to_string(m_params.layers) + " layers");
  const int64_t slotCount = static_cast<int64_t>(m_compute.capacity()) * m_params.blockSize;
  for (int64_t s : slots)
    if (s < 0 || s >= slotCount)
      return Status::invalidArgument("KV slot " + std::to_string(s) + " is outside the pool's " +
                                     std::to_string(slotCount) + " slots");
  return Status::ok();
}

Status KvPool::readRows(int32_t layer, std::span<const int64_t> slots, void* keys, void* values) const {
  RAG_RETURN_IF_ERROR(checkRows(layer, slots));
  if (m_params.computeStore) return m_params.computeStore->readRows(layer, slots, keys, values);
  const auto row = static_cast<size_t>(m_rowBytes);
  const std::byte* k = m_computeK[static_cast<size_t>(layer)].data;
  const std::byte* v = m_computeV[static_cast<size_t>(layer)].data;
  for (size_t i = 0; i < slots.size(); ++i) {
    std::memcpy(static_cast<std::byte*>(keys) + i * row, k + static_cast<size_t>(slots[i]) * row, row);
    std::memcpy(static_cast<std::byte*>(values) + i * row, v + static_cast<size_t>(slots[i]) * row, row);
  }
  return Status::ok();
}

Status KvPool::writeRows(int32_t layer, std::span<const int64_t> slots, const void* keys, const void* values) {
  RAG_RETURN_IF_ERROR(checkRows(layer, slots));
  if (m_params.computeStore) return m_params.computeStore->writeRows(layer, slots, keys, values);
  const auto row = static_cast<size_t>(m_rowBytes);
  std::byte* k = m_computeK[static_cast<size_t>(layer)].data;
  std::byte* v = m_computeV[static_cast<size_t>(layer)].data;
  for (size_t i = 0; i < slots.size(); ++i) {
    std::memcpy(k + static_cast<size_t>(slots[i]) * row, static_cast<const std::byte*>(keys) + i * row, row);
    std::memcpy(v + static_cast<size_t>(slots[i]) * row, static_cast<const std::byte*>(values) + i * row, row);
  }
  return Status::ok();
}

std::vector<int64_t> slotsOf(std::span<const int32_t> blocks, int64_t first, int64_t n, int32_t blockSize) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(0, n)));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = first + i;
    out[static_cast<size_t>(i)] = static_cast<int64_t>(blocks[static_cast<size_t>(t / blockSize)]) * blockSize + t % blockSize;
  }
  return out;
}

void KvPool::traceMove(uint64_t beginNs, size_t blocks, uint32_t direction) const {
  if (!m_params.ring) return;
  TraceEvent ev;
  ev.beginNs = beginNs;
  ev.endNs = nowNs();
  ev.lane = m_lane;
  ev.stage = TraceStage::KvTransfer;
  ev.arg0 = static_cast<uint32_t>(blocks);
  ev.arg1 = direction;
  m_params.ring->push(ev);
}

void KvPool::copyAcross(Direction d, std::span<const int32_t> from, std::span<const int32_t> to, uint64_t beginNs) {
  const bool toHost = d == Direction::ToHost;
  if (KvComputeStore* store = m_params.computeStore) {
    // The host blocks are rows in memory order, so one block of one layer is one call's rows.
    const auto layerBytes = static_cast<size_t>(m_blockBytesLayer);
    for (size_t i = 0; i < from.size() && m_storeStatus.isOk(); ++i) {
      const int32_t compute = toHost ? from[i] : to[i], host = toHost ? to[i] : from[i];
      const std::vector<int64_t> slots = slotsOf(std::span<const int32_t>(&compute, 1), 0, m_params.blockSize, m_params.blockSize);
      for (int32_t l = 0; l < m_params.layers; ++l) {
        std::byte* hk = m_hostK[static_cast<size_t>(l)].data + layerBytes * static_cast<size_t>(host);
        std::byte* hv = m_hostV[static_cast<size_t>(l)].data + layerBytes * static_cast<size_t>(host);
        keep(toHost ? store->readRows(l, slots, hk, hv) : store->writeRows(l, slots, hk, hv));
      }
    }
  } else {
    for (size_t i = 0; i < from.size(); ++i) {
      copyBetween(toHost ? m_computeK : m_hostK, from[i], toHost ? m_hostK : m_computeK, to[i]);
      copyBetween(toHost ? m_computeV : m_hostV, from[i], toHost ? m_hostV : m_computeV, to[i]);
    }
  }
  const auto n = static_cast<int64_t>(from.size());
  (toHost ? m_moves.blocksToHost : m_moves.blocksToCompute) += n;
  (toHost ? m_moves.bytesToHost : m_moves.bytesToCompute) += m_bytesPerBlock * n;
  traceMove(beginNs, from.size(), toHost ? 1 : 2);
}

std::optional<std::vector<int32_t>> KvPool::copyToHost(std::span<const int32_t> computeBlocks) {
  const uint64_t t0 = nowNs();
  std::optional<std::vector<int32_t>> host = m_host.allocate(static_cast<int32_t>(computeBlocks.size()));
  if (host) copyAcross(Direction::ToHost, computeBlocks, *host, t0);
  return host;
}

std::optional<std::vector<int32_t>> KvPool::copyToCompute(std::span<const int32_t> hostBlocks) {
  const uint64_t t0 = nowNs();
  std::optional<std::vector<int32_t>> compute = allocate(static_cast<int32_t>(hostBlocks.size()));
  if (compute) copyAcross(Direction::ToCompute, hostBlocks, *compute, t0);
  return compute;
}

void* KvPool::keys(int32_t layer) { return m_computeK.empty() ? nullptr : m_computeK[static_cast<size_t>(layer)].data; }
void* KvPool::values(int32_t layer) { return m_computeV.empty() ? nullptr : m_computeV[static_cast<size_t>(layer)].data; }
const void* KvPool::keys(int32_t layer) const {
  return m_computeK.empty() ? nullptr : m_computeK[static_cast<size_t>(layer)].data;
}
const void* KvPool::values(int32_t layer) const {
  return m_computeV.empty() ? nullptr : m_computeV[static_cast<size_t>(layer)].data;
}
const void* KvPool::hostKeys(int32_t layer) const {
  return m_hostK.empty() ? nullptr : m_hostK[static_cast<size_t>(layer)].data;
}
const void* KvPool::hostValues(int32_t layer) const {
  return m_hostV.empty() ? nullptr : m_hostV[static_cast<size_t>(layer)].data;
}

KvPoolStats KvPool::stats() const {
  KvPoolStats s = m_moves;
  s.blockSize = m_params.blockSize;
  s.capacity = m_compute.capacity();
  s.used = m_compute.usedBlocks();
  s.shared = m_compute.sharedBlocks();
  s.bytesPerBlock = m_bytesPerBlock;
  s.hostCapacity = m_host.capacity();
  s.hostUsed = m_host.usedBlocks();
  return s;
}

}  // namespace rag::memory
