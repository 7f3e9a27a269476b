// Tokenizer read from a Hugging Face tokenizer.json, without Python or the tokenizers crate.
//
// Two model families are supported:
//  - byte-level BPE (GPT-2, Llama-3, Qwen2, and what bpe_trainer.h writes): text is split by
//    the pre-tokenizer's regex, each piece's bytes are mapped to GPT-2's printable "byte
//    symbols" and merged by rank. decode(encode(s)) == s for every byte string s when the
//    vocabulary holds all 256 byte symbols, no normalizer is configured and add_prefix_space
//    is off (true of the three families above except Qwen2, whose NFC normalizer changes
//    non-NFC input).
//  - WordPiece (BERT): BertNormalizer, BertPreTokenizer, greedy longest-match-first with "##"
//    continuation pieces and [UNK] for words that cannot be covered.
//
//   RAG_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load("datasets/tokenizer"));  // dir or file
//   std::vector<int32_t> ids = tok.encode("The quick fox", {.addBos = true});
//   RAG_ASSIGN_OR_RETURN(std::string text, tok.decode(ids, {.skipSpecial = true}));
//
// Added tokens (the tokenizer.json "added_tokens" list: <|bos|>, [CLS], ...) are found in the
// raw text first (leftmost, then longest), are never split, and skip normalization and
// pre-tokenization; their lstrip/rstrip/single_word flags are honoured. HF matches tokens marked
// "normalized": true against normalized text; we match every added token against the raw text,
// which only differs when a normalizer changes an added token's spelling.
//
// Post-processing is explicit: encode() adds BOS/EOS or [CLS]/[SEP] only when EncodeOptions
// asks, whatever the tokenizer.json post_processor says.
//
// A Tokenizer is immutable after load and cheap to copy (shared state); encode() and decode()
// may be called from many threads at once (the BPE word cache takes a mutex).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/pre_tokenizer.h"
#include "rag/status.h"

namespace rag::model {

// ---- GPT-2 byte-level mapping ----------------------------------------------------------------
// Every byte maps to one printable code point: bytes '!'..'~', U+00A1..U+00AC and
// U+00AE..U+00FF map to themselves; the other 68 bytes map to U+0100.. in byte order, so
// byte 32 (space) is 'Ġ' U+0120 and byte 10 (newline) is 'Ċ' U+010A.
char32_t byteToSymbol(uint8_t byte);
// The byte a symbol code point stands for, or nullopt for a code point outside the mapping.
std::optional<uint8_t> symbolToByte(char32_t cp);
// The UTF-8 string of the symbols of `bytes` (what a byte-level vocabulary stores).
std::string bytesToSymbols(std::string_view bytes);

// ---- Tokenizer -------------------------------------------------------------------------------
enum class TokenizerKind { ByteLevelBpe, WordPiece };

struct EncodeOptions {
  bool addBos = false;       // prepend bosId(); nothing is added when bosId() is nullopt
  bool addEos = false;       // append eosId(); nothing is added when eosId() is nullopt
  bool addClsSep = false;    // wrap in clsId() ... sepId() (BERT); each only when defined
  bool parseSpecial = true;  // false: added tokens' text is encoded like ordinary text
};

struct DecodeOptions {
  bool skipSpecial = false;  // drop added tokens marked "special" (BOS, [CLS], padding, ...)
};

class Tokenizer {
public:
  // Loads `path`: a tokenizer.json file, or a directory holding one. A tokenizer_config.json
  // next to it, when present, names the BOS/EOS/PAD tokens (HF's bos_token, eos_token,
  // pad_token). Errors: NotFound (no file), Corrupt (bad JSON or an inconsistent vocabulary,
  // naming the file and the entry), InvalidArgument (a model, normalizer, pre-tokenizer or
  // decoder type this reader does not implement, naming it and what is supported).
  static Result<Tokenizer> load(const std::filesystem::path& path);

  // Parses tokenizer.json text; `origin` names it in error messages. `configJson`, when not
  // empty, is the tokenizer_config.json text.
  static Result<Tokenizer> fromJson(std::string_view json, std::string_view origin,
                                    std::string_view configJson = {});

  // Token ids of `text` (any bytes; for byte-level BPE invalid UTF-8 is encoded byte by byte).
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // The text of `ids`. For byte-level BPE the result is the exact bytes (it may end inside a
  // UTF-8 sequence when `ids` is a prefix of a longer encoding; no U+FFFD substitution).
  // InvalidArgument naming the first id outside [0, vocabSize()) or an unassigned id.
  Result<std::string> decode(std::span<const int32_t> ids,
                             const DecodeOptions& options = {}) const;

  TokenizerKind kind() const;
  // One past the largest id in the vocabulary or the added tokens.
  int32_t vocabSize() const;
  // The id of a vocabulary entry or added token spelled exactly `token` (byte-level entries
  // are spelled in byte symbols: " the" is "Ġthe").
  std::optional<int32_t> tokenId(std::string_view token) const;
  // The vocabulary spelling of an id; nullopt when out of range or unassigned.
  std::optional<std::string> tokenText(int32_t id) const;
  // True for added tokens marked "special".
  bool isSpecial(int32_t id) const;

  std::optional<int32_t> bosId() const;
  std::optional<int32_t> eosId() const;
  std::optional<int32_t> padId() const;
  std::optional<int32_t> unkId() const;
  std::optional<int32_t> clsId() const;
  std::optional<int32_t> sepId() const;

  // The pieces the normalizer and pre-tokenizer produce for a text without added tokens
  // (before the byte mapping), for tests and for tools that show how text is split.
  std::vector<std::string> preTokenize(std::string_view text) const;

  struct Impl;  // defined in tokenizer.cpp

private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : m_impl(std::move(impl)) {}
  std::shared_ptr<const Impl> m_impl;
};

// Copies a model directory's tokenizer files from `from` into `to` (each written atomically):
// tokenizer.json, required, and tokenizer_config.json when `from` has one. Nothing when `from`
// is empty. NotFound naming a missing tokenizer.json.
Status copyTokenizerFiles(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace rag::model
