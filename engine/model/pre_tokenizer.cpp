// Hand-written scanners for the pre-tokenizer split regexes (see pre_tokenizer.h).
#include "model/pre_tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/unicode_tables.h"

namespace rag::model {

namespace {

namespace uc = unicode;

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// One character as the regex classes see it. Invalid UTF-8 bytes are one-byte characters in
// none of the classes.
struct ScanChar {
  char32_t cp;
  uint32_t len;
  bool letter;
  bool number;
  bool space;
  bool other() const { return !letter && !number && !space; }
};

ScanChar scanAt(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    bool letter = (b | 0x20) >= 'a' && (b | 0x20) <= 'z';
    bool number = b >= '0' && b <= '9';
    bool space = b == ' ' || (b >= 0x09 && b <= 0x0D);
    return {b, 1, letter, number, space};
  }
  uc::DecodedChar d = uc::decodeUtf8(s, i);
  if (!d.valid) return {0xFFFD, 1, false, false, false};
  uc::CharClass k = uc::charClass(d.cp);
  return {d.cp, d.len, k == uc::CharClass::Letter, k == uc::CharClass::Number,
          uc::isWhitespace(d.cp)};
}

template <typename Pred>
size_t runWhile(std::string_view s, size_t i, Pred pred) {
  while (i < s.size()) {
    ScanChar c = scanAt(s, i);
    if (!pred(c)) break;
    i += c.len;
  }
  return i;
}

bool isLetterChar(const ScanChar& c) { return c.letter; }
bool isNumberChar(const ScanChar& c) { return c.number; }
bool isOtherChar(const ScanChar& c) { return c.other(); }

// `\s+(?!\S)|\s+` at a whitespace character: the whole run when it ends the text or is one
// character long, otherwise the run without its last character (which then prefixes the next
// piece). With `newlines`, `\s*[\r\n]+` comes first: up to and including the run's last \r/\n.
size_t matchWhitespace(std::string_view s, size_t i, bool newlines) {
  size_t end = i;
  size_t lastStart = i;
  size_t count = 0;
  size_t afterNewline = 0;
  while (end < s.size()) {
    ScanChar c = scanAt(s, end);
    if (!c.space) break;
    lastStart = end;
    end += c.len;
    ++count;
    if (c.cp == '\r' || c.cp == '\n') afterNewline = end;
  }
  if (newlines && afterNewline != 0) return afterNewline;
  if (end == s.size() || count < 2) return end;
  return lastStart;
}

size_t matchGpt2(std::string_view s, size_t i) {
  const size_t n = s.size();
  if (s[i] == '\'' && i + 1 < n) {
    char c = s[i + 1];
    if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
    if (i + 2 < n) {
      char d = s[i + 2];
      if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l')) return i + 3;
    }
  }
  ScanChar c0 = scanAt(s, i);
  size_t start = i;
  if (c0.cp == ' ' && i + 1 < n) {
    // ` ?X+`: a single space joins the run after it.
    ScanChar c1 = scanAt(s, i + 1);
    if (!c1.space) {
      start = i + 1;
      c0 = c1;
    }
  }
  if (c0.letter) return runWhile(s, start, isLetterChar);
  if (c0.number) return runWhile(s, start, isNumberChar);
  if (c0.other()) return runWhile(s, start, isOtherChar);
  return matchWhitespace(s, i, false);
}

char asciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

size_t matchLlama3(std::string_view s, size_t i, int maxDigits) {
  const size_t n = s.size();
  // (?i:'s|'t|'re|'ve|'m|'ll|'d); U+017F LATIN SMALL LETTER LONG S case-folds to 's'.
  if (s[i] == '\'' && i + 1 < n) {
    char c = asciiLower(s[i + 1]);
    if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
    if (s.substr(i + 1, 2) == "\xC5\xBF") return i + 3;
    if (i + 2 < n) {
      char d = asciiLower(s[i + 2]);
      if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l')) return i + 3;
    }
  }
  ScanChar c0 = scanAt(s, i);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c0.letter) return runWhile(s, i, isLetterChar);
  if (!c0.number && c0.cp != '\r' && c0.cp != '\n' && i + c0.len < n &&
      scanAt(s, i + c0.len).letter)
    return runWhile(s, i + c0.len, isLetterChar);
  // \p{N}{1,maxDigits}
  if (c0.number) {
    size_t end = i;
    for (int k = 0; k < maxDigits && end < n; ++k) {
      ScanChar c = scanAt(s, end);
      if (!c.number) break;
      end += c.len;
    }
    return end;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t start = i;
  bool other = c0.other();
  if (c0.cp == ' ' && i + 1 < n && scanAt(s, i + 1).other()) {
    start = i + 1;
    other = true;
  }
  if (other) {
    size_t end = runWhile(s, start, isOtherChar);
    while (end < n && (s[end] == '\r' || s[end] == '\n')) ++end;
    return end;
  }
  return matchWhitespace(s, i, true);
}

size_t matchPattern(SplitPattern pattern, std::string_view s, size_t i) {
  switch (pattern) {
    case SplitPattern::Gpt2: return matchGpt2(s, i);
    case SplitPattern::Llama3: return matchLlama3(s, i, 3);
    case SplitPattern::Qwen2: return matchLlama3(s, i, 1);
  }
  return s.size();
}

}  // namespace

std::string_view splitPatternRegex(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::Gpt2: return kGpt2Regex;
    case SplitPattern::Llama3: return kLlama3Regex;
    case SplitPattern::Qwen2: return kQwen2Regex;
  }
  return {};
}

Result<SplitPattern> recognizeSplitPattern(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2})
    if (regex == splitPatternRegex(p)) return p;
  return Status::invalidArgument(
      "pre-tokenizer split regex '" + std::string(regex) +
      "' is not supported; supported: the GPT-2, Llama-3 and Qwen2 patterns (this reader "
      "implements those as scanners instead of a general regex engine)");
}

void appendSplitPieces(SplitPattern pattern, std::string_view text,
                       std::vector<std::string_view>& out) {
  for (size_t i = 0; i < text.size();) {
    size_t end = matchPattern(pattern, text, i);
    out.push_back(text.substr(i, end - i));
    i = end;
  }
}

std::vector<std::string_view> splitWithPattern(SplitPattern pattern, std::string_view text) {
  std::vector<std::string_view> out;
  appendSplitPieces(pattern, text, out);
  return out;
}

}  // namespace rag::model
