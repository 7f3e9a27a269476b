// The two-tier KV pool: allocation, the reclaimer inside allocate, tier moves that copy the K/V of
// every layer bit for bit, row access, and a compute tier held by a KvComputeStore (a GPU's in the
// runner; a vector-backed store here) through which every copy and row transfer goes.
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "memory/kv_pool.h"
#include "rag/trace.h"
#include "status_checks.h"
#include "telemetry/trace_ring.h"

using namespace rag::memory;

namespace {

KvPoolParams small(int32_t compute, int32_t host) {
  return {.layers = 2, .kvHeads = 2, .headDim = 4, .blockSize = 4, .computeBlocks = compute, .hostBlocks = host};
}

// Fills block b of every layer (K and V) with values that name the layer, the tensor and the block.
void fill(KvPool& pool, int32_t b, float salt) {
  const int64_t perBlock = 4 * 2 * 4;  // blockSize * kvHeads * headDim
  for (int32_t l = 0; l < 2; ++l) {
    auto* k = static_cast<float*>(pool.keys(l)) + b * perBlock;
    auto* v = static_cast<float*>(pool.values(l)) + b * perBlock;
    for (int64_t i = 0; i < perBlock; ++i) {
      k[i] = salt + static_cast<float>(l * 1000 + i) + 0.25f;
      v[i] = -salt - static_cast<float>(l * 1000 + i) - 0.5f;
    }
  }
}

bool sameBlock(const KvPool& pool, int32_t a, int32_t b) {
  const size_t bytes = 4 * 2 * 4 * sizeof(float);
  for (int32_t l = 0; l < 2; ++l) {
    auto* k = static_cast<const std::byte*>(pool.keys(l));
    auto* v = static_cast<const std::byte*>(pool.values(l));
    if (std::memcmp(k + a * bytes, k + b * bytes, bytes) != 0 || std::memcmp(v + a * bytes, v + b * bytes, bytes) != 0)
      return false;
  }
  return true;
}

// The compute tier in vectors of its own, counting what the pool asks of it; `fail` makes every
// call fail from then on (as a device error would).
class VectorStore final : public KvComputeStore {
public:
  VectorStore(int32_t layers, int64_t slots, int64_t row, int32_t blockSize)
      : m_row(row), m_blockSize(blockSize), k(static_cast<size_t>(layers)), v(static_cast<size_t>(layers)) {
    for (int32_t l = 0; l < layers; ++l) {
      k[static_cast<size_t>(l)].assign(static_cast<size_t>(slots * row), 0.0f);
      v[static_cast<size_t>(l)].assign(static_cast<size_t>(slots * row), 0.0f);
    }
  }
  rag::Status copyBlock(int32_t from, int32_t to) override {
    ++copies;
    if (fail) return rag::Status::internal("device lost");
    const int64_t n = m_blockSize * m_row;
    for (auto* t : {&k, &v})
      for (std::vector<float>& layer : *t) std::copy_n(layer.begin() + from * n, n, layer.begin() + to * n);
    return rag::Status::ok();
  }
  rag::Status readRows(int32_t layer, std::span<const int64_t> slots, void* keys, void* values) const override {
    ++reads;
    if (fail) return rag::Status::internal("device lost");
    for (size_t i = 0; i < slots.size(); ++i) {
      std::copy_n(k[static_cast<size_t>(layer)].begin() + slots[i] * m_row, m_row, static_cast<float*>(keys) + static_cast<int64_t>(i) * m_row);
      std::copy_n(v[static_cast<size_t>(layer)].begin() + slots[i] * m_row, m_row, static_cast<float*>(values) + static_cast<int64_t>(i) * m_row);
    }
    return rag::Status::ok();
  }
  rag::Status writeRows(int32_t layer, std::span<const int64_t> slots, const void* keys, const void* values) override {
    ++writes;
    if (fail) return rag::Status::internal("device lost");
    for (size_t i = 0; i < slots.size(); ++i) {
      std::copy_n(static_cast<const float*>(keys) + static_cast<int64_t>(i) * m_row, m_row, k[static_cast<size_t>(layer)].begin() + slots[i] * m_row);
      std::copy_n(static_cast<const float*>(values) + static_cast<int64_t>(i) * m_row, m_row, v[static_cast<size_t>(layer)].begin() + slots[i] * m_row);
    }
    return rag::Status::ok();
  }

  int64_t m_row;
  int32_t m_blockSize;
  std::vector<std::vector<float>> k, v;
  mutable int reads = 0;
  int writes = 0, copies = 0;
  bool fail = false;
};

// Rows of `n` slots of one layer whose values name the layer, the slot and a salt.
std::vector<float> rowsOf(int64_t n, int64_t row, float salt) {
  std::vector<float> out(static_cast<size_t>(n * row));
  std::iota(out.begin(), out.end(), salt);
  return out;
}

}  // namespace

class TestKvPool : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void refusesPoolsBelowOneBlock() {
    auto none = KvPool::create(small(0, 4));
    QVERIFY(!none.isOk());
    QVERIFY(mentions(none.status(), {"compute tier", "raise the KV budget"}));
    auto negative = KvPool::create(small(4, -1));
    QVERIFY(!negative.isOk());
    QVERIFY(mentions(negative.status(), {"host", "0 for no host tier"}));
    auto ok = KvPool::create(small(4, 0));
    QVERIFY(ok.isOk());
    QVERIFY(!(*ok)->hasHostTier());
    QCOMPARE((*ok)->bytesPerBlock(), int64_t{2 * 2 * 4 * 2 * 4 * 4});  // K+V x layers x block x heads x dim x 4 B
  }

  void allocateAsksTheReclaimerForTheShortfallOnly() {
    auto pool = std::move(*KvPool::create(small(4, 0)));
    auto held = pool->allocate(4);
    QVERIFY(held.has_value());
    int32_t asked = -1;
    pool->setReclaimer([&](int32_t shortfall) {
      asked = shortfall;
      pool->release((*held)[0]);
      pool->release((*held)[1]);
      return 2;
    });
    auto two = pool->allocate(2);
    QVERIFY(two.has_value());
    QCOMPARE(asked, 2);
    QCOMPARE(pool->stats().reclaimedBlocks, int64_t{2});
    // Nothing left to reclaim: all or nothing, and the reclaimer's 0 is honoured.
    pool->setReclaimer([](int32_t) { return 0; });
    QVERIFY(!pool->allocate(1).has_value());
    QCOMPARE(pool->stats().used, 4);
  }

  void tierMovesRoundTripBitExact() {
    rag::TraceRing ring(64);
    KvPoolParams p = small(5, 3);
    p.ring = &ring;
    auto pool = std::move(*KvPool::create(p));
    auto blocks = *pool->allocate(2);
    fill(*pool, blocks[0], 1.0f);
    fill(*pool, blocks[1], 7.0f);
    auto host = pool->copyToHost(blocks);
    QVERIFY(host.has_value());
    QCOMPARE(pool->stats().hostUsed, 2);
    // Overwrite the compute copies, then bring the host copies back into fresh blocks.
    fill(*pool, blocks[0], 50.0f);
    fill(*pool, blocks[1], 60.0f);
    auto back = pool->copyToCompute(*host);
    QVERIFY(back.has_value());
    auto reference = *pool->allocate(1);
    fill(*pool, reference[0], 1.0f);
    QVERIFY(sameBlock(*pool, (*back)[0], reference[0]));
    fill(*pool, reference[0], 7.0f);
    QVERIFY(sameBlock(*pool, (*back)[1], reference[0]));
    QVERIFY(!sameBlock(*pool, (*back)[0], blocks[0]));
    const KvPoolStats s = pool->stats();
    QCOMPARE(s.blocksToHost, int64_t{2});
    QCOMPARE(s.blocksToCompute, int64_t{2});
    QCOMPARE(s.bytesToHost, 2 * pool->bytesPerBlock());
    QCOMPARE(s.bytesToCompute, 2 * pool->bytesPerBlock());
    // Each move is one KvTransfer span with its direction.
    std::vector<rag::TraceEvent> events;
    ring.drain(events);
    QCOMPARE(events.size(), size_t{2});
    QCOMPARE(events[0].stage, rag::TraceStage::KvTransfer);
    QCOMPARE(events[0].arg0, 2u);
    QCOMPARE(events[0].arg1, 1u);
    QCOMPARE(events[1].arg1, 2u);
  }

  void hostTierFullRefusesWholeMoves() {
    auto pool = std::move(*KvPool::create(small(4, 1)));
    auto blocks = *pool->allocate(2);
    QVERIFY(!pool->copyToHost(blocks).has_value());  // two blocks, one host block: nothing moves
    QCOMPARE(pool->stats().hostUsed, 0);
    QVERIFY(pool->copyToHost(std::span<const int32_t>(blocks).first(1)).has_value());
  }

  void rowsRoundTripThroughHostMemory() {
    auto pool = std::move(*KvPool::create(small(3, 0)));
    const int64_t row = 2 * 4;  // kvHeads * headDim
    QCOMPARE(pool->rowBytes(), row * int64_t{sizeof(float)});
    // Tokens 2..5 of a sequence on blocks {2, 0}: slots 10, 11, 0, 1.
    const std::vector<int32_t> table{2, 0};
    const std::vector<int64_t> slots = slotsOf(table, 2, 4, 4);
    QCOMPARE(slots, (std::vector<int64_t>{10, 11, 0, 1}));
    const std::vector<float> k = rowsOf(4, row, 1.0f), v = rowsOf(4, row, -100.0f);
    QVERIFY_OK(pool->writeRows(1, slots, k.data(), v.data()));
    // In place where keys() says: slot 10 of layer 1 is k's first row.
    QCOMPARE(static_cast<const float*>(pool->keys(1))[10 * row], 1.0f);
    QCOMPARE(static_cast<const float*>(pool->values(1))[1 * row + 7], v[3 * row + 7]);
    std::vector<float> k2(k.size()), v2(v.size());
    QVERIFY_OK(pool->readRows(1, slots, k2.data(), v2.data()));
    QCOMPARE(k2, k);
    QCOMPARE(v2, v);
    // A slot or layer outside the pool is refused, naming it.
    const std::vector<int64_t> outside{12};
    const rag::Status s = pool->readRows(0, outside, k2.data(), v2.data());
    QCOMPARE(s.code(), rag::StatusCode::InvalidArgument);
    QVERIFY(s.message().find("slot 12") != std::string::npos);
    QCOMPARE(pool->writeRows(2, slots, k.data(), v.data()).code(), rag::StatusCode::InvalidArgument);
  }

  void aComputeStoreHoldsTheComputeTier() {
    KvPoolParams p = small(4, 2);
    const int64_t row = 2 * 4;
    VectorStore store(p.layers, int64_t{4} * p.blockSize, row, p.blockSize);
    p.computeStore = &store;
    auto pool = std::move(*KvPool::create(p));
    QVERIFY(pool->keys(0) == nullptr);  // no host copy of the compute tier
    QVERIFY(pool->values(1) == nullptr);
    auto b = *pool->allocate(2);
    // Rows written through the pool land in the store.
    const std::vector<int64_t> slots = slotsOf(b, 0, 4, p.blockSize);  // all of block b[0]
    const std::vector<float> k = rowsOf(4, row, 5.0f), v = rowsOf(4, row, 50.0f);
    for (int32_t l = 0; l < p.layers; ++l) QVERIFY_OK(pool->writeRows(l, slots, k.data(), v.data()));
    QCOMPARE(store.writes, 2);
    QCOMPARE(store.k[1][static_cast<size_t>(slots[0] * row)], 5.0f);
    // Copy-on-write is the store's copy.
    pool->copyBlock(b[0], b[1]);
    QCOMPARE(store.copies, 1);
    std::vector<float> k2(k.size()), v2(v.size());
    QVERIFY_OK(pool->readRows(0, slotsOf(b, 4, 4, p.blockSize), k2.data(), v2.data()));  // block b[1]
    QCOMPARE(k2, k);
    QCOMPARE(v2, v);
    // Tier moves read the block out of the store and write it back into a fresh block.
    auto host = pool->copyToHost(std::span<const int32_t>(b).first(1));
    QVERIFY(host.has_value());
    std::fill(store.k[0].begin(), store.k[0].end(), 0.0f);  // the compute copy is gone
    std::fill(store.v[0].begin(), store.v[0].end(), 0.0f);
    auto back = pool->copyToCompute(*host);
    QVERIFY(back.has_value());
    QVERIFY_OK(pool->readRows(0, slotsOf(*back, 0, 4, p.blockSize), k2.data(), v2.data()));
    QCOMPARE(k2, k);
    QCOMPARE(v2, v);
    QCOMPARE(pool->stats().blocksToCompute, int64_t{1});
    QVERIFY_OK(pool->storeStatus());
    // A failure in a call that returns no Status stays in storeStatus; later successes keep it.
    store.fail = true;
    pool->copyBlock(b[0], b[1]);
    store.fail = false;
    pool->copyBlock(b[0], b[1]);
    QCOMPARE(pool->storeStatus().code(), rag::StatusCode::Internal);
    QVERIFY(pool->storeStatus().message().find("device lost") != std::string::npos);
    // Slots are checked before the store is asked.
    const int reads = store.reads;
    const std::vector<int64_t> outside{16};
    QCOMPARE(pool->readRows(0, outside, k2.data(), v2.data()).code(), rag::StatusCode::InvalidArgument);
    QCOMPARE(store.reads, reads);
  }

  void copyOnWriteCopiesEveryLayer() {
    auto pool = std::move(*KvPool::create(small(3, 0)));
    auto b = *pool->allocate(2);
    fill(*pool, b[0], 3.0f);
    QVERIFY(!sameBlock(*pool, b[0], b[1]));
    pool->copyBlock(b[0], b[1]);
    QVERIFY(sameBlock(*pool, b[0], b[1]));
  }
};

QTEST_GUILESS_MAIN(TestKvPool)
#include "test_kv_pool.moc"
