#include "model/stop_matcher.h"

#include <algorithm>

namespace rag::model {

namespace {

// Bytes at the end of `s` that begin a UTF-8 sequence whose remaining bytes have not arrived
// yet; 0 when `s` ends on a character boundary (or in bytes that are not UTF-8 at all, which
// are never held back).
size_t incompleteUtf8Tail(std::string_view s) {
  for (size_t k = 1; k <= std::min<size_t>(3, s.size()); ++k) {
    auto b = static_cast<unsigned char>(s[s.size() - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    if (b < 0xC0 || b >= 0xF8) return 0;  // ASCII or not a lead byte
    size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    return need > k ? k : 0;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::span<const std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i)
    if (!stops[i].empty()) {
      m_stops.push_back(stops[i]);
      m_stopIndexes.push_back(static_cast<int32_t>(i));
    }
}

StopMatcher::Action StopMatcher::stoppedAction() const {
  Action a;
  a.stopped = true;
  a.stopIndex = m_stopIndex;
  a.finalText = m_emitted;
  return a;
}

// The longest suffix of `buffer` that is a proper prefix of some stop string, or the incomplete
// UTF-8 character at its end when that is longer.
size_t StopMatcher::holdBackLength(std::string_view buffer) const {
  size_t hold = 0;
  for (const std::string& s : m_stops) {
    for (size_t len = std::min(s.size() - 1, buffer.size()); len > hold; --len)
      if (buffer.ends_with(std::string_view(s).substr(0, len))) {
        hold = len;
        break;
      }
  }
  return std::max(hold, incompleteUtf8Tail(buffer));
}

StopMatcher::Action StopMatcher::feed(std::string_view newText) {
  if (stopped()) return stoppedAction();
  m_pending.append(newText);
  const std::string_view buffer = m_pending;

  // The held-back text holds no whole stop string (else it would have stopped), so any match
  // ends in newText; searching the whole buffer finds those that start in the held-back part.
  size_t matchPos = std::string_view::npos;
  size_t matchStop = 0;
  for (size_t i = 0; i < m_stops.size(); ++i) {
    size_t pos = buffer.find(m_stops[i]);
    if (pos < matchPos) {
      matchPos = pos;
      matchStop = i;
    }
  }

  if (matchPos != std::string_view::npos) {
    std::string emit(buffer.substr(0, matchPos));
    m_emitted += emit;
    m_stopIndex = m_stopIndexes[matchStop];
    m_pending.clear();
    Action a = stoppedAction();
    a.emit = std::move(emit);
    return a;
  }

  Action a;
  size_t keep = holdBackLength(buffer);
  a.emit = std::string(buffer.substr(0, buffer.size() - keep));
  m_emitted += a.emit;
  m_pending.erase(0, buffer.size() - keep);
  return a;
}

std::string StopMatcher::flush() {
  if (stopped()) return {};
  std::string out = std::move(m_pending);
  m_pending.clear();
  m_emitted += out;
  return out;
}

}  // namespace rag::model
