// The two-tier KV pool: allocation, the reclaimer inside allocate, and tier moves that copy the
// K/V of every layer bit for bit.
#include <QtTest>

#include <cstring>
#include <numeric>

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
