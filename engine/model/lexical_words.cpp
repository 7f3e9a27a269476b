#include "model/lexical_words.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/hash.h"
#include "core/random.h"
#include "model/tokenizer.h"

namespace rag::model {

namespace {

bool wordByte(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

// Streams bytes into words: feed() every byte in order, then finish().
class WordStream {
public:
  explicit WordStream(Words& out) : m_out(out) {}
  void feed(unsigned char c) {
    if (!wordByte(c)) {
      finish();
      if (c == ':' && !m_headSeen) {
        m_headSeen = true;
        if (m_out.hashes.size() <= kLexicalHeadWords) m_out.head = m_out.hashes.size();
      }
      return;
    }
    if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    m_word.push_back(static_cast<char>(c));
  }
  void finish() {
    if (!m_word.empty() && !isStopword(m_word)) m_out.hashes.push_back(fnv1a(m_word.data(), m_word.size()));
    m_word.clear();
  }

private:
  Words& m_out;
  std::string m_word;       // the word so far, lower-cased
  bool m_headSeen = false;  // only the first ':' can end a head
};

}  // namespace

bool isStopword(std::string_view w) {
  static const std::unordered_set<std::string_view> kStop = {
      "a",     "about", "an",    "and",   "are",  "as",    "at",    "be",    "by",    "can",  "did",  "do",
      "does",  "for",   "from",  "had",   "has",  "have",  "he",    "her",   "his",   "how",  "i",    "in",
      "into",  "is",    "it",    "its",   "of",   "on",    "or",    "she",   "so",    "than", "that", "the",
      "their", "them",  "then",  "there", "these", "they", "this",  "those", "to",    "was",  "we",   "were",
      "what",  "when",  "where", "which", "who",  "whom",  "whose", "why",   "will",  "with", "you"};
  return kStop.count(w) > 0;
}

Words textWords(std::string_view text) {
  Words out;
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

std::vector<std::pair<uint64_t, float>> saturatedCounts(const Words& words, double avgWords) {
  std::vector<std::pair<uint64_t, float>> out;
  std::unordered_map<uint64_t, size_t> at;
  for (size_t i = 0; i < words.hashes.size(); ++i) {
    auto [it, fresh] = at.emplace(words.hashes[i], out.size());
    if (fresh) out.emplace_back(words.hashes[i], 0.0f);
    out[it->second].second += i < words.head ? 2.0f : 1.0f;
  }
  const double k = kLexicalK1 * (1.0 - kLexicalB + kLexicalB * static_cast<double>(words.hashes.size()) / avgWords);
  for (auto& [hash, tf] : out) tf = static_cast<float>(tf * (kLexicalK1 + 1.0) / (tf + k));
  return out;
}

void lexicalBag(const Words& words, std::span<const float> weights, double avgWords, int64_t dim, float* out) {
  std::fill(out, out + dim, 0.0f);
  const auto buckets = static_cast<int64_t>(weights.size());
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  std::vector<float> v(static_cast<size_t>(dim));
  for (const auto& [hash, sat] : saturatedCounts(words, avgWords)) {
    const float w = weights[static_cast<size_t>(lexicalBucket(hash, buckets))] * sat * scale;
    lexicalVector(hash, dim, v.data());
    for (int64_t i = 0; i < dim; ++i) out[i] += w * v[static_cast<size_t>(i)];
  }
}

LexicalStatistics lexicalStatistics(std::span<const std::string> texts, int64_t buckets) {
  std::vector<int64_t> df(static_cast<size_t>(buckets), 0);
  std::vector<int64_t> seenIn(static_cast<size_t>(buckets), -1);  // the last text that counted a bucket
  double words = 0;
  for (size_t t = 0; t < texts.size(); ++t) {
    const Words w = textWords(texts[t]);
    words += static_cast<double>(w.hashes.size());
    for (uint64_t h : w.hashes) {
      const auto b = static_cast<size_t>(lexicalBucket(h, buckets));
      if (seenIn[b] == static_cast<int64_t>(t)) continue;
      seenIn[b] = static_cast<int64_t>(t);
      ++df[b];
    }
  }
  const auto n = static_cast<double>(texts.size());
  LexicalStatistics out;
  out.idf.resize(static_cast<size_t>(buckets));
  for (size_t b = 0; b < out.idf.size(); ++b) {
    const auto d = static_cast<double>(df[b]);
    out.idf[b] = static_cast<float>(std::log(1.0 + (n - d + 0.5) / (d + 0.5)));
  }
  out.avgWords = texts.empty() ? 1.0 : std::max(1.0, words / n);
  return out;
}

TokenWords::TokenWords(const Tokenizer& tokenizer) : m_bytes(static_cast<size_t>(tokenizer.vocabSize())) {
  for (int32_t id = 0; id < tokenizer.vocabSize(); ++id) {
    const int32_t one[] = {id};
    Result<std::string> text = tokenizer.decode(one);
    if (text) m_bytes[static_cast<size_t>(id)] = std::move(*text);  // unassigned ids: no bytes
  }
}

Words TokenWords::words(std::span<const int32_t> ids) const {
  Words out;
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
