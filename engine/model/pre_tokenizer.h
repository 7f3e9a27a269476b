// Pre-tokenizer split patterns: the regexes real byte-level BPE tokenizers split text with,
// implemented as hand-written scanners (std::regex has no \p{L}) and recognised by their exact
// pattern string in tokenizer.json.
//
//   RAG_ASSIGN_OR_RETURN(SplitPattern p, recognizeSplitPattern(regexFromTokenizerJson));
//   for (std::string_view piece : splitWithPattern(p, "Hello world!"))  // "Hello", " world", "!"
//     ...;
//
// Included by tokenizer.h; the tokenizer and the BPE trainer share these scanners.
#pragma once

#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag::model {

enum class SplitPattern {
  Gpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Llama3,  // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  Qwen2,   // Llama3 with \p{N} (single digits) instead of \p{N}{1,3}
};

// The regex string of a pattern, exactly as tokenizer.json spells it.
std::string_view splitPatternRegex(SplitPattern pattern);

// The pattern whose regex string is `regex`; InvalidArgument naming the regex otherwise.
Result<SplitPattern> recognizeSplitPattern(std::string_view regex);

// Splits text the way the regex with HF's "Isolated" behaviour does: every match is a piece and
// the pieces concatenate back to `text` (every character matches one of the alternatives).
// Invalid UTF-8 bytes are single characters outside \s, \p{L} and \p{N}. The views point into
// `text`.
std::vector<std::string_view> splitWithPattern(SplitPattern pattern, std::string_view text);

// The same pieces appended to `out` (which is not cleared), for callers that split many texts
// into one reused vector.
void appendSplitPieces(SplitPattern pattern, std::string_view text,
                       std::vector<std::string_view>& out);

}  // namespace rag::model
