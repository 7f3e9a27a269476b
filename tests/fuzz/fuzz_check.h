// What the fuzz targets share: the input as text, and a check that aborts (a crash libFuzzer
// records, and a failed replay test) when a parser breaks a promise its header makes.
//
// Each target is one LLVMFuzzerTestOneInput; the same file builds two ways: with libFuzzer
// (clang, -DRAGWB_FUZZ=ON) and with replay_main.cpp (any compiler, a ctest that replays the seed
// corpus tests/fuzz/corpus/<target>/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace rag::fuzz {

inline std::string_view asText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Two inputs in one: the text before the first NUL byte and the text after it (empty when there
// is no NUL). JSON and the dictionary formats never hold a raw NUL, so the split is unambiguous.
inline std::pair<std::string_view, std::string_view> splitAtNul(std::string_view text) {
  size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return {text, {}};
  return {text.substr(0, nul), text.substr(nul + 1)};
}

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: broken promise: %s\n", file, line, what);
  std::abort();
}

}  // namespace rag::fuzz

#define RAG_FUZZ_CHECK(cond) \
  do {                       \
    if (!(cond)) ::rag::fuzz::fail(#cond, __FILE__, __LINE__); \
  } while (0)
