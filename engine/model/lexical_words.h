// Whole words for the embedder's lexical branch (model/bert.h): a text's words, hashed, each
// given a fixed random ±1 vector, summed with a learned weight per hash bucket; the encoder adds
// the bag, scaled by learned gains, to its pooled embedding. Mean-pooled BPE
// pieces lose a rare word's identity ("inulin" retrieves "botulin"); a word's own random vector
// keeps it, for words never seen in training too (two texts sharing a word share its vector).
// Torch-free: the trainer (libtorch) and the CPU encoder kernels compute the same values here.
//
//   const TokenWords words(tokenizer);                      // per-token bytes, once
//   std::vector<uint64_t> h = words.hashes(ids);            // the words of a token sequence
//   lexicalBag(h, weights, dim, out);                       // the bag vector, [dim]
//
// A word is a maximal run of ASCII letters and digits and non-ASCII bytes, ASCII lower-cased,
// hashed with FNV-1a (core/hash.h). Words of a token sequence are those of its decoded bytes, so
// hashes(tokenizer.encode(s)) == wordHashes(s) whenever the tokenizer round-trips s.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rag::model {

class Tokenizer;

// The word hashes of a text, in order, repeats kept.
std::vector<uint64_t> wordHashes(std::string_view text);

// The bag's usual starting length beside the encoder's unit pooled embedding
// (BertModel::withLexical; `train embedder --lexical-scale`).
inline constexpr double kLexicalScale = 0.7;

// The bucket of a word's learned weight.
inline int64_t lexicalBucket(uint64_t hash, int64_t buckets) {
  return static_cast<int64_t>(hash % static_cast<uint64_t>(buckets));
}

// A word's fixed random vector into out[0, dim): +1 or -1 each, a pure function of (hash, i)
// (bit i % 64 of SplitMix64 of the hash and i / 64).
void lexicalVector(uint64_t hash, int64_t dim, float* out);

// A text's weighted bag of words, into out[0, dim): sqrt(dim) * normalize(sum over its words w of
// weights[bucket(w)] * sign(w)), components of unit RMS (a lone word's bag is its signs). A text
// without words (or whose weights cancel) gets the zero vector.
void lexicalBag(std::span<const uint64_t> hashes, std::span<const float> weights, int64_t dim, float* out);

// Starting weights of the buckets from a collection's texts: BM25's inverse document frequency
// ln(1 + (N - df + 0.5) / (df + 0.5)), df the number of texts holding a word of the bucket (0 for
// a bucket no word reaches: a word unseen here weighs as the rarest).
std::vector<float> inverseDocumentFrequency(std::span<const std::string> texts, int64_t buckets);

// Word hashes of token sequences, from each token's decoded bytes (a word may span tokens:
// " in" + "ulin" is "inulin").
class TokenWords {
public:
  explicit TokenWords(const Tokenizer& tokenizer);
  // Ids outside the tokenizer's vocabulary count as word breaks.
  std::vector<uint64_t> hashes(std::span<const int32_t> ids) const;

private:
  std::vector<std::string> m_bytes;  // by token id
};

}  // namespace rag::model
