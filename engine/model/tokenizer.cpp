#include "model/tokenizer.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <utility>

#include "core/fs.h"
#include "core/json.h"
#include "model/unicode_tables.h"

namespace fs = std::filesystem;

namespace rag::model {

namespace {

namespace uc = unicode;

// ---- GPT-2 byte mapping ------------------------------------------------------------------------

struct ByteMap {
  std::array<char32_t, 256> toCp{};
  std::array<int16_t, 324> toByte{};  // by code point; every mapped code point is < 324
  std::array<std::string, 256> utf8;
};

const ByteMap& byteMap() {
  static const ByteMap map = [] {
    ByteMap m;
    m.toByte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      m.toCp[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    for (int b = 0; b < 256; ++b) {
      char32_t cp = m.toCp[static_cast<size_t>(b)];
      m.toByte[cp] = static_cast<int16_t>(b);
      uc::appendUtf8(m.utf8[static_cast<size_t>(b)], cp);
    }
    return m;
  }();
  return map;
}

// ---- Hash maps keyed by strings, searchable by string_view -----------------------------------

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// ---- Added tokens ----------------------------------------------------------------------------

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool singleWord = false;
};

// A byte trie over added-token contents for leftmost-longest matching.
class AddedTokenTrie {
public:
  AddedTokenTrie() { m_nodes.emplace_back(); }

  void insert(std::string_view text, int32_t tokenIndex) {
    if (text.empty()) return;
    m_first[static_cast<unsigned char>(text[0])] = true;
    size_t node = 0;
    for (char ch : text) {
      auto b = static_cast<unsigned char>(ch);
      size_t child = findChild(node, b);
      if (child == 0) {
        child = m_nodes.size();
        m_nodes[node].children.emplace_back(b, child);
        m_nodes.emplace_back();
      }
      node = child;
    }
    if (m_nodes[node].token < 0) m_nodes[node].token = tokenIndex;
  }

  bool mayStartAt(unsigned char b) const { return m_first[b]; }

  // The token indexes whose text starts at s[pos], paired with their end offsets, longest
  // first.
  void matchesAt(std::string_view s, size_t pos,
                 std::vector<std::pair<int32_t, size_t>>& out) const {
    out.clear();
    size_t node = 0;
    for (size_t i = pos; i < s.size(); ++i) {
      node = findChild(node, static_cast<unsigned char>(s[i]));
      if (node == 0) break;
      if (m_nodes[node].token >= 0) out.emplace_back(m_nodes[node].token, i + 1);
    }
    std::reverse(out.begin(), out.end());
  }

private:
  size_t findChild(size_t node, unsigned char b) const {
    for (const auto& [byte, child] : m_nodes[node].children)
      if (byte == b) return child;
    return 0;
  }
  struct Node {
    std::vector<std::pair<unsigned char, size_t>> children;
    int32_t token = -1;
  };
  std::vector<Node> m_nodes;
  std::array<bool, 256> m_first{};
};

// ---- Normalizers and pre-tokenizers ----------------------------------------------------------

struct NormalizerStep {
  enum class Kind { Nfc, Nfd, Lowercase, StripAccents, Bert } kind;
  bool cleanText = true;
  bool handleChineseChars = true;
  bool stripAccents = true;
  bool lowercase = true;
};

std::string removeNonspacingMarks(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    uc::DecodedChar c = uc::decodeUtf8(s, pos);
    if (!c.valid || uc::charClass(c.cp) != uc::CharClass::Mark) out.append(s.substr(pos, c.len));
    pos += c.len;
  }
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    uc::DecodedChar c = uc::decodeUtf8(s, pos);
    if (c.valid) uc::appendLower(out, c.cp);
    else out.push_back(s[pos]);
    pos += c.len;
  }
  return out;
}

// HF's BertNormalizer: clean text (drop NUL, U+FFFD and controls; whitespace becomes ' '),
// pad CJK ideographs with spaces, strip accents (NFD, then drop Mn), lowercase.
std::string bertNormalize(std::string_view s, const NormalizerStep& step) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t pos = 0; pos < s.size();) {
    uc::DecodedChar c = uc::decodeUtf8(s, pos);
    std::string_view raw = s.substr(pos, c.len);
    pos += c.len;
    if (!c.valid) {
      out.append(raw);
      continue;
    }
    if (step.cleanText) {
      if (c.cp == 0 || c.cp == 0xFFFD || uc::isBertControl(c.cp)) continue;
      if (uc::isWhitespace(c.cp)) {
        out.push_back(' ');
        continue;
      }
    }
    if (step.handleChineseChars && uc::isCjkIdeograph(c.cp)) {
      out.push_back(' ');
      out.append(raw);
      out.push_back(' ');
      continue;
    }
    out.append(raw);
  }
  if (step.stripAccents) out = removeNonspacingMarks(uc::nfd(out));
  if (step.lowercase) out = lowercase(out);
  return out;
}

std::string applyNormalizer(const NormalizerStep& step, std::string_view s) {
  switch (step.kind) {
    case NormalizerStep::Kind::Nfc: return uc::nfc(s);
    case NormalizerStep::Kind::Nfd: return uc::nfd(s);
    case NormalizerStep::Kind::Lowercase: return lowercase(s);
    case NormalizerStep::Kind::StripAccents: return removeNonspacingMarks(s);
    case NormalizerStep::Kind::Bert: return bertNormalize(s, step);
  }
  return std::string(s);
}

struct PreTokenizer {
  std::vector<SplitPattern> splits;  // applied in order, each splitting the previous pieces
  bool byteLevel = false;
  bool addPrefixSpace = false;
  bool bert = false;  // BertPreTokenizer: split on whitespace, isolate punctuation
};

void bertSplit(std::string_view s, std::vector<std::string_view>& out) {
  size_t wordStart = std::string_view::npos;
  for (size_t pos = 0; pos < s.size();) {
    uc::DecodedChar c = uc::decodeUtf8(s, pos);
    bool space = c.valid && uc::isWhitespace(c.cp);
    bool punct = c.valid && uc::isBertPunctuation(c.cp);
    if (space || punct) {
      if (wordStart != std::string_view::npos) out.push_back(s.substr(wordStart, pos - wordStart));
      wordStart = std::string_view::npos;
      if (punct) out.push_back(s.substr(pos, c.len));
    } else if (wordStart == std::string_view::npos) {
      wordStart = pos;
    }
    pos += c.len;
  }
  if (wordStart != std::string_view::npos) out.push_back(s.substr(wordStart));
}

// ---- Model state -----------------------------------------------------------------------------

struct MergeRule {
  int32_t rank;
  int32_t result;
};

uint64_t pairKey(int32_t a, int32_t b) {
  return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
}

constexpr size_t kWordCacheCapacity = 1 << 17;
constexpr size_t kMaxCachedWordBytes = 256;

}  // namespace

struct Tokenizer::Impl {
  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  std::string origin;

  StringMap<int32_t> vocab;              // model vocabulary and added tokens
  std::vector<std::string> idToToken;    // vocabulary spelling by id
  std::vector<std::string> idToBytes;    // what decode() emits for the id
  std::vector<uint8_t> assigned;         // 1 when the id has a token
  std::vector<uint8_t> special;          // 1 for added tokens marked special
  std::vector<uint8_t> inModelVocab;     // 1 when model.vocab lists the id
  std::vector<AddedToken> added;
  AddedTokenTrie addedTrie;

  std::vector<NormalizerStep> normalizers;
  PreTokenizer preTokenizer;

  // Byte-level BPE
  std::unordered_map<uint64_t, MergeRule> merges;
  std::array<int32_t, 256> byteIds{};  // id of each byte's symbol; -1 when missing
  bool ignoreMerges = false;

  // WordPiece
  std::string subwordPrefix = "##";
  size_t maxInputCharsPerWord = 100;
  bool decoderCleanup = true;

  std::optional<int32_t> bos, eos, pad, unk, cls, sep;

  mutable std::mutex cacheMutex;
  mutable StringMap<std::vector<int32_t>> wordCache;

  std::string normalize(std::string_view s) const {
    std::string out(s);
    for (const NormalizerStep& step : normalizers) out = applyNormalizer(step, out);
    return out;
  }

  // Normalized, prefixed and split pieces of one segment without added tokens. `storage`
  // keeps the normalized text the views point into.
  void pieces(std::string_view segment, std::string& storage,
              std::vector<std::string_view>& out) const {
    out.clear();
    std::string_view text = segment;
    if (!normalizers.empty() || (preTokenizer.addPrefixSpace && !segment.starts_with(' '))) {
      storage = normalize(segment);
      if (preTokenizer.addPrefixSpace && !storage.starts_with(' ')) storage.insert(0, 1, ' ');
      text = storage;
    }
    if (text.empty()) return;
    if (preTokenizer.bert) {
      bertSplit(text, out);
      return;
    }
    out.push_back(text);
    std::vector<std::string_view> next;
    for (SplitPattern p : preTokenizer.splits) {
      next.clear();
      for (std::string_view piece : out) appendSplitPieces(p, piece, next);
      out.swap(next);
    }
  }

  void bpeWord(std::string_view word, std::vector<int32_t>& out) const {
    if (word.size() <= kMaxCachedWordBytes) {
      std::lock_guard lock(cacheMutex);
      if (auto it = wordCache.find(word); it != wordCache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> ids = bpeMerge(word);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() <= kMaxCachedWordBytes) {
      std::lock_guard lock(cacheMutex);
      if (wordCache.size() >= kWordCacheCapacity) wordCache.clear();
      wordCache.emplace(std::string(word), std::move(ids));
    }
  }

  // Merges the byte symbols of one pre-tokenized piece, lowest merge rank first and leftmost
  // first among equal ranks (what HF tokenizers does), over a linked list of symbols with a
  // min-heap of candidate pairs that are re-validated when popped.
  std::vector<int32_t> bpeMerge(std::string_view word) const {
    if (ignoreMerges) {
      // An added token spelled like the piece does not count: HF looks in model.vocab only.
    if (auto it = vocab.find(bytesToSymbols(word));
        it != vocab.end() && inModelVocab[static_cast<size_t>(it->second)])
      return {it->second};
    }
    const size_t n = word.size();
    std::vector<int32_t> sym(n);
    for (size_t i = 0; i < n; ++i) sym[i] = byteIds[static_cast<unsigned char>(word[i])];
    if (n >= 2) {
      constexpr int32_t kDead = -2;
      std::vector<int32_t> prev(n), next(n);
      for (size_t i = 0; i < n; ++i) {
        prev[i] = static_cast<int32_t>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
      }
      struct Candidate {
        int32_t rank, pos, left, right, result;
        bool operator>(const Candidate& o) const {
          return rank != o.rank ? rank > o.rank : pos > o.pos;
        }
      };
      std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
      auto consider = [&](int32_t pos) {
        int32_t r = next[static_cast<size_t>(pos)];
        if (r < 0) return;
        int32_t a = sym[static_cast<size_t>(pos)], b = sym[static_cast<size_t>(r)];
        if (a < 0 || b < 0) return;
        if (auto it = merges.find(pairKey(a, b)); it != merges.end())
          heap.push({it->second.rank, pos, a, b, it->second.result});
      };
      for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));
      while (!heap.empty()) {
        Candidate c = heap.top();
        heap.pop();
        auto pos = static_cast<size_t>(c.pos);
        int32_t r = next[pos];
        if (sym[pos] != c.left || r < 0 || sym[static_cast<size_t>(r)] != c.right) continue;
        sym[pos] = c.result;
        sym[static_cast<size_t>(r)] = kDead;
        next[pos] = next[static_cast<size_t>(r)];
        if (next[pos] >= 0) prev[static_cast<size_t>(next[pos])] = c.pos;
        if (prev[pos] >= 0) consider(prev[pos]);
        consider(c.pos);
      }
      std::erase(sym, kDead);
    }
    // A byte whose symbol is missing from the vocabulary becomes unk, or is dropped when the
    // tokenizer has none (what HF tokenizers does).
    if (std::find(sym.begin(), sym.end(), -1) != sym.end()) {
      if (unk) std::replace(sym.begin(), sym.end(), -1, *unk);
      else std::erase(sym, -1);
    }
    return sym;
  }

  void wordPiece(std::string_view word, std::vector<int32_t>& out) const {
    std::vector<size_t> starts;  // byte offset of each character, then word.size()
    for (size_t pos = 0; pos < word.size(); pos += uc::decodeUtf8(word, pos).len)
      starts.push_back(pos);
    if (starts.size() > maxInputCharsPerWord) {
      out.push_back(*unk);
      return;
    }
    starts.push_back(word.size());
    const size_t mark = out.size();
    std::string candidate;
    size_t startChar = 0;
    while (startChar + 1 < starts.size()) {
      int32_t found = -1;
      size_t endChar = starts.size() - 1;
      for (; endChar > startChar; --endChar) {
        candidate.clear();
        if (startChar > 0) candidate = subwordPrefix;
        candidate.append(word.substr(starts[startChar], starts[endChar] - starts[startChar]));
        if (auto it = vocab.find(candidate); it != vocab.end()) {
          found = it->second;
          break;
        }
      }
      if (found < 0) {  // the word cannot be covered: it is one [UNK]
        out.resize(mark);
        out.push_back(*unk);
        return;
      }
      out.push_back(found);
      startChar = endChar;
    }
  }

  void encodeOrdinary(std::string_view segment, std::vector<int32_t>& out) const {
    std::string storage;
    std::vector<std::string_view> words;
    pieces(segment, storage, words);
    for (std::string_view w : words) {
      if (kind == TokenizerKind::ByteLevelBpe) bpeWord(w, out);
      else wordPiece(w, out);
    }
  }

  // Calls emit(segment, -1) for ordinary text and emit({}, id) for each added token found.
  template <typename Emit>
  void segment(std::string_view text, bool parseSpecial, Emit&& emit) const {
    if (!parseSpecial || added.empty()) {
      if (!text.empty()) emit(text, -1);
      return;
    }
    std::vector<std::pair<int32_t, size_t>> matches;
    size_t segStart = 0;
    for (size_t i = 0; i < text.size();) {
      if (!addedTrie.mayStartAt(static_cast<unsigned char>(text[i]))) {
        ++i;
        continue;
      }
      addedTrie.matchesAt(text, i, matches);
      const AddedToken* hit = nullptr;
      size_t end = 0;
      for (const auto& [index, e] : matches) {
        const AddedToken& t = added[static_cast<size_t>(index)];
        if (t.singleWord && (endsWithWordChar(text.substr(0, i)) ||
                             startsWithWordChar(text.substr(e)))) continue;
        hit = &t;
        end = e;
        break;
      }
      if (!hit) {
        ++i;
        continue;
      }
      size_t start = i;
      if (hit->lstrip)
        while (start > segStart) {
          size_t p = previousCharStart(text, start);
          uc::DecodedChar c = uc::decodeUtf8(text, p);
          if (!c.valid || !uc::isWhitespace(c.cp)) break;
          start = p;
        }
      if (hit->rstrip)
        while (end < text.size()) {
          uc::DecodedChar c = uc::decodeUtf8(text, end);
          if (!c.valid || !uc::isWhitespace(c.cp)) break;
          end += c.len;
        }
      if (start > segStart) emit(text.substr(segStart, start - segStart), -1);
      emit(std::string_view{}, hit->id);
      segStart = i = end;
    }
    if (segStart < text.size()) emit(text.substr(segStart), -1);
  }

  static size_t previousCharStart(std::string_view s, size_t pos) {
    size_t p = pos - 1;
    for (int k = 0; k < 3 && p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80; ++k) --p;
    uc::DecodedChar c = uc::decodeUtf8(s, p);
    return (c.valid && p + c.len == pos) ? p : pos - 1;
  }
  static bool isWordChar(uc::DecodedChar c) {
    return c.valid && (uc::isLetter(c.cp) || uc::isNumber(c.cp));
  }
  static bool endsWithWordChar(std::string_view s) {
    return !s.empty() && isWordChar(uc::decodeUtf8(s, previousCharStart(s, s.size())));
  }
  static bool startsWithWordChar(std::string_view s) {
    return !s.empty() && isWordChar(uc::decodeUtf8(s, 0));
  }
};

// ---- Public free functions -------------------------------------------------------------------

char32_t byteToSymbol(uint8_t byte) { return byteMap().toCp[byte]; }

std::optional<uint8_t> symbolToByte(char32_t cp) {
  const ByteMap& m = byteMap();
  if (cp >= m.toByte.size() || m.toByte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(m.toByte[cp]);
}

std::string bytesToSymbols(std::string_view bytes) {
  const ByteMap& m = byteMap();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) out += m.utf8[static_cast<unsigned char>(b)];
  return out;
}

// ---- Loading ---------------------------------------------------------------------------------

namespace {

using Impl = Tokenizer::Impl;

std::string typeOf(const JsonValue& v) {
  if (const JsonValue* t = v.find("type"); t && t->isString()) return t->asString();
  return {};
}

bool boolField(const JsonValue& obj, std::string_view key, bool fallback) {
  const JsonValue* v = obj.find(key);
  return v && v->isBool() ? v->asBool() : fallback;
}

// A string field that may be absent or null (nullopt) or a string.
Result<std::optional<std::string>> optionalString(const JsonValue& obj, std::string_view key,
                                                  const std::string& where) {
  const JsonValue* v = obj.find(key);
  if (!v || v->isNull()) return std::optional<std::string>{};
  if (!v->isString())
    return Status::corrupt(where + ": \"" + std::string(key) + "\" should be a string, not " +
                           std::string(jsonTypeName(v->type())));
  return std::optional<std::string>(v->asString());
}

Status assignToken(Impl& t, const std::string& token, int64_t id, const std::string& where) {
  constexpr int64_t kMaxId = 1 << 24;
  if (id < 0 || id >= kMaxId)
    return Status::corrupt(where + ": token '" + token + "' has id " + std::to_string(id) +
                           ", outside [0, " + std::to_string(kMaxId) + ")");
  auto i = static_cast<size_t>(id);
  if (i >= t.idToToken.size()) {
    t.idToToken.resize(i + 1);
    t.assigned.resize(i + 1, 0);
    t.special.resize(i + 1, 0);
    t.inModelVocab.resize(i + 1, 0);
  }
  if (t.assigned[i] && t.idToToken[i] != token)
    return Status::corrupt(where + ": id " + std::to_string(id) + " is given to both '" +
                           t.idToToken[i] + "' and '" + token + "'");
  t.idToToken[i] = token;
  t.assigned[i] = 1;
  t.vocab[token] = static_cast<int32_t>(id);
  return Status::ok();
}

Status loadVocab(Impl& t, const JsonValue& model, const std::string& where) {
  const JsonValue* vocab = model.find("vocab");
  if (!vocab || !vocab->isObject())
    return Status::corrupt(where + ": model.vocab is missing or not an object of token -> id");
  for (const auto& [token, idValue] : vocab->asObject()) {
    std::optional<int64_t> id = idValue.asInt64();
    if (!id)
      return Status::corrupt(where + ": model.vocab entry '" + token + "' has no integer id");
    RAG_RETURN_IF_ERROR(assignToken(t, token, *id, where + ": model.vocab"));
    t.inModelVocab[static_cast<size_t>(*id)] = 1;
  }
  if (vocab->size() == 0) return Status::corrupt(where + ": model.vocab is empty");
  return Status::ok();
}

Status loadAddedTokens(Impl& t, const JsonValue& root, const std::string& where) {
  const JsonValue* list = root.find("added_tokens");
  if (!list || list->isNull()) return Status::ok();
  if (!list->isArray()) return Status::corrupt(where + ": added_tokens is not an array");
  for (const JsonValue& entry : list->asArray()) {
    const JsonValue* id = entry.find("id");
    const JsonValue* content = entry.find("content");
    if (!id || !id->asInt64() || !content || !content->isString() || content->asString().empty())
      return Status::corrupt(where + ": added_tokens entry " + std::to_string(t.added.size()) +
                             " needs an integer \"id\" and a non-empty \"content\"");
    AddedToken a;
    a.id = static_cast<int32_t>(*id->asInt64());
    a.content = content->asString();
    a.special = boolField(entry, "special", false);
    a.lstrip = boolField(entry, "lstrip", false);
    a.rstrip = boolField(entry, "rstrip", false);
    a.singleWord = boolField(entry, "single_word", false);
    RAG_RETURN_IF_ERROR(assignToken(t, a.content, *id->asInt64(), where + ": added_tokens"));
    t.special[static_cast<size_t>(a.id)] = a.special ? 1 : 0;
    t.addedTrie.insert(a.content, static_cast<int32_t>(t.added.size()));
    t.added.push_back(std::move(a));
  }
  return Status::ok();
}

Status parseNormalizer(Impl& t, const JsonValue* n, const std::string& where) {
  if (!n || n->isNull()) return Status::ok();
  std::string type = typeOf(*n);
  using K = NormalizerStep::Kind;
  if (type == "Sequence") {
    const JsonValue* list = n->find("normalizers");
    if (!list || !list->isArray())
      return Status::corrupt(where + ": Sequence normalizer without a \"normalizers\" array");
    for (const JsonValue& child : list->asArray())
      RAG_RETURN_IF_ERROR(parseNormalizer(t, &child, where));
    return Status::ok();
  }
  if (type == "NFC") t.normalizers.push_back({K::Nfc});
  else if (type == "NFD") t.normalizers.push_back({K::Nfd});
  else if (type == "Lowercase") t.normalizers.push_back({K::Lowercase});
  else if (type == "StripAccents") t.normalizers.push_back({K::StripAccents});
  else if (type == "BertNormalizer") {
    NormalizerStep s{K::Bert};
    s.cleanText = boolField(*n, "clean_text", true);
    s.handleChineseChars = boolField(*n, "handle_chinese_chars", true);
    s.lowercase = boolField(*n, "lowercase", true);
    // strip_accents: null means "follow lowercase".
    s.stripAccents = boolField(*n, "strip_accents", s.lowercase);
    t.normalizers.push_back(s);
  } else {
    return Status::invalidArgument(
        "tokenizer.json normalizer type '" + type +
        "' is not supported; supported: BertNormalizer, NFC, NFD, Lowercase, StripAccents, "
        "Sequence (in " + where + ")");
  }
  return Status::ok();
}

Status parsePreTokenizer(Impl& t, const JsonValue* p, const std::string& where) {
  if (!p || p->isNull()) return Status::ok();
  std::string type = typeOf(*p);
  if (type == "Sequence") {
    const JsonValue* list = p->find("pretokenizers");
    if (!list || !list->isArray())
      return Status::corrupt(where + ": Sequence pre-tokenizer without a \"pretokenizers\" array");
    for (const JsonValue& child : list->asArray())
      RAG_RETURN_IF_ERROR(parsePreTokenizer(t, &child, where));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    t.preTokenizer.byteLevel = true;
    // HF always writes add_prefix_space (absent, we take false, which keeps the exact round
    // trip); use_regex defaults to true as in HF.
    t.preTokenizer.addPrefixSpace = boolField(*p, "add_prefix_space", false);
    if (boolField(*p, "use_regex", true)) t.preTokenizer.splits.push_back(SplitPattern::Gpt2);
    return Status::ok();
  }
  if (type == "Split") {
    const JsonValue* pattern = p->find("pattern");
    const JsonValue* regex = pattern ? pattern->find("Regex") : nullptr;
    if (!regex || !regex->isString())
      return Status::invalidArgument(
          "tokenizer.json Split pre-tokenizer with a literal (String) pattern is not supported; "
          "supported: the GPT-2, Llama-3 and Qwen2 regex patterns (in " + where + ")");
    RAG_ASSIGN_OR_RETURN(SplitPattern sp, recognizeSplitPattern(regex->asString()));
    const JsonValue* behavior = p->find("behavior");
    if ((behavior && (!behavior->isString() || behavior->asString() != "Isolated")) ||
        boolField(*p, "invert", false))
      return Status::invalidArgument(
          "tokenizer.json Split pre-tokenizer must use behavior \"Isolated\" without invert "
          "(in " + where + ")");
    t.preTokenizer.splits.push_back(sp);
    return Status::ok();
  }
  if (type == "BertPreTokenizer") {
    t.preTokenizer.bert = true;
    return Status::ok();
  }
  return Status::invalidArgument(
      "tokenizer.json pre_tokenizer type '" + type +
      "' is not supported; supported: ByteLevel, Split (GPT-2, Llama-3, Qwen2 regex), "
      "Sequence, BertPreTokenizer (in " + where + ")");
}

Status loadBpe(Impl& t, const JsonValue& root, const JsonValue& model, const std::string& where) {
  t.kind = TokenizerKind::ByteLevelBpe;
  if (!t.preTokenizer.byteLevel)
    return Status::invalidArgument(
        "tokenizer.json BPE model without a ByteLevel pre-tokenizer (SentencePiece-style BPE, "
        "e.g. Llama-2) is not supported; supported: BPE (byte-level), WordPiece (in " + where +
        ")");
  if (t.preTokenizer.bert)
    return Status::invalidArgument("tokenizer.json mixes BertPreTokenizer with a byte-level BPE "
                                   "model, which this reader does not support (in " + where + ")");
  if (boolField(model, "byte_fallback", false))
    return Status::invalidArgument("tokenizer.json BPE with byte_fallback (SentencePiece-style) "
                                   "is not supported; supported: byte-level BPE (in " +
                                   where + ")");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    RAG_ASSIGN_OR_RETURN(std::optional<std::string> v, optionalString(model, key, where));
    if (v && !v->empty())
      return Status::invalidArgument("tokenizer.json BPE " + std::string(key) + " '" + *v +
                                     "' is not supported with byte-level BPE (in " + where + ")");
  }
  RAG_ASSIGN_OR_RETURN(std::optional<std::string> unkToken,
                       optionalString(model, "unk_token", where));
  if (unkToken) {
    auto it = t.vocab.find(*unkToken);
    if (it == t.vocab.end())
      return Status::corrupt(where + ": model.unk_token '" + *unkToken +
                             "' is not in the vocabulary");
    t.unk = it->second;
  }
  t.ignoreMerges = boolField(model, "ignore_merges", false);

  const JsonValue* merges = model.find("merges");
  if (!merges || !merges->isArray())
    return Status::corrupt(where + ": model.merges is missing or not an array");
  t.merges.reserve(merges->size());
  int32_t rank = 0;
  for (const JsonValue& m : merges->asArray()) {
    std::string a, b;
    if (m.isString()) {
      const std::string& s = m.asString();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        return Status::corrupt(where + ": merge " + std::to_string(rank) + " '" + s +
                               "' is not two tokens separated by one space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.isArray() && m.size() == 2 && m.asArray()[0].isString() &&
               m.asArray()[1].isString()) {
      a = m.asArray()[0].asString();
      b = m.asArray()[1].asString();
    } else {
      return Status::corrupt(where + ": merge " + std::to_string(rank) +
                             " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    auto ia = t.vocab.find(a), ib = t.vocab.find(b), ir = t.vocab.find(a + b);
    if (ia == t.vocab.end() || ib == t.vocab.end() || ir == t.vocab.end())
      return Status::corrupt(where + ": merge " + std::to_string(rank) + " ('" + a + "', '" + b +
                             "') uses a token missing from the vocabulary ('" +
                             (ia == t.vocab.end() ? a : ib == t.vocab.end() ? b : a + b) + "')");
    t.merges.emplace(pairKey(ia->second, ib->second), MergeRule{rank, ir->second});
    ++rank;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = t.vocab.find(byteMap().utf8[static_cast<size_t>(b)]);
    t.byteIds[static_cast<size_t>(b)] = it == t.vocab.end() ? -1 : it->second;
  }

  const JsonValue* decoder = root.find("decoder");
  if (decoder && !decoder->isNull() && typeOf(*decoder) != "ByteLevel")
    return Status::invalidArgument("tokenizer.json decoder type '" + typeOf(*decoder) +
                                   "' is not supported with byte-level BPE; supported: ByteLevel "
                                   "(in " + where + ")");
  // What decode() emits: added tokens' text as is, vocabulary entries mapped back to bytes
  // (an entry with a character outside the byte mapping is emitted as its UTF-8 spelling, as
  // HF's ByteLevel decoder does).
  t.idToBytes.resize(t.idToToken.size());
  for (size_t id = 0; id < t.idToToken.size(); ++id) {
    const std::string& tok = t.idToToken[id];
    std::string bytes;
    bool mapped = true;
    for (size_t pos = 0; pos < tok.size() && mapped;) {
      uc::DecodedChar c = uc::decodeUtf8(tok, pos);
      std::optional<uint8_t> byte = c.valid ? symbolToByte(c.cp) : std::nullopt;
      if (byte) bytes.push_back(static_cast<char>(*byte));
      else mapped = false;
      pos += c.len;
    }
    t.idToBytes[id] = mapped ? std::move(bytes) : tok;
  }
  for (const AddedToken& a : t.added) t.idToBytes[static_cast<size_t>(a.id)] = a.content;
  return Status::ok();
}

Status loadWordPiece(Impl& t, const JsonValue& root, const JsonValue& model,
                     const std::string& where) {
  t.kind = TokenizerKind::WordPiece;
  if (t.preTokenizer.byteLevel || !t.preTokenizer.splits.empty())
    return Status::invalidArgument("tokenizer.json WordPiece model with a byte-level or regex "
                                   "pre-tokenizer is not supported; supported: BertPreTokenizer "
                                   "(in " + where + ")");
  RAG_ASSIGN_OR_RETURN(std::optional<std::string> unkToken,
                       optionalString(model, "unk_token", where));
  std::string unk = unkToken.value_or("[UNK]");
  auto it = t.vocab.find(unk);
  if (it == t.vocab.end())
    return Status::corrupt(where + ": WordPiece unk_token '" + unk + "' is not in the vocabulary");
  t.unk = it->second;
  RAG_ASSIGN_OR_RETURN(std::optional<std::string> prefix,
                       optionalString(model, "continuing_subword_prefix", where));
  t.subwordPrefix = prefix.value_or("##");
  if (const JsonValue* m = model.find("max_input_chars_per_word"); m && m->asInt64()) {
    if (*m->asInt64() <= 0)
      return Status::corrupt(where + ": max_input_chars_per_word must be positive");
    t.maxInputCharsPerWord = static_cast<size_t>(*m->asInt64());
  }
  const JsonValue* decoder = root.find("decoder");
  if (decoder && !decoder->isNull()) {
    if (typeOf(*decoder) != "WordPiece")
      return Status::invalidArgument("tokenizer.json decoder type '" + typeOf(*decoder) +
                                     "' is not supported with WordPiece; supported: WordPiece "
                                     "(in " + where + ")");
    RAG_ASSIGN_OR_RETURN(std::optional<std::string> dp, optionalString(*decoder, "prefix", where));
    if (dp && *dp != t.subwordPrefix)
      return Status::invalidArgument("tokenizer.json WordPiece decoder prefix '" + *dp +
                                     "' differs from the model's '" + t.subwordPrefix + "' (in " +
                                     where + ")");
    t.decoderCleanup = boolField(*decoder, "cleanup", true);
  }
  t.idToBytes = t.idToToken;
  return Status::ok();
}

std::optional<int32_t> lookup(const Impl& t, std::string_view token) {
  auto it = t.vocab.find(token);
  return it == t.vocab.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

// Template or Bert post-processors name the tokens put around a single sequence.
void parsePostProcessor(const Impl& t, const JsonValue* p, std::optional<int32_t>& prefix,
                        std::optional<int32_t>& suffix) {
  if (!p || !p->isObject()) return;
  std::string type = typeOf(*p);
  if (type == "Sequence") {
    if (const JsonValue* list = p->find("processors"); list && list->isArray())
      for (const JsonValue& child : list->asArray()) parsePostProcessor(t, &child, prefix, suffix);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto named = [&](const char* key) -> std::optional<int32_t> {
      const JsonValue* v = p->find(key);
      if (!v || !v->isArray() || v->size() != 2 || !v->asArray()[0].isString()) return {};
      return lookup(t, v->asArray()[0].asString());
    };
    if (auto c = named("cls")) prefix = c;
    if (auto s = named("sep")) suffix = s;
    return;
  }
  if (type != "TemplateProcessing") return;
  const JsonValue* single = p->find("single");
  if (!single || !single->isArray()) return;
  bool seenSequence = false;
  for (const JsonValue& piece : single->asArray()) {
    if (piece.find("Sequence")) {
      seenSequence = true;
      continue;
    }
    const JsonValue* sp = piece.find("SpecialToken");
    const JsonValue* id = sp ? sp->find("id") : nullptr;
    if (!id || !id->isString()) continue;
    std::optional<int32_t> tokenId = lookup(t, id->asString());
    if (!tokenId) continue;
    if (!seenSequence && !prefix) prefix = tokenId;
    if (seenSequence && !suffix) suffix = tokenId;
  }
}

// tokenizer_config.json spells a token as "text" or {"content": "text", ...}.
std::optional<int32_t> configToken(const Impl& t, const JsonValue& config, std::string_view key) {
  const JsonValue* v = config.find(key);
  if (!v) return std::nullopt;
  if (v->isObject()) v = v->find("content");
  if (!v || !v->isString()) return std::nullopt;
  return lookup(t, v->asString());
}

std::optional<int32_t> firstKnown(const Impl& t, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (auto id = lookup(t, n)) return id;
  return std::nullopt;
}

Status resolveSpecialIds(Impl& t, const JsonValue& root, std::string_view configJson,
                         const std::string& where) {
  std::optional<int32_t> prefix, suffix;
  parsePostProcessor(t, root.find("post_processor"), prefix, suffix);
  if (t.kind == TokenizerKind::WordPiece) {
    t.cls = prefix ? prefix : firstKnown(t, {"[CLS]"});
    t.sep = suffix ? suffix : firstKnown(t, {"[SEP]"});
    t.pad = firstKnown(t, {"[PAD]"});
  } else {
    t.bos = prefix ? prefix
                   : firstKnown(t, {"<|bos|>", "<s>", "<|begin_of_text|>", "<|startoftext|>"});
    t.eos = suffix ? suffix
                   : firstKnown(t, {"<|eos|>", "</s>", "<|end_of_text|>", "<|endoftext|>"});
    t.pad = firstKnown(t, {"<|pad|>", "<pad>", "[PAD]"});
  }
  if (const JsonValue* padding = root.find("padding"); padding && padding->isObject())
    if (const JsonValue* tok = padding->find("pad_token"); tok && tok->isString())
      if (auto id = lookup(t, tok->asString())) t.pad = id;
  if (configJson.empty()) return Status::ok();
  Result<JsonValue> config = parseJson(configJson);
  if (!config)
    return config.status().withContext("reading the tokenizer_config.json next to " + where);
  if (auto id = configToken(t, *config, "bos_token")) t.bos = id;
  if (auto id = configToken(t, *config, "eos_token")) t.eos = id;
  if (auto id = configToken(t, *config, "pad_token")) t.pad = id;
  return Status::ok();
}

}  // namespace

Result<Tokenizer> Tokenizer::fromJson(std::string_view json, std::string_view origin,
                                      std::string_view configJson) {
  const std::string where(origin);
  Result<JsonValue> doc = parseJson(json);
  if (!doc) return doc.status().withContext("reading " + where);
  const JsonValue& root = *doc;
  const JsonValue* model = root.find("model");
  if (!model || !model->isObject())
    return Status::corrupt(where + ": no \"model\" object; is this a Hugging Face tokenizer.json?");
  std::string type = typeOf(*model);
  if (type.empty()) {  // files from old tokenizers versions omit the type
    if (model->find("merges")) type = "BPE";
    else if (model->find("max_input_chars_per_word")) type = "WordPiece";
    else if (model->find("vocab") && model->find("vocab")->isArray()) type = "Unigram";
  }
  if (type != "BPE" && type != "WordPiece")
    return Status::invalidArgument("tokenizer.json model type '" + type +
                                   "' is not supported; supported: BPE (byte-level), WordPiece "
                                   "(in " + where + ")");
  auto impl = std::make_shared<Impl>();
  Impl& t = *impl;
  t.origin = where;
  RAG_RETURN_IF_ERROR(loadVocab(t, *model, where));
  RAG_RETURN_IF_ERROR(loadAddedTokens(t, root, where));
  RAG_RETURN_IF_ERROR(parseNormalizer(t, root.find("normalizer"), where));
  RAG_RETURN_IF_ERROR(parsePreTokenizer(t, root.find("pre_tokenizer"), where));
  if (type == "BPE") RAG_RETURN_IF_ERROR(loadBpe(t, root, *model, where));
  else RAG_RETURN_IF_ERROR(loadWordPiece(t, root, *model, where));
  RAG_RETURN_IF_ERROR(resolveSpecialIds(t, root, configJson, where));
  return Tokenizer(std::move(impl));
}

Result<Tokenizer> Tokenizer::load(const fs::path& path) {
  std::error_code ec;
  fs::path file = fs::is_directory(path, ec) ? path / "tokenizer.json" : path;
  if (!fs::exists(file, ec))
    return Status::notFound("no tokenizer at " + file.string() +
                            "; give a tokenizer.json file or the directory holding one");
  RAG_ASSIGN_OR_RETURN(std::string json, readFile(file));
  std::string config;
  fs::path configPath = file.parent_path() / "tokenizer_config.json";
  if (fs::exists(configPath, ec)) {
    RAG_ASSIGN_OR_RETURN(config, readFile(configPath));
  }
  return fromJson(json, file.string(), config);
}

// ---- Encode / decode -------------------------------------------------------------------------

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Impl& t = *m_impl;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (options.addClsSep && t.cls) out.push_back(*t.cls);
  if (options.addBos && t.bos) out.push_back(*t.bos);
  t.segment(text, options.parseSpecial, [&](std::string_view segment, int32_t addedId) {
    if (addedId >= 0) out.push_back(addedId);
    else t.encodeOrdinary(segment, out);
  });
  if (options.addEos && t.eos) out.push_back(*t.eos);
  if (options.addClsSep && t.sep) out.push_back(*t.sep);
  return out;
}

namespace {

// HF's WordPiece decoder cleanup, applied to each token with its leading space.
std::string cleanupTokenization(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},           {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},         {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
      s.replace(pos, from.size(), to);
  }
  return s;
}

}  // namespace

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                      const DecodeOptions& options) const {
  const Impl& t = *m_impl;
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= t.idToToken.size())
      return Status::invalidArgument("token id " + std::to_string(id) +
                                     " is outside the vocabulary [0, " +
                                     std::to_string(t.idToToken.size()) + ") of " + t.origin);
    auto i = static_cast<size_t>(id);
    if (!t.assigned[i])
      return Status::invalidArgument("token id " + std::to_string(id) + " is not assigned in " +
                                     t.origin);
    if (options.skipSpecial && t.special[i]) continue;
    if (t.kind == TokenizerKind::ByteLevelBpe) {
      out += t.idToBytes[i];
      continue;
    }
    const std::string& tok = t.idToBytes[i];
    std::string piece;
    if (first) piece = tok;
    else if (tok.starts_with(t.subwordPrefix)) piece = tok.substr(t.subwordPrefix.size());
    else piece = " " + tok;
    out += t.decoderCleanup ? cleanupTokenization(std::move(piece)) : piece;
    first = false;
  }
  return out;
}

TokenizerKind Tokenizer::kind() const { return m_impl->kind; }
int32_t Tokenizer::vocabSize() const { return static_cast<int32_t>(m_impl->idToToken.size()); }

std::optional<int32_t> Tokenizer::tokenId(std::string_view token) const {
  return lookup(*m_impl, token);
}

std::optional<std::string> Tokenizer::tokenText(int32_t id) const {
  const Impl& t = *m_impl;
  if (id < 0 || static_cast<size_t>(id) >= t.idToToken.size() ||
      !t.assigned[static_cast<size_t>(id)])
    return std::nullopt;
  return t.idToToken[static_cast<size_t>(id)];
}

bool Tokenizer::isSpecial(int32_t id) const {
  const Impl& t = *m_impl;
  return id >= 0 && static_cast<size_t>(id) < t.special.size() &&
         t.special[static_cast<size_t>(id)];
}

std::optional<int32_t> Tokenizer::bosId() const { return m_impl->bos; }
std::optional<int32_t> Tokenizer::eosId() const { return m_impl->eos; }
std::optional<int32_t> Tokenizer::padId() const { return m_impl->pad; }
std::optional<int32_t> Tokenizer::unkId() const { return m_impl->unk; }
std::optional<int32_t> Tokenizer::clsId() const { return m_impl->cls; }
std::optional<int32_t> Tokenizer::sepId() const { return m_impl->sep; }

std::vector<std::string> Tokenizer::preTokenize(std::string_view text) const {
  std::string storage;
  std::vector<std::string_view> views;
  m_impl->pieces(text, storage, views);
  return {views.begin(), views.end()};
}

Status copyTokenizerFiles(const fs::path& from, const fs::path& to) {
  if (from.empty()) return Status::ok();
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    std::error_code ec;
    const bool required = std::string_view(name) == "tokenizer.json";
    if (!required && !fs::exists(from / name, ec)) continue;
    RAG_ASSIGN_OR_RETURN(std::string text, readFile(from / name));
    RAG_RETURN_IF_ERROR(writeFileAtomic(to / name, text));
  }
  return Status::ok();
}

}  // namespace rag::model
