#pragma once
// RECOMP's extractive compression (Xu et al. 2024, §3.1), the sentence selection behind a
// compression node: split the retrieved passages into sentences, score each against the query,
// keep the best few as the summary the reader sees instead of the passages.
//
// A sentence is scored by the distinct query words it contains (the words of
// model/lexical_words.h: the stopwords BM25's queries drop, "what", "is", "of", left out); ties
// go to the better-ranked passage, then the earlier sentence. RECOMP trains a dual encoder for this score; its lexical
// baseline (BM25 over sentences) is what this is. Each kept sentence carries its passage's names
// ("dog, domestic dog: member of: Canis.") so that a relation clause says whose relation it is.
//
// One step goes beyond RECOMP, for two-hop questions ("X is a kind of something; what is that a
// member of?"): when the query uses a word more often than the kept sentences hold it, the
// summary follows the last kept sentence's value ("kind of: protoctist order") to a passage named
// by it and adds that passage's sentence holding the most of the left-over words ("protoctist
// order: member of: Protoctista."). A one-hop question leaves nothing over and gets no bridge.
// Measured in the README (issue 21): with the role model, RECOMP answers 0.59 of 2,000 test
// questions, One-shot 0.56 (0.29 when the model wrote the summary).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rag::retrieval {

// The ". "-separated sentences of one formatted passage ("names: gloss. kind of: X. ..."), each
// without its final '.' and the white space around it.
std::vector<std::string> passageSentences(std::string_view passage);

// The text before a passage's first ':' (its names); empty when it has none within its first
// kMaxNamesBytes bytes (then it is not a formatted passage, and its sentences carry no names).
inline constexpr size_t kMaxNamesBytes = 256;
std::string_view passageNames(std::string_view passage);

// `sentence` as it stands alone: prefixed with "<names>: " unless the names are empty or it starts
// with them already, ending in '.'.
std::string standaloneSentence(std::string_view names, std::string_view sentence);

struct ScoredSentence {
  std::string text;      // standaloneSentence()
  std::string names;     // its passage's names
  int32_t passage = 0;   // its passage's rank among the inputs
  int32_t sentence = 0;  // its place in that passage
  int32_t score = 0;     // distinct query words it contains
};

// Every sentence of `passages` (best-ranked first) scored against `query`, best first.
std::vector<ScoredSentence> scoreSentences(std::string_view query, const std::vector<std::string_view>& passages);

struct ExtractiveSummary {
  std::string text;          // the kept sentences joined by spaces, ending in '\n'; empty when none
  int64_t scored = 0;        // sentences scored
  int64_t kept = 0;          // sentences in the summary, the bridge included
  bool bridged = false;      // a second-hop sentence was added (see the file comment)
};

// The `keep` best sentences of `passages` for `query`, and a bridge sentence when the query asks
// for one.
ExtractiveSummary extractiveSummary(std::string_view query, const std::vector<std::string_view>& passages,
                                    int64_t keep);

// Splits a passages variable's text (one passage per line, as retrieval nodes write it).
std::vector<std::string_view> passageLines(std::string_view text);

}  // namespace rag::retrieval
