// The index file: header | FAISS write_index payload | trailer. The trailer's length and CRC-32
// let load() reject a truncated or damaged file before FAISS parses a byte of it.
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/fs.h"
#include "retrieval/ivf_index_impl.h"

namespace fs = std::filesystem;

namespace rag::retrieval {

using namespace ivf_detail;

namespace {

constexpr char kMagic[8] = {'R', 'A', 'G', 'I', 'V', 'F', '0', '1'};
constexpr char kTrailerMagic[8] = {'R', 'A', 'G', 'I', 'V', 'F', 'E', 'N'};
constexpr uint32_t kFormatVersion = 1;
constexpr uint32_t kMaxFingerprintBytes = 4096;
constexpr size_t kTrailerBytes = 8 + 4 + 8;  // payload bytes, CRC-32, magic

uLong crcOf(uLong crc, const void* data, size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {
    const uInt chunk = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return crc;
}

// Streams FAISS's serialisation to a FILE while summing its length and CRC-32.
struct ChecksummingWriter : faiss::IOWriter {
  explicit ChecksummingWriter(std::FILE* f) : file(f) { name = "ivf index"; }
  size_t operator()(const void* ptr, size_t size, size_t nitems) override {
    if (size == 0 || nitems == 0) return nitems;  // FAISS writes empty vectors with null data
    const size_t written = std::fwrite(ptr, size, nitems, file);
    crc = crcOf(crc, ptr, written * size);
    bytes += written * size;
    return written;
  }
  std::FILE* file;
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t bytes = 0;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

template <typename T>
bool writePod(std::FILE* f, const T& v) {
  return std::fwrite(&v, sizeof v, 1, f) == 1;
}
template <typename T>
bool readPod(std::FILE* f, T& v) {
  return std::fread(&v, sizeof v, 1, f) == 1;
}

}  // namespace

Status IvfIndex::save(const fs::path& path, std::string_view fingerprint) const {
  if (fingerprint.empty() || fingerprint.size() > kMaxFingerprintBytes)
    return Status::invalidArgument(
        "the embedder fingerprint must be 1 to " + std::to_string(kMaxFingerprintBytes) +
        " bytes (got " + std::to_string(fingerprint.size()) +
        "); pass the fingerprint of the embedder that made the vectors");
  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(path));
  auto failed = [&](std::string why) {
    discardStagedOutput(staged);
    return Status::ioError("cannot write the index to " + staged.temp.string() + ": " + why);
  };
  {
    FilePtr f(std::fopen(staged.temp.c_str(), "wb"));
    if (!f) return failed(std::strerror(errno));
    const uint32_t fpBytes = static_cast<uint32_t>(fingerprint.size());
    bool ok = std::fwrite(kMagic, 1, sizeof kMagic, f.get()) == sizeof kMagic &&
              writePod(f.get(), kFormatVersion) && writePod(f.get(), fpBytes) &&
              std::fwrite(fingerprint.data(), 1, fpBytes, f.get()) == fpBytes;
    if (!ok) return failed(std::strerror(errno));
    ChecksummingWriter writer(f.get());
    try {
      faiss::write_index(m_impl->index.get(), &writer);
    } catch (const std::exception& e) {
      return failed(std::string("FAISS: ") + e.what() + " (disk full?)");
    }
    const uint32_t crc = static_cast<uint32_t>(writer.crc);
    ok = writePod(f.get(), writer.bytes) && writePod(f.get(), crc) &&
         std::fwrite(kTrailerMagic, 1, sizeof kTrailerMagic, f.get()) == sizeof kTrailerMagic &&
         std::fflush(f.get()) == 0 && !std::ferror(f.get());
    if (!ok) return failed(std::string(std::strerror(errno)) + " (disk full?)");
    if (std::fclose(f.release()) != 0) return failed(std::strerror(errno));
  }
  Status s = commitStagedOutput(staged);
  if (!s) discardStagedOutput(staged);
  return s;
}

Result<IvfIndex> IvfIndex::load(const fs::path& path, std::string_view expectedFingerprint) {
  const std::string where = path.string();
  std::error_code ec;
  if (!fs::exists(path, ec))
    return Status::notFound("index file " + where + " does not exist; build it with "
                            "`ragraph index build`");
  const uint64_t fileBytes = fs::file_size(path, ec);
  if (ec) return Status::ioError("cannot read " + where + ": " + ec.message());
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return Status::ioError("cannot open " + where + ": " + std::strerror(errno));

  auto corrupt = [&](const std::string& why) {
    return Status::corrupt("index file " + where + " is damaged (" + why + "); " + kRebuildHint);
  };
  char magic[8];
  uint32_t version = 0, fpBytes = 0;
  if (std::fread(magic, 1, sizeof magic, f.get()) != sizeof magic ||
      std::memcmp(magic, kMagic, sizeof magic) != 0)
    return Status::corrupt(where + " is not a RAGraph IVF index file; " + kRebuildHint);
  if (!readPod(f.get(), version) || !readPod(f.get(), fpBytes)) return corrupt("truncated header");
  if (version != kFormatVersion)
    return Status::schemaMismatch(where + " has index format " + std::to_string(version) +
                                  ", this build reads format " + std::to_string(kFormatVersion) +
                                  "; " + kRebuildHint);
  if (fpBytes > kMaxFingerprintBytes) return corrupt("bad fingerprint length");
  std::string fingerprint(fpBytes, '\0');
  if (std::fread(fingerprint.data(), 1, fpBytes, f.get()) != fpBytes)
    return corrupt("truncated header");
  if (fingerprint != expectedFingerprint)
    return Status::schemaMismatch("index " + where + " was built from the embeddings of '" +
                                  fingerprint + "', not of the current embedder '" +
                                  std::string(expectedFingerprint) + "'; " + kRebuildHint);

  const uint64_t headerBytes = sizeof kMagic + 8 + fpBytes;
  if (fileBytes < headerBytes + kTrailerBytes) return corrupt("truncated");
  uint64_t payloadBytes = 0;
  uint32_t storedCrc = 0;
  char endMagic[8];
  if (std::fseek(f.get(), static_cast<long>(fileBytes - kTrailerBytes), SEEK_SET) != 0 ||
      !readPod(f.get(), payloadBytes) || !readPod(f.get(), storedCrc) ||
      std::fread(endMagic, 1, sizeof endMagic, f.get()) != sizeof endMagic ||
      std::memcmp(endMagic, kTrailerMagic, sizeof endMagic) != 0 ||
      payloadBytes != fileBytes - headerBytes - kTrailerBytes)
    return corrupt("truncated or missing its end marker");

  // Checksum first, so FAISS never parses damaged sizes.
  if (std::fseek(f.get(), static_cast<long>(headerBytes), SEEK_SET) != 0)
    return Status::ioError("cannot seek in " + where);
  {
    std::vector<char> buf(size_t{1} << 20);
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t left = payloadBytes;
    while (left > 0) {
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      if (std::fread(buf.data(), 1, want, f.get()) != want)
        return Status::ioError("cannot read " + where + ": " + std::strerror(errno));
      crc = crcOf(crc, buf.data(), want);
      left -= want;
    }
    if (static_cast<uint32_t>(crc) != storedCrc) return corrupt("checksum mismatch");
  }

  if (std::fseek(f.get(), static_cast<long>(headerBytes), SEEK_SET) != 0)
    return Status::ioError("cannot seek in " + where);
  std::unique_ptr<faiss::Index> raw;
  try {
    faiss::FileIOReader reader(f.get());
    raw.reset(faiss::read_index(&reader));
  } catch (const std::exception& e) {
    return corrupt(std::string("FAISS cannot parse it: ") + e.what());
  }
  if (static_cast<uint64_t>(std::ftell(f.get())) != headerBytes + payloadBytes)
    return corrupt("the FAISS payload does not end where the trailer says");
  auto* ivf = dynamic_cast<faiss::IndexIVFFlat*>(raw.get());
  if (!ivf) return corrupt("it holds a FAISS index of another type");
  raw.release();
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl,
                       Impl::wrap(std::unique_ptr<faiss::IndexIVFFlat>(ivf), where));
  impl->cost = impl->calibrate();
  impl->sharedCost = impl->calibrateShared();
  return IvfIndex(std::move(impl));
}

}  // namespace rag::retrieval
