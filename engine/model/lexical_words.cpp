#include "model/lexical_words.h"

#include <algorithm>
#include <cmath>

#include "core/hash.h"
#include "core/random.h"
#include "core/vector_math.h"
#include "model/tokenizer.h"

namespace rag::model {

namespace {

bool wordByte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

// Streams bytes into words: feed() every byte in order, then finish().
class WordStream {
public:
  explicit WordStream(std::vector<uint64_t>& out) : m_out(out) {}
  void feed(unsigned char c) {
    if (!wordByte(c)) return finish();
    if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    m_hash = fnv1a(&c, 1, m_hash);
    m_inWord = true;
  }
  void finish() {
    if (m_inWord) m_out.push_back(m_hash);
    m_inWord = false;
    m_hash = kFnvOffset;
  }

private:
  std::vector<uint64_t>& m_out;
  uint64_t m_hash = kFnvOffset;
  bool m_inWord = false;
};

}  // namespace

std::vector<uint64_t> wordHashes(std::string_view text) {
  std::vector<uint64_t> out;
  WordStream words(out);
  for (char c : text) words.feed(static_cast<unsigned char>(c));
  words.finish();
  return out;
}

void lexicalVector(uint64_t hash, int64_t dim, float* out) {
  for (int64_t first = 0; first < dim; first += 64) {
    const uint64_t bits = splitMix64(hash ^ splitMix64(static_cast<uint64_t>(first / 64)));
    for (int64_t i = first; i < std::min(dim, first + 64); ++i) out[i] = (bits >> (i - first)) & 1 ? 1.0f : -1.0f;
  }
}

void lexicalBag(std::span<const uint64_t> hashes, std::span<const float> weights, int64_t dim, float* out) {
  std::fill(out, out + dim, 0.0f);
  const auto buckets = static_cast<int64_t>(weights.size());
  std::vector<float> v(static_cast<size_t>(dim));
  for (uint64_t h : hashes) {
    const float w = weights[static_cast<size_t>(lexicalBucket(h, buckets))];
    lexicalVector(h, dim, v.data());
    for (int64_t i = 0; i < dim; ++i) out[i] += w * v[static_cast<size_t>(i)];
  }
  l2NormalizeRows(out, 1, static_cast<size_t>(dim));  // a zero bag stays zero
  const auto rms = static_cast<float>(std::sqrt(static_cast<double>(dim)));
  for (int64_t i = 0; i < dim; ++i) out[i] *= rms;
}

std::vector<float> inverseDocumentFrequency(std::span<const std::string> texts, int64_t buckets) {
  std::vector<int64_t> df(static_cast<size_t>(buckets), 0);
  std::vector<int64_t> seenIn(static_cast<size_t>(buckets), -1);  // the last text that counted a bucket
  for (size_t t = 0; t < texts.size(); ++t)
    for (uint64_t h : wordHashes(texts[t])) {
      const auto b = static_cast<size_t>(lexicalBucket(h, buckets));
      if (seenIn[b] == static_cast<int64_t>(t)) continue;
      seenIn[b] = static_cast<int64_t>(t);
      ++df[b];
    }
  const auto n = static_cast<double>(texts.size());
  std::vector<float> idf(static_cast<size_t>(buckets));
  for (size_t b = 0; b < idf.size(); ++b) {
    const auto d = static_cast<double>(df[b]);
    idf[b] = static_cast<float>(std::log(1.0 + (n - d + 0.5) / (d + 0.5)));
  }
  return idf;
}

TokenWords::TokenWords(const Tokenizer& tokenizer) : m_bytes(static_cast<size_t>(tokenizer.vocabSize())) {
  for (int32_t id = 0; id < tokenizer.vocabSize(); ++id) {
    const int32_t one[] = {id};
    Result<std::string> text = tokenizer.decode(one);
    if (text) m_bytes[static_cast<size_t>(id)] = std::move(*text);  // unassigned ids: no bytes
  }
}

std::vector<uint64_t> TokenWords::hashes(std::span<const int32_t> ids) const {
  std::vector<uint64_t> out;
  WordStream words(out);
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= m_bytes.size()) {
      words.finish();
      continue;
    }
    for (char c : m_bytes[static_cast<size_t>(id)]) words.feed(static_cast<unsigned char>(c));
  }
  words.finish();
  return out;
}

}  // namespace rag::model
