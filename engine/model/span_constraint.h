// Copy-constrained (extractive) decoding: the text a sequence generates must stay a span of a
// source text — the passages its answer should come from — so a small reader can choose
// *which* words to copy but cannot miscopy or invent them (the constrained decoding of SGLang's
// and vLLM's regex/grammar modes, with "a substring of this text" as the language).
//
//   auto source = SpanSource::build(passagesText);    // suffix automaton, O(n) in the text
//   SpanConstraint c(source, pieces);                 // pieces: each token id's bytes
//   c.mask(logits, stops);                            // -inf on every token that would leave it
//   int32_t t = sampler.sample(logits);
//   c.advance(t);
//
// Comparison ignores ASCII case, reads every run of spaces and tabs as one space and ignores
// whitespace before the first character; a newline in the source separates spans (an answer
// cannot run from one passage line into the next). A token that contains a stop string (e.g.
// "\n") is checked only up to it, since generation ends there. End-of-sequence and stop tokens,
// and a stop string, are allowed once at least one character has been generated, never before
// (an empty answer is no answer). When no token at all would be allowed, mask() leaves the row
// as it was: the constraint narrows the model's choice and never makes a sequence fail.
//
// The floor: while the answer's first word is being written, when the likeliest token that
// keeps it a span is less than `floor` times as probable as the model's likeliest token, the
// model is not copying — it answers from what it knows, e.g. a two-hop question whose second
// passage was not retrieved — and forcing a span would make it write a fragment ("ment" of
// "commandment" for "municipality"). Then the constraint lifts and the sequence generates
// freely. Once the first word is done (a space follows it) the span is kept to the end: a model
// that copies a word and then strays is miscopying ("tea-" for "tea bag"), which is what the
// constraint is for. Floor 0: always copy; 1: only while the model's first choice keeps a span.
//
// Cost per step: one depth-first walk of the vocabulary's trie, pruned at the first byte that
// leaves the source, plus a walk per token that holds a stop string. Measured with a 4,096-piece
// vocabulary on this project's 2-core host: `eval qa --context gold --limit 2000` with the
// 4.26M-parameter role model took 20.8 and 20.2 s with --extractive against 19.8 and 19.4 s
// without (alternating runs; a walk per token, the first design, 17.2 and 18.8 against 16.5 and
// 15.3 s) — a few per cent for a model this small, less for any larger one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rag::model {

// The suffix automaton of a normalised source text: every substring of it is a path from the
// root, and nothing else is.
class SpanSource {
public:
  static std::shared_ptr<const SpanSource> build(std::string_view text);

  static constexpr int32_t kNone = -1;
  static constexpr int32_t kRoot = 0;
  // The state after reading byte `c` (already normalised) from `state`; kNone when the text
  // read so far followed by `c` is no substring of the source.
  int32_t next(int32_t state, uint8_t c) const;
  size_t states() const { return m_first.size(); }

  // How source and generated text are compared: ASCII lowercase; space and tab (and '\r')
  // become ' '; newline and other control bytes become kBreak, which never matches.
  static constexpr uint8_t kBreak = 0;
  static uint8_t normalise(uint8_t c);

private:
  struct Edge {
    uint8_t byte;
    int32_t to;
    int32_t nextEdge;  // the state's next edge, or kNone
  };
  int32_t addState();
  void addEdge(int32_t from, uint8_t c, int32_t to);
  void setEdge(int32_t from, uint8_t c, int32_t to);

  std::vector<int32_t> m_first;  // per state: its first edge, or kNone
  std::vector<int32_t> m_link;   // per state: suffix link
  std::vector<int32_t> m_len;    // per state: length of its longest string
  std::vector<Edge> m_edges;
};

// What the constraint needs of a tokenizer, built once per model: each token id's bytes, which
// ids end a sequence, and a trie of the bytes, so that a mask walks each shared prefix once and
// leaves a whole subtree at the first byte that leaves the source.
struct TokenPieces {
  static std::shared_ptr<const TokenPieces> make(std::vector<std::string> bytes, std::vector<int32_t> endIds);

  std::vector<std::string> bytes;    // by token id; empty for special tokens
  std::vector<int32_t> endIds;       // end-of-sequence ids

  struct TrieEdge {
    uint8_t byte;
    int32_t to;
    int32_t next;  // the node's next edge, or -1
  };
  std::vector<int32_t> trieFirstEdge;   // per trie node (0: the root); -1 when it has none
  std::vector<int32_t> trieFirstToken;  // per trie node: a token whose bytes end there, or -1
  std::vector<int32_t> nextToken;       // per token id: the next token ending at its node, or -1
  std::vector<TrieEdge> trieEdges;
};

class SpanConstraint {
public:
  SpanConstraint(std::shared_ptr<const SpanSource> source, std::shared_ptr<const TokenPieces> pieces);

  // Sets logits[t] = -inf for every token t that would take the text out of the source.
  // `stopTokenIds` are allowed like end-of-sequence ids; `stops` end the text where they occur
  // in a token (a sequence's stops are read at its first mask and taken to stay the same).
  // Returns how many tokens stay allowed; the row is unchanged when that is 0, when the
  // constraint has lifted, or when, within the answer's first word, the best allowed token is
  // less than `floor` times as probable as the best token (which lifts it).
  size_t mask(std::span<float> logits, std::span<const std::string> stops,
              std::span<const int32_t> stopTokenIds, float floor = 0);

  // Follows the sampled token (a token mask() did not allow moves the state outside the
  // source: the constraint has lifted, every later token is allowed).
  void advance(int32_t token);
  // Back to an empty text (a new prompt).
  void reset();

  bool started() const { return m_started; }
  bool outside() const { return m_state == SpanSource::kNone; }  // lifted: generation is free

private:
  struct Walk {
    int32_t state;
    bool started;
    bool space;
  };
  // The walk after `bytes` from `w`; state kNone when it leaves the source.
  Walk walk(Walk w, std::string_view bytes) const;
  // Whether each token keeps the text in the source: the ones in the trie by one depth-first
  // walk, the ones holding a stop string each up to it.
  void decide(std::span<uint8_t> allowed, std::span<const std::string> stops);

  std::shared_ptr<const SpanSource> m_source;
  std::shared_ptr<const TokenPieces> m_pieces;
  int32_t m_state = SpanSource::kRoot;
  bool m_started = false;  // a character (not whitespace) has been generated
  bool m_space = false;    // the text ends in whitespace (matched as one space)
  bool m_spaced = false;   // a space has followed the first word: the floor no longer applies
  // The tokens that hold a stop string, with where its first one starts (read at the first mask).
  bool m_stopsRead = false;
  std::vector<std::pair<int32_t, size_t>> m_stopCuts;
  std::vector<uint8_t> m_holdsStop;  // by token id
  std::vector<std::pair<int32_t, Walk>> m_stack;  // decide()'s scratch
  std::vector<uint8_t> m_allowed;                 // mask()'s scratch: by token id
};

}  // namespace rag::model
