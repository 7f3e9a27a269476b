#include "memory/block_store.h"

#include <signal.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/fs.h"
#include "core/hash.h"

namespace fs = std::filesystem;

namespace rag::memory {

namespace {

constexpr char kMagic[8] = {'R', 'A', 'G', 'K', 'V', 'B', 'S', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxFingerprint = 256;
constexpr int32_t kMaxTokens = 1 << 20;

struct RecordHead {
  int64_t passageId;
  int32_t tokens;
  uint32_t reserved;
  uint64_t lastUse;
};
static_assert(sizeof(RecordHead) == 24);

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};

// "<file>.tmp-<pid>" files of writers no longer running (killed mid-save): up to a store's size each.
void removeOrphanTemps(const fs::path& file) {
  const std::string prefix = file.filename().string() + ".tmp-";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(file.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

}  // namespace

BlockStore::BlockStore(const BlockStoreParams& params) : m_params(params) {}

BlockStore::~BlockStore() {
  if (m_file) std::fclose(m_file);
}

int64_t BlockStore::payloadBytes(int64_t tokens) const {
  return 2ll * m_params.layers * tokens * m_params.kvHeads * m_params.headDim * m_params.elementBytes;
}

int64_t BlockStore::recordBytes(int64_t tokens) const {
  return static_cast<int64_t>(sizeof(RecordHead)) + tokens * 4 + payloadBytes(tokens) + 8;
}

Result<std::unique_ptr<BlockStore>> BlockStore::open(const BlockStoreParams& params) {
  if (params.fingerprint.empty() || params.fingerprint.size() > kMaxFingerprint)
    return Status::invalidArgument("a block store needs the model's fingerprint (1 to 256 bytes)");
  if (params.layers < 1 || params.kvHeads < 1 || params.headDim < 1 ||
      (params.elementBytes != 2 && params.elementBytes != 4))
    return Status::invalidArgument("a block store needs the model's KV shape (layers, KV heads, head size >= 1; "
                                   "2 or 4 bytes an element)");
  if (params.maxBytes < 0) return Status::invalidArgument("the block store's size bound must be >= 0 bytes");
  std::unique_ptr<BlockStore> s(new BlockStore(params));
  std::error_code ec;
  if (!fs::exists(params.file, ec)) return s;
  Status st = s->readIndex();
  if (st.code() == StatusCode::IoError) return st;
  if (!st.isOk()) {  // another model's file, or a damaged one: set aside, start empty, say so
    if (s->m_file) std::fclose(s->m_file);
    s->m_file = nullptr;
    s->m_entries.clear();
    s->m_stats = {};
    fs::path aside = params.file;
    aside += ".corrupt";
    fs::rename(params.file, aside, ec);
    s->m_report = "the block store " + params.file.string() + " was not used (" + st.message() +
                  "); it was moved to " + aside.string() + " and the store starts empty";
  }
  return s;
}

Status BlockStore::readIndex() {
  m_file = std::fopen(m_params.file.c_str(), "rb");
  if (!m_file) return Status::ioError("cannot read the block store " + m_params.file.string() + ": " + std::strerror(errno));
  auto corrupt = [&](const std::string& why) { return Status::corrupt(why); };
  char magic[8];
  uint32_t version = 0, fpBytes = 0;
  if (std::fread(magic, 1, 8, m_file) != 8 || std::memcmp(magic, kMagic, 8) != 0) return corrupt("not a block store file");
  if (std::fread(&version, 4, 1, m_file) != 1 || version != kVersion)
    return corrupt("block store version " + std::to_string(version) + ", this build reads " + std::to_string(kVersion));
  if (std::fread(&fpBytes, 4, 1, m_file) != 1 || fpBytes == 0 || fpBytes > kMaxFingerprint)
    return corrupt("bad fingerprint length");
  std::string fp(fpBytes, '\0');
  int32_t shape[4];
  uint64_t count = 0;
  if (std::fread(fp.data(), 1, fpBytes, m_file) != fpBytes || std::fread(shape, 4, 4, m_file) != 4 ||
      std::fread(&count, 8, 1, m_file) != 1)
    return corrupt("truncated header");
  if (fp != m_params.fingerprint) return corrupt("it holds the KV of model " + fp + ", not of " + m_params.fingerprint);
  if (shape[0] != m_params.layers || shape[1] != m_params.kvHeads || shape[2] != m_params.headDim ||
      shape[3] != m_params.elementBytes)
    return corrupt("its KV shape differs from the model's");
  std::vector<std::byte> buf;
  for (uint64_t r = 0; r < count; ++r) {
    const long offset = std::ftell(m_file);
    RecordHead head{};
    if (std::fread(&head, sizeof head, 1, m_file) != 1) return corrupt("truncated after " + std::to_string(r) + " records");
    if (head.tokens < 1 || head.tokens > kMaxTokens) return corrupt("record " + std::to_string(r) + " has a bad length");
    const size_t body = static_cast<size_t>(head.tokens) * 4 + static_cast<size_t>(payloadBytes(head.tokens));
    buf.resize(body);
    uint64_t sum = 0;
    if (std::fread(buf.data(), 1, body, m_file) != body || std::fread(&sum, 8, 1, m_file) != 1)
      return corrupt("truncated after " + std::to_string(r) + " records");
    if (fnv1a(buf.data(), body, fnv1a(&head, sizeof head)) != sum)
      return corrupt("record " + std::to_string(r) + " fails its checksum");
    Entry e;
    e.offset = offset;
    e.tokens.resize(static_cast<size_t>(head.tokens));
    std::memcpy(e.tokens.data(), buf.data(), e.tokens.size() * 4);
    e.lastUse = head.lastUse;
    m_clock = std::max(m_clock, head.lastUse);
    if (auto old = m_entries.find(head.passageId); old != m_entries.end()) tally(old->second, -1);
    tally(e, +1);
    m_entries[head.passageId] = std::move(e);
  }
  return Status::ok();
}

bool BlockStore::contains(int64_t passageId, std::span<const int32_t> tokens) {
  ++m_stats.lookups;
  auto it = m_entries.find(passageId);
  if (it == m_entries.end() || !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(), it->second.tokens.end()))
    return false;
  ++m_stats.hits;
  ++it->second.hits;
  it->second.lastUse = ++m_clock;
  return true;
}

std::vector<BlockStoreRecordInfo> BlockStore::records() const {
  std::vector<std::pair<uint64_t, BlockStoreRecordInfo>> order;
  order.reserve(m_entries.size());
  for (const auto& [id, e] : m_entries) {
    const auto n = static_cast<int64_t>(e.tokens.size());
    order.push_back({e.lastUse, {id, n, recordBytes(n), e.hits, e.offset < 0}});
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<BlockStoreRecordInfo> out;
  out.reserve(order.size());
  for (auto& o : order) out.push_back(o.second);
  return out;
}

Result<std::span<const std::byte>> BlockStore::payloadOf(const Entry& e, std::vector<std::byte>& buf) const {
  if (e.offset < 0) return std::span<const std::byte>(e.payload);
  const auto n = static_cast<int64_t>(e.tokens.size());
  RecordHead head{};
  const size_t body = static_cast<size_t>(n) * 4 + static_cast<size_t>(payloadBytes(n));
  buf.resize(body);
  uint64_t sum = 0;
  if (std::fseek(m_file, e.offset, SEEK_SET) != 0 || std::fread(&head, sizeof head, 1, m_file) != 1 ||
      std::fread(buf.data(), 1, body, m_file) != body || std::fread(&sum, 8, 1, m_file) != 1)
    return Status::ioError("cannot read a record of the block store " + m_params.file.string());
  if (fnv1a(buf.data(), body, fnv1a(&head, sizeof head)) != sum)
    return Status::corrupt("a record of the block store " + m_params.file.string() + " changed on disk (checksum)");
  return std::span<const std::byte>(buf).subspan(static_cast<size_t>(n) * 4);
}

namespace {

// The payload holds K then V of every layer, token rows in order: [2][layers][tokens][row].
// Layer l's keys of tokens [from, tokens) start at this byte (values: kv = 1).
int64_t payloadAt(const KvPoolParams& pp, int64_t tokens, int kv, int32_t l, int64_t from, int64_t rowBytes) {
  return ((kv * pp.layers + l) * tokens + from) * rowBytes;
}

}  // namespace

Status BlockStore::load(int64_t passageId, std::span<const int32_t> tokens, KvPool& pool, std::span<const int32_t> blocks,
                        int64_t from) {
  auto it = m_entries.find(passageId);
  if (it == m_entries.end() || !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(), it->second.tokens.end()))
    return Status::notFound("the block store has no block for passage " + std::to_string(passageId) + " with these tokens");
  const KvPoolParams& pp = pool.params();
  if (pp.layers != m_params.layers || pp.kvHeads != m_params.kvHeads || pp.headDim != m_params.headDim ||
      pp.elementBytes != m_params.elementBytes)
    return Status::invalidArgument("the KV pool's shape differs from the block store's");
  const auto n = static_cast<int64_t>(tokens.size());
  if (from < 0 || from > n || from % pp.blockSize != 0)
    return Status::invalidArgument("a stored block is loaded from a whole block boundary (got token " + std::to_string(from) + ")");
  if (static_cast<int64_t>(blocks.size()) * pp.blockSize < n - from)
    return Status::invalidArgument("too few pool blocks for the stored block of passage " + std::to_string(passageId));
  std::vector<std::byte> buf;
  RAG_ASSIGN_OR_RETURN(std::span<const std::byte> payload, payloadOf(it->second, buf));
  // Rows [from, n) go to `blocks` from its first slot.
  const std::vector<int64_t> slots = slotsOf(blocks, 0, n - from, pp.blockSize);
  for (int32_t l = 0; l < pp.layers; ++l)
    RAG_RETURN_IF_ERROR(pool.writeRows(l, slots, payload.data() + payloadAt(pp, n, 0, l, from, pool.rowBytes()),
                                       payload.data() + payloadAt(pp, n, 1, l, from, pool.rowBytes())));
  m_stats.loadedTokens += n - from;
  return Status::ok();
}

Status BlockStore::put(int64_t passageId, std::span<const int32_t> tokens, const KvPool& pool,
                       std::span<const int32_t> blocks) {
  const KvPoolParams& pp = pool.params();
  if (pp.layers != m_params.layers || pp.kvHeads != m_params.kvHeads || pp.headDim != m_params.headDim ||
      pp.elementBytes != m_params.elementBytes)
    return Status::invalidArgument("the KV pool's shape differs from the block store's");
  const auto n = static_cast<int64_t>(tokens.size());
  if (n < 1 || n > kMaxTokens || static_cast<int64_t>(blocks.size()) * pp.blockSize < n)
    return Status::invalidArgument("a stored block needs 1 to 2^20 tokens and the blocks that hold them");
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.lastUse = ++m_clock;
  e.payload.resize(static_cast<size_t>(payloadBytes(n)));
  const std::vector<int64_t> slots = slotsOf(blocks, 0, n, pp.blockSize);
  for (int32_t l = 0; l < pp.layers; ++l)
    RAG_RETURN_IF_ERROR(pool.readRows(l, slots, e.payload.data() + payloadAt(pp, n, 0, l, 0, pool.rowBytes()),
                                      e.payload.data() + payloadAt(pp, n, 1, l, 0, pool.rowBytes())));
  if (auto old = m_entries.find(passageId); old != m_entries.end()) tally(old->second, -1);
  tally(e, +1);
  m_entries[passageId] = std::move(e);
  return Status::ok();
}

Status BlockStore::save() {
  // The records kept: most recently used first, within maxBytes.
  std::vector<std::pair<int64_t, Entry*>> order;
  for (auto& [id, e] : m_entries) order.push_back({id, &e});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second->lastUse > b.second->lastUse; });
  int64_t bytes = 0;
  size_t keep = 0;
  for (; keep < order.size(); ++keep) {
    const int64_t r = recordBytes(static_cast<int64_t>(order[keep].second->tokens.size()));
    if (bytes + r > m_params.maxBytes) break;
    bytes += r;
  }
  const size_t dropped = order.size() - keep;
  order.resize(keep);

  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(m_params.file));
  removeOrphanTemps(m_params.file);
  const int64_t total = bytes + 64 + static_cast<int64_t>(m_params.fingerprint.size());
  struct statvfs vfs{};
  if (::statvfs(staged.temp.parent_path().c_str(), &vfs) == 0) {
    const auto avail = static_cast<int64_t>(vfs.f_bavail) * static_cast<int64_t>(vfs.f_frsize);
    if (total > avail)
      return Status::ioError("the block store needs " + std::to_string(total >> 20) + " MiB but " +
                             staged.temp.parent_path().string() + " has " + std::to_string(avail >> 20) +
                             " MiB free; free some space or lower the store's size bound (--max-mb)");
  }
  std::unique_ptr<std::FILE, FileCloser> out(std::fopen(staged.temp.c_str(), "wb"));
  if (!out) return Status::ioError("cannot write " + staged.temp.string() + ": " + std::strerror(errno));
  const auto fpBytes = static_cast<uint32_t>(m_params.fingerprint.size());
  const int32_t shape[4] = {m_params.layers, m_params.kvHeads, m_params.headDim, m_params.elementBytes};
  const uint64_t count = order.size();
  bool ok = std::fwrite(kMagic, 1, 8, out.get()) == 8 && std::fwrite(&kVersion, 4, 1, out.get()) == 1 &&
            std::fwrite(&fpBytes, 4, 1, out.get()) == 1 &&
            std::fwrite(m_params.fingerprint.data(), 1, fpBytes, out.get()) == fpBytes &&
            std::fwrite(shape, 4, 4, out.get()) == 4 && std::fwrite(&count, 8, 1, out.get()) == 1;
  std::vector<int64_t> offsets;
  for (size_t i = 0; ok && i < order.size(); ++i) {
    const Entry& e = *order[i].second;
    std::vector<std::byte> buf;
    Result<std::span<const std::byte>> payload = payloadOf(e, buf);
    if (!payload) {
      discardStagedOutput(staged);
      return payload.status();
    }
    RecordHead head{order[i].first, static_cast<int32_t>(e.tokens.size()), 0, e.lastUse};
    uint64_t sum = fnv1a(&head, sizeof head);
    sum = fnv1a(e.tokens.data(), e.tokens.size() * 4, sum);
    sum = fnv1a(payload->data(), payload->size(), sum);
    offsets.push_back(std::ftell(out.get()));
    ok = std::fwrite(&head, sizeof head, 1, out.get()) == 1 &&
         std::fwrite(e.tokens.data(), 4, e.tokens.size(), out.get()) == e.tokens.size() &&
         std::fwrite(payload->data(), 1, payload->size(), out.get()) == payload->size() &&
         std::fwrite(&sum, 8, 1, out.get()) == 1;
  }
  ok = ok && std::fflush(out.get()) == 0;
  out.reset();
  if (!ok) {
    discardStagedOutput(staged);
    return Status::ioError("cannot write the block store " + staged.temp.string() + ": " + std::strerror(errno) +
                           "; the old store is unchanged");
  }
  RAG_RETURN_IF_ERROR(commitStagedOutput(staged));
  // The index now points into the new file; what was left out is gone.
  if (m_file) std::fclose(m_file);
  m_file = std::fopen(m_params.file.c_str(), "rb");
  std::unordered_map<int64_t, Entry> kept;
  m_stats.records = m_stats.bytes = m_stats.pending = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    Entry e = std::move(*order[i].second);
    e.offset = offsets[i];
    e.payload.clear();
    e.payload.shrink_to_fit();
    tally(e, +1);
    kept.emplace(order[i].first, std::move(e));
  }
  m_entries = std::move(kept);
  if (!m_file) return Status::ioError("cannot reopen the block store " + m_params.file.string());
  ++m_stats.saves;
  m_stats.droppedOnSave += static_cast<int64_t>(dropped);
  return Status::ok();
}

void BlockStore::tally(const Entry& e, int sign) {
  m_stats.records += sign;
  m_stats.bytes += sign * recordBytes(static_cast<int64_t>(e.tokens.size()));
  m_stats.pending += e.offset < 0 ? sign : 0;
}

BlockStoreStats BlockStore::stats() const { return m_stats; }

}  // namespace rag::memory
