// safetensors files (Hugging Face's weight format), read through mmap and written atomically.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "BF16", "shape": [4096, 4096],
//    "data_offsets": [begin, end]}, ...}
// then the data section; offsets are relative to its start (byte 8 + N). Tensors are row-major
// and little-endian.
//
//   RAG_ASSIGN_OR_RETURN(SafetensorsWeights w, SafetensorsWeights::open(modelDir));
//   const TensorView* emb = w.find("model.embed_tokens.weight");  // BF16 [vocab, hidden]
//   RAG_ASSIGN_OR_RETURN(std::vector<float> values, toF32(*emb));
//
// Views point into the mapping and stay valid while the SafetensorsFile/SafetensorsWeights (or
// any copy of it; copies share the mapping) is alive. Data pointers need not be aligned to the
// element size: read through memcpy or the converters below. A little-endian host is assumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rag/status.h"

namespace rag::model {

enum class DType : uint8_t { F32, F16, BF16, I64, I32 };

std::string_view dtypeName(DType dtype);                 // "F32", as safetensors spells it
size_t dtypeSize(DType dtype);                            // bytes per element
std::optional<DType> parseDType(std::string_view name);  // nullopt for anything else

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;       // empty for a scalar
  const std::byte* data = nullptr;  // nbytes bytes, possibly unaligned
  size_t nbytes = 0;                // == numel() * dtypeSize(dtype), checked on open

  int64_t numel() const;
};

// "[4096, 11008]"
std::string shapeToString(std::span<const int64_t> shape);

// ---- Element conversion -----------------------------------------------------------------------
float f16ToF32(uint16_t bits);
float bf16ToF32(uint16_t bits);
// Round to nearest even; NaN stays NaN, overflow becomes infinity.
uint16_t f32ToBf16(float value);
uint16_t f32ToF16(float value);

// Converts a F32, F16 or BF16 tensor to float. `out` must hold numel() floats.
// InvalidArgument for integer dtypes or a wrong output size.
Status toF32(const TensorView& tensor, std::span<float> out);
Result<std::vector<float>> toF32(const TensorView& tensor);

// ---- Reading -----------------------------------------------------------------------------------

class SafetensorsFile {
public:
  // Maps and validates one file. Errors: NotFound, IoError, and Corrupt naming the file and,
  // where one is at fault, the tensor: a header length beyond the file, unparsable header JSON,
  // an unknown dtype, offsets outside the data section or overlapping another tensor, a byte
  // length that is not dtype size x shape, a repeated tensor name.
  static Result<SafetensorsFile> open(const std::filesystem::path& path);
  // The same checks on a file's bytes already in memory; `path` only names it in errors. The
  // views point into `content`, which must outlive the result (and its copies).
  static Result<SafetensorsFile> fromBytes(std::span<const std::byte> content,
                                           const std::filesystem::path& path);

  const std::filesystem::path& path() const { return m_path; }
  // In header order.
  const std::vector<TensorView>& tensors() const { return m_tensors; }
  const TensorView* find(std::string_view name) const;
  // The "__metadata__" strings (empty when absent), in header order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return m_metadata; }

private:
  struct Mapping;
  std::filesystem::path m_path;
  std::shared_ptr<const Mapping> m_mapping;
  std::vector<TensorView> m_tensors;
  std::unordered_map<std::string, size_t> m_index;
  std::vector<std::pair<std::string, std::string>> m_metadata;
};

// A model's weights: a single .safetensors file or the shards a model.safetensors.index.json
// lists in its "weight_map".
class SafetensorsWeights {
public:
  // `path` is a .safetensors file, an index .json file, or a directory holding
  // model.safetensors.index.json or model.safetensors (the index wins when both exist).
  // Shards are opened once each; every tensor the index names must be in its shard (Corrupt
  // naming both otherwise), and shard names must be plain file names in the index's directory.
  static Result<SafetensorsWeights> open(const std::filesystem::path& path);

  const TensorView* find(std::string_view name) const;
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  size_t size() const { return m_index.size(); }
  // The file holding `name`, for error messages; empty when absent.
  std::filesystem::path fileOf(std::string_view name) const;
  // What was opened (the file or the index), for error messages.
  const std::filesystem::path& source() const { return m_source; }
  const std::vector<SafetensorsFile>& files() const { return m_files; }

private:
  std::filesystem::path m_source;
  std::vector<SafetensorsFile> m_files;
  std::unordered_map<std::string, std::pair<size_t, size_t>> m_index;  // file, tensor
};

// ---- Writing -----------------------------------------------------------------------------------

struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;  // numel * dtypeSize(dtype) bytes, little-endian, row-major
};

// Writes one safetensors file atomically (temp file, then rename): the header padded with
// spaces to a multiple of 8 bytes, then the tensors back to back in the order given.
// InvalidArgument for an empty, repeated or reserved ("__metadata__") name, a negative
// dimension, or a data size that does not match dtype x shape; IoError when writing fails.
Status writeSafetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                        std::span<const std::pair<std::string, std::string>> metadata = {});

}  // namespace rag::model
