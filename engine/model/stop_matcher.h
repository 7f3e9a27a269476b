// Stop strings over streamed text: decides, piece by piece, what may be shown to the user now
// and what must be held back because it could be the start of a stop string.
//
//   StopMatcher stops(params.stop);                    // e.g. {"\nQuestion:", "</answer>"}
//   for (each decoded token) {
//     StopMatcher::Action a = stops.feed(newText);     // newText: the token's decoded bytes
//     stream(a.emit);
//     if (a.stopped) return a.finalText;               // the text before the stop string
//   }
//   stream(stops.flush());                             // EOS or maxTokens: release the rest
//   return stops.text();
//
// A stop string is found wherever it lies, also when it spans several pieces; the earliest
// occurrence in the text wins, and among stop strings that start there, the first in the list.
// Emitted text never contains any part of a stop string that matched, and it never ends inside
// a UTF-8 sequence (an incomplete trailing sequence is held back until its last byte arrives;
// flush() releases whatever is left). Held-back text is at most the longest stop string minus
// one byte, plus three bytes of an incomplete character.
//
// Matching is on bytes: a stop string that is valid UTF-8 can only match at character
// boundaries of valid UTF-8 text. Empty stop strings are ignored (SamplingParams::validate
// rejects them).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rag::model {

class StopMatcher {
public:
  explicit StopMatcher(std::span<const std::string> stops);

  struct Action {
    std::string emit;         // text that may be streamed now
    bool stopped = false;     // a stop string has matched; nothing more will be emitted
    int32_t stopIndex = -1;   // when stopped: the index of the stop string in the constructor's
                              // list
    std::string finalText;    // when stopped: all the text before the stop string (everything
                              // emitted, `emit` included)
  };

  // Appends `newText` to the text seen so far. After a stop, further calls return an Action
  // that repeats stopped, stopIndex and finalText with nothing to emit.
  Action feed(std::string_view newText);

  // Releases the held-back text when generation ends without a stop string (EOS, maxTokens);
  // empty after a stop.
  std::string flush();

  bool stopped() const { return m_stopIndex >= 0; }
  // Everything emitted so far (through feed() and flush()); after a stop, the final text.
  const std::string& text() const { return m_emitted; }
  // The text held back now.
  const std::string& pending() const { return m_pending; }

private:
  size_t holdBackLength(std::string_view buffer) const;
  Action stoppedAction() const;

  std::vector<std::string> m_stops;
  std::vector<int32_t> m_stopIndexes;  // index of each m_stops entry in the caller's list
  std::string m_pending;
  std::string m_emitted;
  int32_t m_stopIndex = -1;
};

}  // namespace rag::model
