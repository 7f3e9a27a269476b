// The safetensors reader (engine/model/safetensors.h): any bytes either open as a file whose
// tensor views lie inside it, with the byte length dtype x shape, or give a Corrupt error.
#include <cstddef>
#include <vector>

#include "fuzz_check.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rag::model;
  const auto* begin = reinterpret_cast<const std::byte*>(data);
  rag::Result<SafetensorsFile> file = SafetensorsFile::fromBytes({begin, size}, "fuzz.safetensors");
  if (!file) {
    RAG_FUZZ_CHECK(file.status().code() == rag::StatusCode::Corrupt);
    return 0;
  }
  for (const TensorView& t : file->tensors()) {
    RAG_FUZZ_CHECK(file->find(t.name) == &t);
    RAG_FUZZ_CHECK(t.data >= begin + 8 && t.nbytes <= size && t.data + t.nbytes <= begin + size);
    RAG_FUZZ_CHECK(static_cast<size_t>(t.numel()) * dtypeSize(t.dtype) == t.nbytes);
    std::vector<float> values(static_cast<size_t>(t.numel()));
    rag::Status s = toF32(t, values);
    const bool floating = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16;
    RAG_FUZZ_CHECK(s.isOk() == floating);
    (void)shapeToString(t.shape);
  }
  return 0;
}
