// Block-Attention's disk tier: the KV of passage blocks (each passage computed alone at positions
// 0..n-1, Block-Attention §2.1) kept in one file per model, so a restart keeps the hot set.
//
// The memory tier is the prefix cache's block namespace in the KV pool (sched/segment_kv.h): a
// block there is found by its tokens, evicted by the cache's policy, moved to the host tier like
// any cached prefix. This store sits below it: on a miss the builder asks it for the passage, and
// copies a found record's K/V into fresh pool blocks (a real copy, counted); a block computed
// because neither tier had it is handed to put(), and save() writes the file.
//
//   RAG_ASSIGN_OR_RETURN(auto store, BlockStore::open({.file = dir / (fp + ".kvblocks"),
//                                                      .fingerprint = fp, .layers = 4, ...}));
//   if (store->contains(passageId, tokens)) RAG_RETURN_IF_ERROR(store->load(passageId, tokens, pool, blocks));
//   ... store->put(passageId, tokens, pool, blocks); ...
//   RAG_RETURN_IF_ERROR(store->save());  // atomic: temp file, then rename
//
// Keys: the file is per model fingerprint (weights, config, tokenizer and dtype, which the KV
// depends on) and says so in its header; a record is keyed by passage id and holds the passage's
// tokens, which a lookup must match exactly (another tokenizer or passage style gives other
// tokens, so a stale record is never used, only replaced).
//
// File: header (magic "RAGKVBS1", version, fingerprint, shape, record count), then records
// (passage id, token count, last use, tokens, K then V of every layer, FNV-1a checksum of the
// record). open() verifies every checksum: a corrupt or truncated file is refused, moved aside
// to "<file>.corrupt" and the store starts empty, with openReport() saying so. save() keeps the
// most recently used records within maxBytes, checks the free disk space first, and writes a
// temp file renamed over the old one: a kill mid-write leaves the old file intact.
//
// Not thread-safe: the generation worker's thread drives it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/kv_pool.h"
#include "rag/status.h"

namespace rag::memory {

struct BlockStoreParams {
  std::filesystem::path file;
  std::string fingerprint;       // the model's (model::modelFingerprint)
  int32_t layers = 0;
  int32_t kvHeads = 0;
  int32_t headDim = 0;
  int32_t elementBytes = 4;      // of the pool it loads into
  int64_t maxBytes = 512ll << 20;  // what save() keeps, most recently used first
};

struct BlockStoreStats {
  int64_t records = 0;        // in the file and pending
  int64_t bytes = 0;          // their size on disk
  int64_t pending = 0;        // put() since the last save()
  int64_t lookups = 0;        // contains() calls
  int64_t hits = 0;           // ... that found the passage with its tokens
  int64_t loadedTokens = 0;   // tokens copied into the pool by load()
  int64_t saves = 0;
  int64_t droppedOnSave = 0;  // records left out by the maxBytes bound
};

// One record as inspectors show it (BlockStore::records).
struct BlockStoreRecordInfo {
  int64_t passageId = -1;
  int64_t tokens = 0;
  int64_t bytes = 0;      // on disk (recordBytes)
  int64_t hits = 0;       // contains() found it, since open()
  bool pending = false;   // put() since the last save(): not in the file yet
};

class BlockStore {
public:
  // Opens (or starts) the store at params.file. InvalidArgument for a bad shape or an empty
  // fingerprint; IoError when the file exists but cannot be read. A file of another model or
  // layout, or a corrupt or truncated one, is not an error: it is moved aside and reported.
  static Result<std::unique_ptr<BlockStore>> open(const BlockStoreParams& params);
  ~BlockStore();
  BlockStore(const BlockStore&) = delete;
  BlockStore& operator=(const BlockStore&) = delete;

  // True when the store holds `passageId` with exactly these tokens.
  bool contains(int64_t passageId, std::span<const int32_t> tokens);
  // Copies the record's K/V of tokens [from, n) into `blocks` of `pool` (token i into block
  // (i - from) / blockSize, slot (i - from) % blockSize; `from` a multiple of the block size: the
  // prefix cache holds the whole blocks before it, and the store supplies the partial last one).
  // NotFound when contains() would be false; Corrupt when the bytes read back fail their
  // checksum; InvalidArgument when the pool's shape differs, `from` is misaligned or blocks are
  // too few.
  Status load(int64_t passageId, std::span<const int32_t> tokens, KvPool& pool, std::span<const int32_t> blocks,
              int64_t from = 0);
  // Copies the KV of `tokens` (in `blocks` of `pool`) into a pending record, replacing one with
  // the same passage id. InvalidArgument for a pool of another shape.
  Status put(int64_t passageId, std::span<const int32_t> tokens, const KvPool& pool, std::span<const int32_t> blocks);
  // Writes the file (see the file comment). IoError naming both sizes when the disk lacks the
  // room: the old file is then untouched and the records stay pending.
  Status save();

  // What open() found: empty, or why the old file was set aside.
  const std::string& openReport() const { return m_report; }
  BlockStoreStats stats() const;
  // Every record, most recently used first.
  std::vector<BlockStoreRecordInfo> records() const;
  const BlockStoreParams& params() const { return m_params; }
  int64_t recordBytes(int64_t tokens) const;  // on disk, header and checksum included

private:
  explicit BlockStore(const BlockStoreParams& params);
  struct Entry {
    int64_t offset = -1;           // in the file; -1: pending only
    std::vector<int32_t> tokens;
    uint64_t lastUse = 0;
    int64_t hits = 0;                // since open()
    std::vector<std::byte> payload;  // pending records: K then V of every layer
  };
  Status readIndex();
  // The record's K then V; pending records are returned from memory without a copy (`buf` unused).
  Result<std::span<const std::byte>> payloadOf(const Entry& e, std::vector<std::byte>& buf) const;
  int64_t payloadBytes(int64_t tokens) const;

  BlockStoreParams m_params;
  std::FILE* m_file = nullptr;
  std::unordered_map<int64_t, Entry> m_entries;
  uint64_t m_clock = 0;
  std::string m_report;
  // Adds (+1) or removes (-1) an entry's share of BlockStoreStats::bytes and pending.
  void tally(const Entry& e, int sign);
  BlockStoreStats m_stats;  // records, bytes and pending kept as entries come and go
};

}  // namespace rag::memory
