#include "corpus/wordnet.h"

#include <array>
#include <charconv>
#include <utility>

#include "core/fs.h"

namespace rag::corpus {

namespace {

struct SymbolName {
  std::string_view symbol;
  std::string_view name;
};

// wninput(5). `\` is resolved by part of speech in pointerTypeName().
constexpr std::array<SymbolName, 27> kSymbols = {{
    {"!", "antonym"},
    {"@", "hypernym"},
    {"@i", "instance_hypernym"},
    {"~", "hyponym"},
    {"~i", "instance_hyponym"},
    {"#m", "member_holonym"},
    {"#s", "substance_holonym"},
    {"#p", "part_holonym"},
    {"%m", "member_meronym"},
    {"%s", "substance_meronym"},
    {"%p", "part_meronym"},
    {"=", "attribute"},
    {"+", "derivation"},
    {";c", "domain_topic"},
    {"-c", "member_of_domain_topic"},
    {";r", "domain_region"},
    {"-r", "member_of_domain_region"},
    {";u", "domain_usage"},
    {"-u", "member_of_domain_usage"},
    {"*", "entailment"},
    {">", "cause"},
    {"^", "also_see"},
    {"$", "verb_group"},
    {"&", "similar_to"},
    {"<", "participle"},
    {"\\", "pertainym"},
    {"\\r", "derived_from_adjective"},  // internal key: `\` in data.adv
}};

// A cursor over the space-separated fields of one line.
class Fields {
public:
  explicit Fields(std::string_view s) : m_s(s) {}
  bool next(std::string_view& out) {
    while (m_pos < m_s.size() && m_s[m_pos] == ' ') ++m_pos;
    if (m_pos >= m_s.size()) return false;
    size_t end = m_s.find(' ', m_pos);
    if (end == std::string_view::npos) end = m_s.size();
    out = m_s.substr(m_pos, end - m_pos);
    m_pos = end;
    return true;
  }

private:
  std::string_view m_s;
  size_t m_pos = 0;
};

template <typename T>
bool parseNumber(std::string_view s, T& out, int base = 10) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string wordText(std::string_view raw, char pos) {
  // Adjectives may carry a syntactic marker: "galore(ip)", "elect(p)", "a(a)".
  if ((pos == 'a' || pos == 's') && raw.size() > 3 && raw.back() == ')') {
    size_t open = raw.rfind('(');
    if (open != std::string_view::npos && open > 0) {
      std::string_view m = raw.substr(open);
      if (m == "(a)" || m == "(p)" || m == "(ip)") raw = raw.substr(0, open);
    }
  }
  std::string t(raw);
  for (char& c : t)
    if (c == '_') c = ' ';
  return t;
}

void splitGloss(std::string_view gloss, WnSynset& out) {
  gloss = trim(gloss);
  // Examples follow the definition as `; "..."` pieces; a gloss may also start with one.
  size_t ex = gloss.find("; \"");
  std::string_view def = gloss;
  std::string_view rest;
  if (!gloss.empty() && gloss.front() == '"') {
    def = {};
    rest = gloss;
  } else if (ex != std::string_view::npos) {
    def = gloss.substr(0, ex);
    rest = gloss.substr(ex + 2);
  }
  out.definition = std::string(trim(def));
  while (!rest.empty()) {
    size_t end = rest.find("\"; ");
    std::string_view piece = end == std::string_view::npos ? rest : rest.substr(0, end + 1);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 3);
    piece = trim(piece);
    if (!piece.empty() && piece.front() == '"') piece.remove_prefix(1);
    if (!piece.empty() && piece.back() == '"') piece.remove_suffix(1);
    piece = trim(piece);
    if (!piece.empty()) out.examples.emplace_back(piece);
  }
}

}  // namespace

std::string_view pointerTypeName(std::string_view symbol, char pos) {
  if (symbol == "\\" && pos == 'r') symbol = "\\r";
  for (const SymbolName& s : kSymbols)
    if (s.symbol == symbol) return s.name;
  return {};
}

const std::vector<std::string_view>& allPointerTypeNames() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const SymbolName& s : kSymbols)
      v.push_back(s.name);
    return v;
  }();
  return names;
}

std::string_view posName(char pos) {
  switch (pos) {
    case 'n': return "noun";
    case 'v': return "verb";
    case 'a':
    case 's': return "adjective";
    case 'r': return "adverb";
    default: return "unknown";
  }
}

Result<WnSynset> parseWordNetLine(std::string_view line, std::string_view where) {
  auto bad = [&](std::string_view what) {
    return Status::corrupt(std::string(where) + ": " + std::string(what) +
                           "; the WordNet data is damaged, reinstall it with: "
                           "apt-get install --reinstall wordnet-base");
  };
  size_t bar = line.find(" | ");
  std::string_view head = bar == std::string_view::npos ? line : line.substr(0, bar);
  std::string_view gloss = bar == std::string_view::npos ? std::string_view() : line.substr(bar + 3);

  WnSynset s;
  Fields f(head);
  std::string_view tok;
  if (!f.next(tok) || tok.size() != 8 || !parseNumber(tok, s.offset))
    return bad("synset offset is not 8 digits");
  if (!f.next(tok) || !parseNumber(tok, s.lexFilenum)) return bad("bad lex_filenum");
  if (!f.next(tok) || tok.size() != 1 || std::string_view("nvasr").find(tok[0]) == std::string_view::npos)
    return bad("bad synset type '" + std::string(tok) + "'");
  s.pos = tok[0];
  unsigned wordCount = 0;
  if (!f.next(tok) || tok.size() != 2 || !parseNumber(tok, wordCount, 16) || wordCount == 0)
    return bad("bad word count");
  s.words.reserve(wordCount);
  for (unsigned i = 0; i < wordCount; ++i) {
    std::string_view word, lexId;
    if (!f.next(word) || !f.next(lexId)) return bad("line ends inside the word list");
    WnWord w;
    w.text = wordText(word, s.pos);
    if (!parseNumber(lexId, w.lexId, 16)) return bad("bad lex_id '" + std::string(lexId) + "'");
    s.words.push_back(std::move(w));
  }
  unsigned pointerCount = 0;
  if (!f.next(tok) || tok.size() != 3 || !parseNumber(tok, pointerCount))
    return bad("bad pointer count");
  s.pointers.reserve(pointerCount);
  for (unsigned i = 0; i < pointerCount; ++i) {
    std::string_view sym, off, pos, st;
    if (!f.next(sym) || !f.next(off) || !f.next(pos) || !f.next(st))
      return bad("line ends inside the pointer list");
    WnPointer p;
    p.type = pointerTypeName(sym, s.pos);
    if (p.type.empty()) return bad("unknown pointer symbol '" + std::string(sym) + "'");
    if (off.size() != 8 || !parseNumber(off, p.targetOffset)) return bad("bad pointer offset");
    if (pos.size() != 1 || std::string_view("nvasr").find(pos[0]) == std::string_view::npos)
      return bad("bad pointer part of speech");
    p.targetPos = pos[0];
    unsigned words = 0;
    if (st.size() != 4 || !parseNumber(st, words, 16)) return bad("bad pointer source/target");
    p.sourceWord = static_cast<uint8_t>(words >> 8);
    p.targetWord = static_cast<uint8_t>(words & 0xff);
    if ((p.sourceWord == 0) != (p.targetWord == 0)) return bad("half-lexical pointer");
    if (p.sourceWord > wordCount) return bad("pointer names a word this synset does not have");
    s.pointers.push_back(p);
  }
  // Verb frames (`f_cnt + f_num w_num ...`) only describe sentence frames: not needed.
  if (bar == std::string_view::npos) return bad("no gloss separator ' | '");
  splitGloss(gloss, s);
  return s;
}

std::vector<std::filesystem::path> wordNetDataFiles(const std::filesystem::path& dir) {
  return {dir / "data.noun", dir / "data.verb", dir / "data.adj", dir / "data.adv"};
}

Result<std::vector<WnSynset>> readWordNetFile(const std::filesystem::path& path) {
  Result<std::string> text = readFile(path);
  if (!text) {
    if (text.status().code() == StatusCode::NotFound)
      return Status::notFound("WordNet data file " + path.string() +
                              " is missing; install it with: apt-get install wordnet-base "
                              "(or pass --wordnet DIR)");
    return text.status();
  }
  return parseWordNetData(*text, path);
}

Result<std::vector<WnSynset>> parseWordNetData(std::string_view data,
                                               const std::filesystem::path& path) {
  std::vector<WnSynset> out;
  out.reserve(data.size() / 300);
  const std::string fileName = path.filename().string();
  size_t pos = 0;
  size_t lineNo = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    std::string_view line(data.data() + pos, end - pos);
    ++lineNo;
    if (!line.starts_with("  ") && !trim(line).empty()) {
      std::string where = fileName + " line " + std::to_string(lineNo) + " (byte " +
                          std::to_string(pos) + ")";
      Result<WnSynset> s = parseWordNetLine(line, where);
      if (!s) return s.status();
      s->lineOffset = pos;
      out.push_back(std::move(*s));
    }
    pos = end + 1;
  }
  if (out.empty())
    return Status::corrupt("WordNet data file " + path.string() +
                           " holds no synsets; reinstall it with: "
                           "apt-get install --reinstall wordnet-base");
  return out;
}

}  // namespace rag::corpus
