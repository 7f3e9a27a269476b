#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "core/fs.h"
#include "core/json.h"
#include "core/json_writer.h"

namespace fs = std::filesystem;

namespace rag::model {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader maps it without byte swapping");

namespace {

// The safetensors reference implementation refuses headers above 100 MB; so do we, so that a
// corrupt length cannot make us allocate gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

}  // namespace

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
  }
  return "?";
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::I32: return 4;
  }
  return 0;
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32})
    if (name == dtypeName(d)) return d;
  return std::nullopt;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shapeToString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// ---- Conversion ------------------------------------------------------------------------------

float f16ToF32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  uint32_t bits = exp == 31 ? (sign | 0x7F800000u | (mant << 13))
                            : (sign | ((exp + 112) << 23) | (mant << 13));
  return std::bit_cast<float>(bits);
}

float bf16ToF32(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

uint16_t f32ToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // stay a (quiet) NaN
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t f32ToF16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t absBits = bits & 0x7FFFFFFF;
  if (absBits > 0x7F800000) return sign | 0x7E00;    // NaN
  if (absBits >= 0x477FF000) return sign | 0x7C00;   // >= 65520 rounds to infinity
  if (absBits < 0x38800000) {                        // below 2^-14: a half subnormal
    // Scaling by 2^24 is exact; nearbyint rounds half to even in the default mode. 1024 lands
    // on the smallest normal, whose bits are exactly 0x0400.
    float scaled = std::bit_cast<float>(absBits) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  uint32_t h = ((((absBits >> 23) - 127 + 15) << 10) | ((absBits & 0x7FFFFF) >> 13));
  const uint32_t rest = absBits & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry may bump the exponent
  return sign | static_cast<uint16_t>(h);
}

Status toF32(const TensorView& t, std::span<float> out) {
  const auto n = static_cast<size_t>(t.numel());
  if (out.size() != n)
    return Status::invalidArgument("converting tensor '" + t.name + "' to F32: output holds " +
                                   std::to_string(out.size()) + " floats, the tensor " +
                                   std::to_string(n));
  switch (t.dtype) {
    case DType::F32:
      if (n != 0) std::memcpy(out.data(), t.data, n * sizeof(float));  // an empty span's data() may be null
      return Status::ok();
    case DType::F16:
    case DType::BF16: {
      const bool bf = t.dtype == DType::BF16;
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, t.data + 2 * i, 2);
        out[i] = bf ? bf16ToF32(bits) : f16ToF32(bits);
      }
      return Status::ok();
    }
    case DType::I64:
    case DType::I32:
      break;
  }
  return Status::invalidArgument("tensor '" + t.name + "' has dtype " +
                                 std::string(dtypeName(t.dtype)) +
                                 "; only F32, F16 and BF16 tensors convert to F32");
}

Result<std::vector<float>> toF32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  RAG_RETURN_IF_ERROR(toF32(t, out));
  return out;
}

// ---- SafetensorsFile ---------------------------------------------------------------------------

struct SafetensorsFile::Mapping {
  const std::byte* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) ::munmap(const_cast<std::byte*>(base), size);
  }
};

namespace {

Result<int64_t> nonNegativeInt(const JsonValue& v, const std::string& what) {
  std::optional<int64_t> i = v.asInt64();
  if (!i || *i < 0) return Status::corrupt(what + " is not a non-negative integer");
  return *i;
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const fs::path& path) {
  const std::string file = path.string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::notFound("weights file " + file + " does not exist");
    return Status::ioError("cannot open " + file + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::ioError("cannot stat " + file + ": " + std::strerror(e));
  }
  const auto fileSize = static_cast<uint64_t>(st.st_size);
  if (fileSize < 8) {
    ::close(fd);
    return Status::corrupt(file + " is " + std::to_string(fileSize) +
                           " bytes, too short for a safetensors header");
  }
  void* base = ::mmap(nullptr, fileSize, PROT_READ, MAP_PRIVATE, fd, 0);
  int mapErrno = errno;
  ::close(fd);
  if (base == MAP_FAILED)
    return Status::ioError("cannot map " + file + ": " + std::strerror(mapErrno));
  auto mapping = std::make_shared<Mapping>();
  mapping->base = static_cast<const std::byte*>(base);
  mapping->size = fileSize;

  RAG_ASSIGN_OR_RETURN(SafetensorsFile out,
                       fromBytes({mapping->base, mapping->size}, path));
  out.m_mapping = std::move(mapping);
  return out;
}

Result<SafetensorsFile> SafetensorsFile::fromBytes(std::span<const std::byte> content,
                                                   const fs::path& path) {
  const std::string file = path.string();
  const uint64_t fileSize = content.size();
  if (fileSize < 8)
    return Status::corrupt(file + " is " + std::to_string(fileSize) +
                           " bytes, too short for a safetensors header");
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, content.data(), 8);
  if (headerLen > fileSize - 8)
    return Status::corrupt(file + ": header length " + std::to_string(headerLen) +
                           " runs past the end of the file (" + std::to_string(fileSize) +
                           " bytes); the file is truncated or not safetensors");
  if (headerLen > kMaxHeaderBytes)
    return Status::corrupt(file + ": header length " + std::to_string(headerLen) +
                           " exceeds the 100 MB limit of the format");
  std::string_view headerText(reinterpret_cast<const char*>(content.data()) + 8, headerLen);
  Result<JsonValue> header = parseJson(headerText);
  if (!header) return header.status().withContext("reading the safetensors header of " + file);
  if (!header->isObject())
    return Status::corrupt(file + ": the safetensors header is not a JSON object");

  SafetensorsFile out;
  out.m_path = path;
  const std::byte* data = content.data() + 8 + headerLen;
  const uint64_t dataSize = fileSize - 8 - headerLen;
  struct Span {
    uint64_t begin, end;
    size_t tensor;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header->asObject()) {
    if (name == "__metadata__") {
      if (!entry.isObject())
        return Status::corrupt(file + ": __metadata__ is not an object of strings");
      for (const auto& [k, v] : entry.asObject()) {
        if (!v.isString())
          return Status::corrupt(file + ": __metadata__ value of '" + k + "' is not a string");
        out.m_metadata.emplace_back(k, v.asString());
      }
      continue;
    }
    const std::string where = file + ": tensor '" + name + "'";
    if (out.m_index.count(name)) return Status::corrupt(where + " appears twice in the header");
    const JsonValue* dtype = entry.find("dtype");
    const JsonValue* shape = entry.find("shape");
    const JsonValue* offsets = entry.find("data_offsets");
    if (!dtype || !dtype->isString() || !shape || !shape->isArray() || !offsets ||
        !offsets->isArray() || offsets->size() != 2)
      return Status::corrupt(where + " needs \"dtype\", \"shape\" and a two-element "
                             "\"data_offsets\"");
    TensorView t;
    t.name = name;
    std::optional<DType> d = parseDType(dtype->asString());
    if (!d)
      return Status::corrupt(where + " has dtype '" + dtype->asString() +
                             "', which is unknown or not supported (supported: F32, F16, BF16, "
                             "I64, I32)");
    t.dtype = *d;
    unsigned __int128 bytes = dtypeSize(t.dtype);
    unsigned __int128 nonZero = 1;  // product of the non-zero dimensions
    for (const JsonValue& dim : shape->asArray()) {
      RAG_ASSIGN_OR_RETURN(int64_t n, nonNegativeInt(dim, where + ": a shape dimension"));
      t.shape.push_back(n);
      bytes *= static_cast<uint64_t>(n);
      if (bytes > fileSize) bytes = uint64_t{fileSize} + 1;  // saturate; reported below
      // An empty tensor may list huge dimensions beside its zero; numel() multiplies them in
      // order, so refuse any shape whose non-zero dimensions alone overflow int64.
      if (n != 0) nonZero *= static_cast<uint64_t>(n);
      if (nonZero > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return Status::corrupt(where + " has shape " + shapeToString(t.shape) +
                               "..., more elements than a 64-bit count holds");
    }
    RAG_ASSIGN_OR_RETURN(int64_t begin,
                         nonNegativeInt(offsets->asArray()[0], where + ": data_offsets[0]"));
    RAG_ASSIGN_OR_RETURN(int64_t end,
                         nonNegativeInt(offsets->asArray()[1], where + ": data_offsets[1]"));
    if (begin > end || static_cast<uint64_t>(end) > dataSize)
      return Status::corrupt(where + " has data_offsets [" + std::to_string(begin) + ", " +
                             std::to_string(end) + ") outside the data section of " +
                             std::to_string(dataSize) + " bytes");
    const auto span = static_cast<uint64_t>(end - begin);
    if (bytes != span)
      return Status::corrupt(where + ": dtype " + std::string(dtypeName(t.dtype)) + " x shape " +
                             shapeToString(t.shape) + " needs " +
                             (bytes > fileSize ? std::string("more bytes than the file has")
                                               : std::to_string(static_cast<uint64_t>(bytes)) +
                                                     " bytes") +
                             " but data_offsets span " + std::to_string(span));
    t.data = data + begin;
    t.nbytes = span;
    spans.push_back(
        {static_cast<uint64_t>(begin), static_cast<uint64_t>(end), out.m_tensors.size()});
    out.m_index.emplace(name, out.m_tensors.size());
    out.m_tensors.push_back(std::move(t));
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t reach = 0;
  size_t reachTensor = 0;
  for (const Span& s : spans) {
    if (s.begin == s.end) continue;  // empty tensors occupy no bytes
    if (s.begin < reach)
      return Status::corrupt(file + ": tensors '" + out.m_tensors[reachTensor].name + "' and '" +
                             out.m_tensors[s.tensor].name + "' overlap in the data section");
    reach = s.end;
    reachTensor = s.tensor;
  }
  return out;
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = m_index.find(std::string(name));
  return it == m_index.end() ? nullptr : &m_tensors[it->second];
}

// ---- SafetensorsWeights ------------------------------------------------------------------------

Result<SafetensorsWeights> SafetensorsWeights::open(const fs::path& path) {
  std::error_code ec;
  fs::path target = path;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(path / "model.safetensors.index.json", ec))
      target = path / "model.safetensors.index.json";
    else if (fs::exists(path / "model.safetensors", ec))
      target = path / "model.safetensors";
    else
      return Status::notFound("no model.safetensors or model.safetensors.index.json in " +
                              path.string());
  }
  SafetensorsWeights w;
  w.m_source = target;
  if (target.extension() != ".json") {
    RAG_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(target));
    for (size_t i = 0; i < f.tensors().size(); ++i)
      w.m_index.emplace(f.tensors()[i].name, std::pair{size_t{0}, i});
    w.m_files.push_back(std::move(f));
    return w;
  }

  const std::string index = target.string();
  RAG_ASSIGN_OR_RETURN(std::string text, readFile(target));
  Result<JsonValue> doc = parseJson(text);
  if (!doc) return doc.status().withContext("reading the safetensors index " + index);
  const JsonValue* map = doc->find("weight_map");
  if (!map || !map->isObject())
    return Status::corrupt(index + ": no \"weight_map\" object of tensor name -> shard file");
  std::unordered_map<std::string, size_t> shardIndex;
  for (const auto& [name, shardValue] : map->asObject()) {
    if (!shardValue.isString())
      return Status::corrupt(index + ": weight_map entry '" + name + "' is not a file name");
    const std::string& shard = shardValue.asString();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
      return Status::corrupt(index + ": shard '" + shard + "' of tensor '" + name +
                             "' is not a plain file name in the index's directory");
    auto [it, inserted] = shardIndex.emplace(shard, w.m_files.size());
    if (inserted) {
      Result<SafetensorsFile> f = SafetensorsFile::open(target.parent_path() / shard);
      if (!f) return f.status().withContext("opening shard " + shard + " listed in " + index);
      w.m_files.push_back(std::move(f).value());
    }
    const SafetensorsFile& f = w.m_files[it->second];
    const TensorView* t = f.find(name);
    if (!t)
      return Status::corrupt(index + " puts tensor '" + name + "' in " + f.path().string() +
                             ", which does not contain it");
    w.m_index[name] = {it->second, static_cast<size_t>(t - f.tensors().data())};
  }
  return w;
}

const TensorView* SafetensorsWeights::find(std::string_view name) const {
  auto it = m_index.find(std::string(name));
  if (it == m_index.end()) return nullptr;
  return &m_files[it->second.first].tensors()[it->second.second];
}

std::vector<std::string> SafetensorsWeights::names() const {
  std::vector<std::string> out;
  out.reserve(m_index.size());
  for (const auto& [name, where] : m_index) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

fs::path SafetensorsWeights::fileOf(std::string_view name) const {
  auto it = m_index.find(std::string(name));
  return it == m_index.end() ? fs::path() : m_files[it->second.first].path();
}

// ---- Writing -----------------------------------------------------------------------------------

Status writeSafetensors(const fs::path& path, std::span<const TensorToWrite> tensors,
                        std::span<const std::pair<std::string, std::string>> metadata) {
  const std::string file = path.string();
  std::unordered_set<std::string_view> names;
  std::ostringstream json;
  JsonWriter w(json);
  w.beginObject();
  if (!metadata.empty()) {
    w.key("__metadata__").beginObject();
    for (const auto& [k, v] : metadata) w.key(k).value(v);
    w.endObject();
  }
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second)
      return Status::invalidArgument("writing " + file + ": tensor name '" + t.name +
                                     "' is empty, reserved or repeated");
    unsigned __int128 bytes = dtypeSize(t.dtype);
    for (int64_t d : t.shape) {
      if (d < 0)
        return Status::invalidArgument("writing " + file + ": tensor '" + t.name +
                                       "' has a negative dimension in " + shapeToString(t.shape));
      bytes *= static_cast<uint64_t>(d);
      if (bytes > std::numeric_limits<uint64_t>::max())
        bytes = std::numeric_limits<uint64_t>::max();
    }
    if (bytes != t.data.size())
      return Status::invalidArgument("writing " + file + ": tensor '" + t.name + "' is " +
                                     std::string(dtypeName(t.dtype)) + " " +
                                     shapeToString(t.shape) + ", which needs " +
                                     std::to_string(static_cast<uint64_t>(bytes)) +
                                     " bytes, but " + std::to_string(t.data.size()) +
                                     " were given");
    w.key(t.name).beginObject();
    w.key("dtype").value(dtypeName(t.dtype));
    w.key("shape").beginArray();
    for (int64_t d : t.shape) w.value(d);
    w.endArray();
    w.key("data_offsets").beginArray().value(offset).value(offset + t.data.size()).endArray();
    w.endObject();
    offset += t.data.size();
  }
  w.endObject();
  std::string header = json.str();
  header.append((8 - header.size() % 8) % 8, ' ');  // data section starts 8-byte aligned

  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(path));
  {
    std::ofstream out(staged.temp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return Status::ioError("cannot write " + staged.temp.string() + ": " +
                             std::strerror(errno));
    }
    uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const TensorToWrite& t : tensors)
      out.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(t.data.size()));
    out.flush();
    if (!out) {
      discardStagedOutput(staged);
      return Status::ioError("writing " + staged.temp.string() + " failed (disk full?)");
    }
  }
  Status s = commitStagedOutput(staged);
  if (!s) discardStagedOutput(staged);
  return s;
}

}  // namespace rag::model
