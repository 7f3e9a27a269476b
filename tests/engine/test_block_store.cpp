// Block-Attention's disk tier (memory/block_store.h) over a real KV pool: records round-trip
// bit for bit, a stale or foreign record is never used, a corrupt or truncated file is set aside
// and reported, the size bound keeps the most recently used, and a writer killed mid-save leaves
// the old file intact.
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "memory/block_store.h"
#include "memory/kv_pool.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::memory;

namespace {

constexpr int32_t kLayers = 2, kHeads = 2, kDim = 8, kBlock = 4;

std::unique_ptr<KvPool> makePool(int32_t blocks = 64) {
  auto p = KvPool::create({.layers = kLayers, .kvHeads = kHeads, .headDim = kDim, .blockSize = kBlock, .computeBlocks = blocks});
  if (!p.isOk()) qFatal("%s", p.status().message().c_str());
  return std::move(*p);
}

BlockStoreParams params(const QString& dir, std::string fp = "model-a", int64_t maxBytes = 64 << 20) {
  return {.file = std::filesystem::path(dir.toStdString()) / "m.kvblocks", .fingerprint = std::move(fp),
          .layers = kLayers, .kvHeads = kHeads, .headDim = kDim, .elementBytes = 4, .maxBytes = maxBytes};
}

// Fills `n` tokens' K/V in fresh blocks with values derived from `seed`; returns the blocks.
std::vector<int32_t> fill(KvPool& pool, int64_t n, float seed) {
  auto blocks = *pool.allocate(static_cast<int32_t>((n + kBlock - 1) / kBlock));
  for (int32_t l = 0; l < kLayers; ++l)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = (static_cast<int64_t>(blocks[static_cast<size_t>(i / kBlock)]) * kBlock + i % kBlock) * kHeads * kDim;
      for (int64_t j = 0; j < kHeads * kDim; ++j) {
        static_cast<float*>(pool.keys(l))[row + j] = seed + static_cast<float>(l * 1000 + i * 10 + j);
        static_cast<float*>(pool.values(l))[row + j] = -seed - static_cast<float>(l * 1000 + i * 10 + j);
      }
    }
  return blocks;
}

bool sameKv(const KvPool& pool, std::span<const int32_t> a, std::span<const int32_t> b, int64_t n) {
  for (int32_t l = 0; l < kLayers; ++l)
    for (int64_t i = 0; i < n; ++i) {
      auto row = [&](std::span<const int32_t> bl) {
        return (static_cast<int64_t>(bl[static_cast<size_t>(i / kBlock)]) * kBlock + i % kBlock) * kHeads * kDim;
      };
      const size_t bytes = kHeads * kDim * sizeof(float);
      if (std::memcmp(static_cast<const float*>(pool.keys(l)) + row(a), static_cast<const float*>(pool.keys(l)) + row(b), bytes) ||
          std::memcmp(static_cast<const float*>(pool.values(l)) + row(a), static_cast<const float*>(pool.values(l)) + row(b), bytes))
        return false;
    }
  return true;
}

const std::vector<int32_t> kTokens = {5, 6, 7, 8, 9, 10};

}  // namespace

class TestBlockStore : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void recordsRoundTripThroughTheFile() {
    QTemporaryDir dir;
    auto pool = makePool();
    const std::vector<int32_t> src = fill(*pool, 6, 1.5f);
    {
      auto s = BlockStore::open(params(dir.path()));
      QVERIFY(s.isOk());
      QVERIFY((*s)->put(42, kTokens, *pool, src).isOk());
      QVERIFY((*s)->contains(42, kTokens));  // pending records serve too
      QVERIFY((*s)->save().isOk());
    }
    auto s = BlockStore::open(params(dir.path()));
    QVERIFY(s.isOk());
    QVERIFY((*s)->openReport().empty());
    QCOMPARE((*s)->stats().records, int64_t{1});
    QCOMPARE((*s)->stats().pending, int64_t{0});
    // Other tokens for the same passage (another tokenizer or style): not a hit.
    QVERIFY(!(*s)->contains(42, std::vector<int32_t>{5, 6, 7}));
    QVERIFY(!(*s)->contains(43, kTokens));
    QVERIFY((*s)->contains(42, kTokens));
    const std::vector<int32_t> dst = *pool->allocate(2);
    QVERIFY((*s)->load(42, kTokens, *pool, dst).isOk());
    QVERIFY(sameKv(*pool, src, dst, 6));
    QCOMPARE((*s)->stats().loadedTokens, int64_t{6});
    QCOMPARE((*s)->load(43, kTokens, *pool, dst).code(), StatusCode::NotFound);
  }

  // What an inspector lists: every record, most recently used first, with its hits since open
  // and whether it is in the file yet.
  void recordsListMostRecentFirst() {
    QTemporaryDir dir;
    auto pool = makePool();
    auto s = BlockStore::open(params(dir.path()));
    QVERIFY(s.isOk());
    QVERIFY((*s)->put(1, kTokens, *pool, fill(*pool, 6, 1.f)).isOk());
    QVERIFY((*s)->put(2, kTokens, *pool, fill(*pool, 6, 2.f)).isOk());
    QVERIFY((*s)->contains(1, kTokens));
    QVERIFY((*s)->contains(1, kTokens));
    std::vector<BlockStoreRecordInfo> r = (*s)->records();
    QCOMPARE(r.size(), size_t(2));
    QCOMPARE(r[0].passageId, int64_t{1});  // used last
    QCOMPARE(r[0].hits, int64_t{2});
    QCOMPARE(r[1].hits, int64_t{0});
    QCOMPARE(r[0].tokens, static_cast<int64_t>(kTokens.size()));
    QCOMPARE(r[0].bytes, (*s)->recordBytes(static_cast<int64_t>(kTokens.size())));
    QVERIFY(r[0].pending && r[1].pending);
    QVERIFY((*s)->save().isOk());
    r = (*s)->records();
    QVERIFY(!r[0].pending && !r[1].pending);
  }

  void badParametersAreRefused() {
    QTemporaryDir dir;
    QCOMPARE(BlockStore::open(params(dir.path(), "")).status().code(), StatusCode::InvalidArgument);
    BlockStoreParams p = params(dir.path());
    p.elementBytes = 3;
    QCOMPARE(BlockStore::open(p).status().code(), StatusCode::InvalidArgument);
    // A pool of another shape is refused, not misread.
    auto s = BlockStore::open(params(dir.path()));
    auto other = KvPool::create({.layers = 1, .kvHeads = kHeads, .headDim = kDim, .blockSize = kBlock, .computeBlocks = 8});
    QVERIFY(other.isOk());
    const std::vector<int32_t> b = *(*other)->allocate(2);
    QCOMPARE((*s)->put(1, kTokens, **other, b).code(), StatusCode::InvalidArgument);
  }

  void aCorruptOrTruncatedFileIsSetAsideAndReported() {
    for (const bool truncate : {false, true}) {
      QTemporaryDir dir;
      auto pool = makePool();
      {
        auto s = BlockStore::open(params(dir.path()));
        QVERIFY((*s)->put(1, kTokens, *pool, fill(*pool, 6, 0.f)).isOk());
        QVERIFY((*s)->put(2, kTokens, *pool, fill(*pool, 6, 9.f)).isOk());
        QVERIFY((*s)->save().isOk());
      }
      const std::filesystem::path file = params(dir.path()).file;
      const auto size = std::filesystem::file_size(file);
      if (truncate) {
        std::filesystem::resize_file(file, size - 100);
      } else {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(size - 300));
        f.put('\x7f');
      }
      auto s = BlockStore::open(params(dir.path()));
      QVERIFY(s.isOk());
      const std::string& report = (*s)->openReport();
      QVERIFY2(report.find(truncate ? "truncated" : "checksum") != std::string::npos, report.c_str());
      QCOMPARE((*s)->stats().records, int64_t{0});
      QVERIFY(std::filesystem::exists(file.string() + ".corrupt"));
      // Rebuilt: it works again from empty.
      QVERIFY((*s)->put(3, kTokens, *pool, fill(*pool, 6, 3.f)).isOk());
      QVERIFY((*s)->save().isOk());
      QCOMPARE((*BlockStore::open(params(dir.path())))->stats().records, int64_t{1});
    }
  }

  void theSizeBoundKeepsTheMostRecentlyUsed() {
    QTemporaryDir dir;
    auto pool = makePool();
    auto s = BlockStore::open(params(dir.path(), "model-a", 0));
    const int64_t one = (*s)->recordBytes(6);
    s = BlockStore::open(params(dir.path(), "model-a", 2 * one));
    for (int64_t id = 1; id <= 3; ++id) QVERIFY((*s)->put(id, kTokens, *pool, fill(*pool, 6, static_cast<float>(id))).isOk());
    QVERIFY((*s)->contains(1, kTokens));  // 1 is now more recent than 2
    QVERIFY((*s)->save().isOk());
    QCOMPARE((*s)->stats().records, int64_t{2});
    QCOMPARE((*s)->stats().droppedOnSave, int64_t{1});
    QVERIFY((*s)->contains(1, kTokens));
    QVERIFY((*s)->contains(3, kTokens));
    QVERIFY(!(*s)->contains(2, kTokens));
  }

  void aWriterKilledMidSaveLeavesTheOldFileIntact() {
    QTemporaryDir dir;
    auto pool = makePool(4096);
    {
      auto s = BlockStore::open(params(dir.path(), "model-a", 1ll << 30));
      QVERIFY((*s)->put(1, kTokens, *pool, fill(*pool, 6, 1.f)).isOk());
      QVERIFY((*s)->save().isOk());
    }
    // A child adds many large records and saves; it is killed at increasing delays (before,
    // during or after its write). The file is always the old one or the new one, never damaged.
    std::vector<int32_t> big(4000);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int32_t>(i);
    const std::vector<int32_t> blocks = fill(*pool, 4000, 2.f);
    int sawOld = 0, sawNew = 0;
    for (int delayMs : {1, 3, 10, 30, 100, 1000}) {
      const pid_t child = ::fork();
      if (child == 0) {
        auto s = BlockStore::open(params(dir.path(), "model-a", 1ll << 30));
        for (int64_t id = 100; id < 140; ++id) (void)(*s)->put(id, big, *pool, blocks);
        (void)(*s)->save();
        ::_exit(0);
      }
      ::usleep(static_cast<useconds_t>(delayMs) * 1000);
      ::kill(child, SIGKILL);
      int st = 0;
      ::waitpid(child, &st, 0);
      auto s = BlockStore::open(params(dir.path(), "model-a", 1ll << 30));
      QVERIFY(s.isOk());
      QVERIFY2((*s)->openReport().empty(), (*s)->openReport().c_str());
      const int64_t records = (*s)->stats().records;
      QVERIFY(records == 1 || records == 41);
      (records == 1 ? sawOld : sawNew)++;
      if (records == 41) break;
    }
    QVERIFY(sawOld > 0);
    // The next save clears the temp files the killed writers left.
    auto s = BlockStore::open(params(dir.path(), "model-a", 1ll << 30));
    QVERIFY((*s)->put(2, kTokens, *pool, fill(*pool, 6, 5.f)).isOk());
    QVERIFY((*s)->save().isOk());
    for (const auto& e : std::filesystem::directory_iterator(dir.path().toStdString()))
      QVERIFY2(e.path().filename().string().find(".tmp-") == std::string::npos, e.path().c_str());
  }
};

QTEST_GUILESS_MAIN(TestBlockStore)
#include "test_block_store.moc"
