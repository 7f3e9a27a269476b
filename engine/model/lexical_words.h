// Whole words for the embedder's lexical branch (model/bert.h): BM25 carried inside one vector.
// Mean-pooled BPE pieces lose a rare word's identity ("What is inulin a kind of?" retrieves
// botulin and globulin); BM25 keeps it. The branch writes a text's words, each weighted as BM25
// weighs a term, into `dim` extra components of its embedding, so that the inner product of two
// embeddings is their dense cosine plus a BM25-like score of the words they share:
//
//   e(text) = [ normalize(mean of the encoder's states) ; bag(text) ]
//   bag(text) = 1/sqrt(dim) * sum over distinct words w: weight[bucket(w)] * sat(tf_w) * signs(w)
//   sat(tf) = tf (k1 + 1) / (tf + k1 (1 - b + b * words / avgWords))           (BM25's, k1 1.2, b .75)
//
// signs(w) is a fixed random ±1 vector per word (SplitMix64 of its hash; no table, so a word never
// trained on has one too), so signs(u)·signs(w)/dim is 1 for u = w and about ±1/sqrt(dim) else;
// weight[bucket(w)] starts at sqrt(lambda * idf(w)), BM25's IDF over the corpus's passages, so
// bag(q)·bag(p) ≈ lambda * sum over shared words of idf(w) sat_q(w) sat_p(w): BM25 up to the
// query's own constant factor (the same function on both sides, so one embedder serves queries
// and passages). Words before a text's first ':' (the corpus writes a passage's title there)
// count twice, like BM25's title field. Torch-free: the trainer (libtorch) and the CPU encoder
// kernels compute the same values here.
//
//   const Words w = textWords(text);                          // or TokenWords(tok).words(ids)
//   lexicalBag(w, weights, avgWords, dim, out);               // the bag, [dim]
//
// A word is a maximal run of ASCII letters and digits and non-ASCII bytes, ASCII lower-cased,
// hashed with FNV-1a (core/hash.h); stopwords are skipped, as BM25's queries skip them. The words of a token sequence are those of its decoded bytes,
// so TokenWords(tok).words(tok.encode(s)) == textWords(s) whenever the tokenizer round-trips s.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rag::model {

class Tokenizer;

// BM25's term-frequency saturation and length normalisation (FTS5's and Lucene's defaults).
inline constexpr double kLexicalK1 = 1.2;
inline constexpr double kLexicalB = 0.75;
// A ':' after more words than this ends no head (it is prose, not a title).
inline constexpr size_t kLexicalHeadWords = 32;
// lambda, the lexical score's weight beside the dense cosine (`--lexical-weight`): chosen on 2,000
// dev questions, scored exactly with the second-round dense encoder: recall@5 of the first gold
// passage 0.990 / 0.989 / 0.986 at 0.03 / 0.05 / 0.1, of every gold passage (a two-hop
// question's second hop too) 0.846 / 0.862 / 0.863.
inline constexpr double kLexicalWeight = 0.05;

// The English function words ("what", "is", "of", ...) that the branch skips and BM25's queries
// drop (retrieval/bm25_index.h): they match nearly every question and say nothing of its
// passage. `word` is lower-case.
bool isStopword(std::string_view word);

// A text's words in order (stopwords skipped), repeats kept; the first `head` of them come before its first ':'
// (0 when it has none within kLexicalHeadWords words).
struct Words {
  std::vector<uint64_t> hashes;
  size_t head = 0;
};
Words textWords(std::string_view text);

// The bucket of a word's learned weight.
inline int64_t lexicalBucket(uint64_t hash, int64_t buckets) {
  return static_cast<int64_t>(hash % static_cast<uint64_t>(buckets));
}

// A word's fixed random vector into out[0, dim): +1 or -1 each, a pure function of (hash, i)
// (bit i % 64 of SplitMix64 of the hash and i / 64).
void lexicalVector(uint64_t hash, int64_t dim, float* out);

// Each distinct word of `words` once, in first-seen order, with its saturated term frequency
// sat(tf) (head words counted twice; avgWords > 0).
std::vector<std::pair<uint64_t, float>> saturatedCounts(const Words& words, double avgWords);

// A text's bag into out[0, dim) (formula above); the zero vector for a text without words.
void lexicalBag(const Words& words, std::span<const float> weights, double avgWords, int64_t dim, float* out);

// What the branch needs from a collection of texts (a corpus's passages): BM25's inverse document
// frequency per bucket, ln(1 + (N - df + 0.5) / (df + 0.5)) with df the number of texts holding a
// word of the bucket (a bucket no word reaches weighs as the rarest word), and the mean number of
// words of a text.
struct LexicalStatistics {
  std::vector<float> idf;
  double avgWords = 1;
};
LexicalStatistics lexicalStatistics(std::span<const std::string> texts, int64_t buckets);

// Word hashes of token sequences, from each token's decoded bytes (a word may span tokens:
// " in" + "ulin" is "inulin").
class TokenWords {
public:
  explicit TokenWords(const Tokenizer& tokenizer);
  // Ids outside the tokenizer's vocabulary count as word breaks.
  Words words(std::span<const int32_t> ids) const;

private:
  std::vector<std::string> m_bytes;  // by token id
};

}  // namespace rag::model
