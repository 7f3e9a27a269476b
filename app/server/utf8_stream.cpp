#include "server/utf8_stream.h"

#include <cstdint>

namespace rag::server {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The sequence length a lead byte starts (0: not a lead byte) and the range its first
// continuation byte must fall in (excluding overlongs, surrogates and code points > U+10FFFF).
struct Lead {
  int length = 0;
  uint8_t lo = 0x80, hi = 0xBF;
};

Lead leadOf(uint8_t c) {
  if (c < 0x80) return {1};
  if (c >= 0xC2 && c <= 0xDF) return {2};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0};
}

}  // namespace

std::string Utf8Assembler::push(std::string_view bytes) {
  std::string in = std::move(m_pending);
  m_pending.clear();
  in.append(bytes);
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto c = static_cast<uint8_t>(in[i]);
    const Lead lead = leadOf(c);
    if (lead.length == 1) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    if (lead.length == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    // How many continuation bytes after the lead are valid.
    int valid = 1;
    while (valid < lead.length && i + static_cast<size_t>(valid) < in.size()) {
      const auto b = static_cast<uint8_t>(in[i + static_cast<size_t>(valid)]);
      const uint8_t lo = valid == 1 ? lead.lo : 0x80, hi = valid == 1 ? lead.hi : 0xBF;
      if (b < lo || b > hi) break;
      ++valid;
    }
    if (valid == lead.length) {
      out.append(in, i, static_cast<size_t>(valid));
    } else if (i + static_cast<size_t>(valid) == in.size()) {
      m_pending = in.substr(i);  // incomplete so far: the next piece may complete it
      break;
    } else {
      out.append(kReplacement);  // the maximal invalid subpart
    }
    i += static_cast<size_t>(valid);
  }
  return out;
}

std::string Utf8Assembler::flush() {
  if (m_pending.empty()) return {};
  m_pending.clear();
  return std::string(kReplacement);
}

std::string sanitizeUtf8(std::string_view s) {
  Utf8Assembler a;
  std::string out = a.push(s);
  return out + a.flush();
}

}  // namespace rag::server
