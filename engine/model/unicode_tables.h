// Unicode facts the tokenizers need, without ICU: UTF-8 decoding, the character classes behind
// the pre-tokenizer regexes (\p{L}, \p{N}, \s) and BERT's normalizer (punctuation, controls,
// accents, CJK ideographs), simple lowercasing, and canonical normalization (NFD, NFC).
//
// The tables are generated from Unicode 14.0 (Python 3.11's unicodedata, the version Debian 12
// ships); the generator is at the end of unicode_tables.cpp. They are exact for what they cover,
// with these documented approximations:
//  - "control" (BERT clean_text) is Cc, Cf and Co; HF also drops unassigned code points (Cn),
//    which we keep, so text with unassigned code points can normalize differently.
//  - canonical decompositions leave out the CJK compatibility ideographs (U+F900..U+FAFF and
//    U+2F800..U+2FA1F), which NFD/NFC map to unified ideographs; we keep them as they are.
//  - lowercasing is Unicode's simple (1:1) mapping plus U+0130 -> "i\u0307"; the few other
//    multi-character lowercase mappings do not exist in Unicode 14.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rag::model::unicode {

// One decoded character: its code point and how many bytes it took. An invalid or truncated
// sequence decodes as one byte with valid == false and cp == U+FFFD, so scanning always makes
// progress and byte-level tokenizers can still carry the raw byte.
struct DecodedChar {
  char32_t cp = 0;
  uint8_t len = 0;
  bool valid = false;
};

// Decodes the character starting at s[pos]; pos < s.size() is required. Overlong forms,
// surrogates and code points above U+10FFFF are invalid.
DecodedChar decodeUtf8(std::string_view s, size_t pos);

// Appends the UTF-8 encoding of cp (cp <= U+10FFFF and not a surrogate).
void appendUtf8(std::string& out, char32_t cp);

// True when the whole string is valid UTF-8.
bool isValidUtf8(std::string_view s);

// General-category classes the tokenizers distinguish. Everything else (symbols, separators,
// spacing marks, unassigned) is Other.
enum class CharClass : uint8_t {
  Other,
  Letter,       // L*  (\p{L})
  Number,       // N*  (\p{N})
  Punctuation,  // P*
  Mark,         // Mn  (what accent stripping removes)
  Control,      // Cc, Cf, Co
};

CharClass charClass(char32_t cp);

inline bool isLetter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return charClass(cp) == CharClass::Letter;
}
inline bool isNumber(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return charClass(cp) == CharClass::Number;
}

// Unicode White_Space, which is what \s matches in the Oniguruma regexes HF tokenizers use and
// what Rust's char::is_whitespace tests.
bool isWhitespace(char32_t cp);

// BERT's punctuation test: any ASCII non-alphanumeric printable character, or category P*.
bool isBertPunctuation(char32_t cp);

// BERT's control test: category Cc, Cf or Co, except \t, \n and \r (which count as whitespace).
bool isBertControl(char32_t cp);

// The CJK ideograph blocks BERT surrounds with spaces (tokenizers' is_chinese_char).
bool isCjkIdeograph(char32_t cp);

// Appends the lowercase form of cp (see the header comment for the mapping used).
void appendLower(std::string& out, char32_t cp);

// Canonical combining class (0 for starters).
uint8_t combiningClass(char32_t cp);

// Canonical normalization of valid UTF-8 text; invalid bytes are copied through unchanged and
// act as starters. See the header comment for what the tables leave out.
std::string nfd(std::string_view text);
std::string nfc(std::string_view text);

}  // namespace rag::model::unicode
