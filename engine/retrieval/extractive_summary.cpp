#include "retrieval/extractive_summary.h"

#include <algorithm>
#include <map>
#include <set>

#include "model/lexical_words.h"

namespace rag::retrieval {

namespace {

using WordSet = std::set<uint64_t>;

// A text's words (model/lexical_words.h: lower-cased runs of letters and digits, hashed; the
// stopwords BM25's queries drop, "what", "is", "of", left out).
WordSet wordSet(std::string_view text) {
  const std::vector<uint64_t> h = model::textWords(text).hashes;
  return {h.begin(), h.end()};
}

// The query's words and how often it uses each.
std::map<uint64_t, int> queryWords(std::string_view query) {
  std::map<uint64_t, int> out;
  for (uint64_t w : model::textWords(query).hashes) ++out[w];
  return out;
}

int32_t sharedWords(const WordSet& words, const std::map<uint64_t, int>& query) {
  int32_t n = 0;
  for (const auto& [w, count] : query) n += count > 0 && words.count(w) ? 1 : 0;
  return n;
}

// `text` cut at every `sep` (the separators dropped; a trailing one leaves no empty last piece).
std::vector<std::string_view> pieces(std::string_view text, std::string_view sep) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(sep, at);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(at, end - at));
    at = end + sep.size();
  }
  return out;
}

// What a standalone sentence says of its names: after "names: " and a clause label ("kind of: "),
// the value ("protoctist order"); a gloss is all value.
std::string_view sentenceValue(const ScoredSentence& s) {
  std::string_view body = s.text;
  if (body.starts_with(s.names) && body.substr(s.names.size()).starts_with(": ")) body.remove_prefix(s.names.size() + 2);
  const size_t colon = body.find(": ");
  return colon == std::string_view::npos ? body : body.substr(colon + 2);
}

}  // namespace

std::vector<std::string> passageSentences(std::string_view passage) {
  std::vector<std::string> out;
  for (std::string_view s : pieces(passage, ". ")) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '.' || s.back() == ' ')) s.remove_suffix(1);
    while (!s.empty() && (s.front() == '\n' || s.front() == ' ')) s.remove_prefix(1);
    if (!s.empty()) out.emplace_back(s);
  }
  return out;
}

std::string_view passageNames(std::string_view passage) {
  const size_t colon = passage.substr(0, kMaxNamesBytes).find(':');
  return colon == std::string_view::npos ? std::string_view() : passage.substr(0, colon);
}

std::string standaloneSentence(std::string_view names, std::string_view sentence) {
  std::string s = names.empty() || sentence.starts_with(names) ? std::string(sentence)
                                                               : std::string(names) + ": " + std::string(sentence);
  if (s.empty() || s.back() != '.') s += '.';
  return s;
}

namespace {

// A scored sentence and its words (what the bridge reads again).
struct Ranked {
  ScoredSentence s;
  WordSet words;
};

std::vector<Ranked> rankSentences(const std::map<uint64_t, int>& asked, const std::vector<std::string_view>& passages) {
  std::vector<Ranked> out;
  for (size_t p = 0; p < passages.size(); ++p) {
    const std::string_view names = passageNames(passages[p]);
    const std::vector<std::string> all = passageSentences(passages[p]);
    for (size_t i = 0; i < all.size(); ++i) {
      Ranked r;
      r.s.text = standaloneSentence(names, all[i]);
      r.s.names = std::string(names);
      r.s.passage = static_cast<int32_t>(p);
      r.s.sentence = static_cast<int32_t>(i);
      r.words = wordSet(r.s.text);
      r.s.score = sharedWords(r.words, asked);
      out.push_back(std::move(r));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Ranked& a, const Ranked& b) { return a.s.score > b.s.score; });
  return out;
}

}  // namespace

std::vector<ScoredSentence> scoreSentences(std::string_view query, const std::vector<std::string_view>& passages) {
  std::vector<ScoredSentence> out;
  for (Ranked& r : rankSentences(queryWords(query), passages)) out.push_back(std::move(r.s));
  return out;
}

ExtractiveSummary extractiveSummary(std::string_view query, const std::vector<std::string_view>& passages,
                                    int64_t keep) {
  const std::map<uint64_t, int> asked = queryWords(query);
  const std::vector<Ranked> ranked = rankSentences(asked, passages);
  ExtractiveSummary out;
  out.scored = static_cast<int64_t>(ranked.size());
  const size_t kept = static_cast<size_t>(std::clamp<int64_t>(keep, 0, out.scored));
  if (kept == 0) return out;
  // The query words the kept sentences leave over, each use of a word counted once per sentence.
  std::map<uint64_t, int> left = asked;
  for (size_t i = 0; i < kept; ++i)
    for (uint64_t w : ranked[i].words)
      if (auto it = left.find(w); it != left.end()) --it->second;
  // The bridge: a sentence of another passage, every name of which the last kept sentence's value
  // names, holding left-over words; the most of them, then the best score, then the best rank.
  const ScoredSentence& last = ranked[kept - 1].s;
  const WordSet value = wordSet(sentenceValue(last));
  const ScoredSentence* bridge = nullptr;
  int32_t bridgeLeft = 0;
  for (size_t i = kept; i < ranked.size(); ++i) {
    const ScoredSentence& s = ranked[i].s;
    if (s.passage == last.passage) continue;
    const WordSet names = wordSet(s.names);
    if (names.empty() || !std::includes(value.begin(), value.end(), names.begin(), names.end())) continue;
    const int32_t n = sharedWords(ranked[i].words, left);
    if (n > bridgeLeft) {  // ranked is best first, so the first of equals is kept
      bridge = &s;
      bridgeLeft = n;
    }
  }
  for (size_t i = 0; i < kept; ++i) out.text += (i ? " " : "") + ranked[i].s.text;
  if (bridge) out.text += " " + bridge->text;
  out.text += '\n';
  out.kept = static_cast<int64_t>(kept) + (bridge ? 1 : 0);
  out.bridged = bridge != nullptr;
  return out;
}

std::vector<std::string_view> passageLines(std::string_view text) {
  std::vector<std::string_view> out = pieces(text, "\n");
  std::erase_if(out, [](std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; });
  return out;
}

}  // namespace rag::retrieval
