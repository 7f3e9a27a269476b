#include "model/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/fs.h"
#include "core/json_writer.h"
#include "model/tokenizer.h"

namespace rag::model {

namespace {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

using PairKey = uint64_t;
PairKey pairKey(int32_t a, int32_t b) {
  return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
}
int32_t pairFirst(PairKey p) { return static_cast<int32_t>(p >> 32); }
int32_t pairSecond(PairKey p) { return static_cast<int32_t>(p & 0xFFFFFFFFu); }

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

// Heap entry; the heap is lazy: an entry whose count no longer matches the live count is
// re-pushed or dropped when it reaches the top.
struct HeapEntry {
  int64_t count;
  PairKey pair;
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : pair > o.pair;  // max count, then min pair
  }
};

class PairTable {
public:
  void add(PairKey p, int64_t delta, int32_t word) {
    int64_t& c = m_counts[p];
    c += delta;
    if (delta > 0) {
      std::vector<int32_t>& w = m_words[p];
      if (w.empty() || w.back() != word) w.push_back(word);
      m_grown.push_back(p);
    }
  }
  int64_t count(PairKey p) const {
    auto it = m_counts.find(p);
    return it == m_counts.end() ? 0 : it->second;
  }
  // Removes the pair and returns the words that may contain it.
  std::vector<int32_t> take(PairKey p) {
    m_counts.erase(p);
    std::vector<int32_t> words;
    if (auto it = m_words.find(p); it != m_words.end()) {
      words = std::move(it->second);
      m_words.erase(it);
    }
    return words;
  }
  // Pairs whose count grew since the last call, each once.
  std::vector<PairKey> drainGrown() {
    std::sort(m_grown.begin(), m_grown.end());
    m_grown.erase(std::unique(m_grown.begin(), m_grown.end()), m_grown.end());
    return std::exchange(m_grown, {});
  }

private:
  std::unordered_map<PairKey, int64_t> m_counts;
  std::unordered_map<PairKey, std::vector<int32_t>> m_words;
  std::vector<PairKey> m_grown;
};

Status validate(const BpeTrainParams& params) {
  std::unordered_set<std::string> seen;
  for (const std::string& s : params.specialTokens) {
    if (s.empty()) return Status::invalidArgument("BPE training: a special token is empty");
    if (!seen.insert(s).second)
      return Status::invalidArgument("BPE training: special token '" + s + "' is listed twice");
  }
  const int64_t floor = 256 + static_cast<int64_t>(params.specialTokens.size());
  if (params.vocabSize < floor)
    return Status::invalidArgument("BPE training: vocabulary size " +
                                   std::to_string(params.vocabSize) + " is below " +
                                   std::to_string(floor) +
                                   " (the 256 byte symbols plus the special tokens)");
  if (params.minPairCount < 1)
    return Status::invalidArgument("BPE training: minPairCount must be at least 1");
  return Status::ok();
}

// Splits `text` around special tokens and calls piece() for each GPT-2 pre-token.
template <typename Fn>
void forEachPreToken(std::string_view text, const std::vector<std::string>& specials, Fn&& piece) {
  while (!text.empty()) {
    size_t cut = text.size();
    size_t skip = 0;
    for (const std::string& s : specials)
      if (size_t at = text.find(s); at < cut) {
        cut = at;
        skip = s.size();
      }
    for (std::string_view p : splitWithPattern(SplitPattern::Gpt2, text.substr(0, cut))) piece(p);
    text.remove_prefix(std::min(text.size(), cut + skip));
  }
}

std::string writeTokenizerJson(const std::vector<std::string>& specials,
                               const std::vector<std::string>& tokens,
                               const std::vector<std::pair<int32_t, int32_t>>& merges) {
  std::ostringstream out;
  JsonWriter w(out, true);
  w.beginObject();
  w.key("version").value("1.0");
  w.key("truncation").null();
  w.key("padding").null();
  w.key("added_tokens").beginArray();
  for (size_t i = 0; i < specials.size(); ++i) {
    w.beginObject();
    w.key("id").value(static_cast<int64_t>(i));
    w.key("content").value(specials[i]);
    w.key("single_word").value(false);
    w.key("lstrip").value(false);
    w.key("rstrip").value(false);
    w.key("normalized").value(false);
    w.key("special").value(true);
    w.endObject();
  }
  w.endArray();
  w.key("normalizer").null();
  w.key("pre_tokenizer").beginObject();
  w.key("type").value("ByteLevel");
  w.key("add_prefix_space").value(false);
  w.key("trim_offsets").value(true);
  w.key("use_regex").value(true);
  w.endObject();
  w.key("post_processor").null();
  w.key("decoder").beginObject();
  w.key("type").value("ByteLevel");
  w.key("add_prefix_space").value(false);
  w.key("trim_offsets").value(true);
  w.key("use_regex").value(true);
  w.endObject();
  w.key("model").beginObject();
  w.key("type").value("BPE");
  w.key("dropout").null();
  w.key("unk_token").null();
  w.key("continuing_subword_prefix").null();
  w.key("end_of_word_suffix").null();
  w.key("fuse_unk").value(false);
  w.key("byte_fallback").value(false);
  w.key("ignore_merges").value(false);
  w.key("vocab").beginObject();
  for (size_t id = 0; id < tokens.size(); ++id) w.key(tokens[id]).value(static_cast<int64_t>(id));
  w.endObject();
  // "a b" strings: byte symbols never contain a space, and every tokenizers version reads them.
  w.key("merges").beginArray();
  for (const auto& [a, b] : merges)
    w.value(tokens[static_cast<size_t>(a)] + " " + tokens[static_cast<size_t>(b)]);
  w.endArray();
  w.endObject();
  w.endObject();
  out << '\n';
  return out.str();
}

}  // namespace

TextSource textsFrom(std::span<const std::string> texts) {
  size_t next = 0;
  return [texts, next](std::string& text) mutable {
    if (next >= texts.size()) return false;
    text = texts[next++];
    return true;
  };
}

Result<std::string> trainByteLevelBpe(const TextSource& nextText, const BpeTrainParams& params,
                                      BpeTrainStats* statsOut) {
  RAG_RETURN_IF_ERROR(validate(params));
  BpeTrainStats stats;

  // 1. Unique pre-tokens with their counts.
  std::unordered_map<std::string, int64_t, StringHash, std::equal_to<>> wordCounts;
  std::string text;
  while (nextText(text)) {
    ++stats.texts;
    stats.bytes += static_cast<int64_t>(text.size());
    forEachPreToken(text, params.specialTokens, [&](std::string_view piece) {
      if (auto it = wordCounts.find(piece); it != wordCounts.end()) ++it->second;
      else wordCounts.emplace(std::string(piece), 1);
    });
    if (params.progress && stats.texts % 1024 == 0)
      params.progress("counting words", static_cast<uint64_t>(stats.texts), 0);
  }
  stats.uniqueWords = static_cast<int64_t>(wordCounts.size());

  // 2. Initial symbols: specials, then the byte symbols in byte order.
  const auto firstByteId = static_cast<int32_t>(params.specialTokens.size());
  std::vector<std::string> tokens = params.specialTokens;
  for (int b = 0; b < 256; ++b)
    tokens.push_back(bytesToSymbols(std::string(1, static_cast<char>(b))));

  // Sorted so that training does not depend on hash-map iteration order.
  std::vector<std::pair<std::string, int64_t>> sortedWords(wordCounts.begin(), wordCounts.end());
  wordCounts.clear();
  std::sort(sortedWords.begin(), sortedWords.end());
  std::vector<Word> words;
  words.reserve(sortedWords.size());
  PairTable pairs;
  for (auto& [piece, count] : sortedWords) {
    Word w;
    w.count = count;
    w.symbols.reserve(piece.size());
    for (char c : piece) w.symbols.push_back(firstByteId + static_cast<unsigned char>(c));
    const auto index = static_cast<int32_t>(words.size());
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i)
      pairs.add(pairKey(w.symbols[i], w.symbols[i + 1]), count, index);
    words.push_back(std::move(w));
  }
  sortedWords.clear();

  std::priority_queue<HeapEntry> heap;
  for (PairKey p : pairs.drainGrown()) heap.push({pairs.count(p), p});

  // 3. Merge the most frequent pair until the vocabulary is full.
  std::vector<std::pair<int32_t, int32_t>> merges;
  const int64_t target = params.vocabSize - static_cast<int64_t>(tokens.size());
  std::vector<int32_t> merged;
  std::vector<int32_t> lastVisit(words.size(), -1);
  while (static_cast<int64_t>(merges.size()) < target && !heap.empty()) {
    HeapEntry top = heap.top();
    heap.pop();
    const int64_t live = pairs.count(top.pair);
    if (top.count != live) {
      if (live > 0 && live < top.count) heap.push({live, top.pair});
      continue;  // a grown pair was re-pushed with its new count when it grew
    }
    if (live < params.minPairCount) break;
    const int32_t a = pairFirst(top.pair), b = pairSecond(top.pair);
    const auto newId = static_cast<int32_t>(tokens.size());
    const auto mergeIndex = static_cast<int32_t>(merges.size());
    tokens.push_back(tokens[static_cast<size_t>(a)] + tokens[static_cast<size_t>(b)]);
    merges.emplace_back(a, b);

    for (int32_t wi : pairs.take(top.pair)) {
      if (lastVisit[static_cast<size_t>(wi)] == mergeIndex) continue;
      lastVisit[static_cast<size_t>(wi)] = mergeIndex;
      Word& w = words[static_cast<size_t>(wi)];
      const std::vector<int32_t>& s = w.symbols;
      merged.clear();
      // Left-to-right, non-overlapping; the neighbours' pairs move from a/b to newId. The
      // merged pair itself is already gone from the table and is not adjusted.
      auto adjust = [&](int32_t x, int32_t y, int64_t sign) {
        PairKey p = pairKey(x, y);
        if (p != top.pair) pairs.add(p, sign * w.count, wi);
      };
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          if (!merged.empty()) {
            adjust(merged.back(), a, -1);
            adjust(merged.back(), newId, +1);
          }
          if (i + 2 < s.size()) {
            adjust(b, s[i + 2], -1);
            adjust(newId, s[i + 2], +1);
          }
          merged.push_back(newId);
          i += 2;
        } else {
          merged.push_back(s[i]);
          ++i;
        }
      }
      w.symbols.assign(merged.begin(), merged.end());
    }
    for (PairKey p : pairs.drainGrown())
      if (int64_t c = pairs.count(p); c > 0) heap.push({c, p});
    if (params.progress && merges.size() % 256 == 0)
      params.progress("merging", merges.size(), static_cast<uint64_t>(target));
  }
  if (params.progress) params.progress("merging", merges.size(), static_cast<uint64_t>(target));

  stats.merges = static_cast<int64_t>(merges.size());
  stats.vocabSize = static_cast<int32_t>(tokens.size());
  if (statsOut) *statsOut = stats;
  return writeTokenizerJson(params.specialTokens, tokens, merges);
}

Result<BpeTrainStats> trainByteLevelBpeToFile(const TextSource& next, const BpeTrainParams& params,
                                              const std::filesystem::path& path) {
  BpeTrainStats stats;
  RAG_ASSIGN_OR_RETURN(std::string json, trainByteLevelBpe(next, params, &stats));
  RAG_RETURN_IF_ERROR(writeFileAtomic(path, json));
  return stats;
}

}  // namespace rag::model
