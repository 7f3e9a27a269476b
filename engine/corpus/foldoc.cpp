#include "corpus/foldoc.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "core/fs.h"

namespace rag::corpus {

namespace {

constexpr std::string_view kReinstall =
    "; reinstall it with: apt-get install --reinstall dict-foldoc (or pass --foldoc DIR)";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string collapseSpaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (char c : s) {
    if (isSpace(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string_view trimView(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

// "(2012-07-18)": FOLDOC's last-updated stamp.
bool isDateLine(std::string_view s) {
  s = trimView(s);
  if (s.size() != 12 || s.front() != '(' || s.back() != ')') return false;
  for (size_t i = 1; i < 11; ++i) {
    bool dash = i == 5 || i == 8;
    if (dash ? s[i] != '-' : !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// Splits "{shown text (target)}" contents into what is shown and what is linked.
FoldocXref splitXref(std::string_view inner) {
  FoldocXref x;
  std::string flat = collapseSpaces(inner);
  x.text = flat;
  x.target = flat;
  if (!flat.empty() && flat.back() == ')') {
    size_t open = flat.rfind(" (");
    if (open != std::string::npos && open > 0) {
      x.text = flat.substr(0, open);
      x.target = flat.substr(open + 2, flat.size() - open - 3);
    }
  }
  return x;
}

}  // namespace

const FoldocEntry* FoldocDictionary::find(std::string_view name) const {
  std::string key = lower(collapseSpaces(name));
  if (key.empty()) return nullptr;
  auto hit = byName.find(key);
  if (hit != byName.end()) return &entries[hit->second];
  auto tryKey = [&](std::string k) -> const FoldocEntry* {
    auto h = byName.find(k);
    return h == byName.end() ? nullptr : &entries[h->second];
  };
  if (key.size() > 3 && key.ends_with("ies"))
    if (auto* e = tryKey(key.substr(0, key.size() - 3) + "y")) return e;
  if (key.size() > 2 && key.ends_with("es"))
    if (auto* e = tryKey(key.substr(0, key.size() - 2))) return e;
  if (key.size() > 1 && key.ends_with("s"))
    if (auto* e = tryKey(key.substr(0, key.size() - 1))) return e;
  return nullptr;
}

bool decodeDictNumber(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= 'A' && c <= 'Z') d = c - 'A';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 26;
    else if (c >= '0' && c <= '9') d = c - '0' + 52;
    else if (c == '+') d = 62;
    else if (c == '/') d = 63;
    else return false;
    v = v * 64 + static_cast<uint64_t>(d);
  }
  out = v;
  return true;
}

Result<std::string> gunzipFile(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Status::notFound("file " + path.string() + " does not exist");
  gzFile gz = gzopen(path.c_str(), "rb");
  if (!gz) return Status::ioError("cannot open " + path.string() + " for reading");
  gzbuffer(gz, 1 << 18);
  std::string out;
  const auto fileSize = std::filesystem::file_size(path, ec);
  if (!ec) out.reserve(static_cast<size_t>(fileSize) * 3);
  char buf[1 << 16];
  bool direct = false;
  std::string error;
  for (;;) {
    int n = gzread(gz, buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      error = gzerror(gz, &code);
      break;
    }
    if (out.empty() && n > 0) direct = gzdirect(gz) != 0;
    if (n == 0) {
      // End of input: zlib reports a stream cut short as Z_BUF_ERROR here.
      int code = Z_OK;
      const char* msg = gzerror(gz, &code);
      if (code != Z_OK && code != Z_STREAM_END) error = msg ? msg : "read error";
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  int closeRc = gzclose_r(gz);
  if (error.empty() && closeRc != Z_OK)
    error = closeRc == Z_BUF_ERROR ? "unexpected end of file" : "error closing the stream";
  if (!error.empty())
    return Status::corrupt(path.string() + " is truncated or corrupt (gzread: " + error + ")");
  if (direct) return Status::corrupt(path.string() + " is not gzip/dictzip data");
  return out;
}

FoldocEntry parseFoldocEntry(std::string_view raw) {
  FoldocEntry e;
  size_t pos = 0;
  // Headword lines: unindented, up to the first blank line.
  bool firstLine = true;
  while (pos < raw.size()) {
    size_t end = raw.find('\n', pos);
    if (end == std::string_view::npos) end = raw.size();
    std::string_view line = raw.substr(pos, end - pos);
    if (trimView(line).empty()) {
      if (!firstLine) {
        pos = end + 1;
        break;
      }
    } else {
      if (!line.empty() && (line.front() == ' ' || line.front() == '\t')) break;  // no blank line
      if (firstLine) e.term = collapseSpaces(line);
      else e.aliases.push_back(collapseSpaces(line));
      firstLine = false;
    }
    pos = end + 1;
  }
  // Body: remove the common three-space indentation, keep line structure.
  std::string body;
  body.reserve(raw.size() > pos ? raw.size() - pos : 0);
  while (pos < raw.size()) {
    size_t end = raw.find('\n', pos);
    if (end == std::string_view::npos) end = raw.size();
    std::string_view line = raw.substr(pos, end - pos);
    size_t strip = 0;
    while (strip < 3 && strip < line.size() && line[strip] == ' ') ++strip;
    body.append(line.substr(strip));
    body.push_back('\n');
    pos = end + 1;
  }
  std::string_view b = trimView(body);
  if (b.starts_with('<')) {
    size_t close = b.find('>');
    if (close != std::string_view::npos && close < 80) e.category = collapseSpaces(b.substr(1, close - 1));
  }
  e.body = std::string(b);
  return e;
}

std::vector<FoldocXref> extractXrefs(std::string_view body) {
  std::vector<FoldocXref> out;
  size_t pos = 0;
  while ((pos = body.find('{', pos)) != std::string_view::npos) {
    size_t close = body.find('}', pos + 1);
    if (close == std::string_view::npos) break;
    std::string_view inner = body.substr(pos + 1, close - pos - 1);
    // A stray '{' inside a reference means the first one was not a reference.
    size_t nested = inner.find('{');
    if (nested != std::string_view::npos) {
      pos += 1 + nested;
      continue;
    }
    FoldocXref x = splitXref(inner);
    if (!x.target.empty()) out.push_back(std::move(x));
    pos = close + 1;
  }
  return out;
}

std::string foldocPlainText(std::string_view body) {
  std::string_view b = trimView(body);
  if (b.starts_with('<')) {
    size_t close = b.find('>');
    if (close != std::string_view::npos && close < 80) b.remove_prefix(close + 1);
  }
  // Drop the trailing date stamp line.
  std::string_view t = trimView(b);
  size_t lastNl = t.rfind('\n');
  std::string_view lastLine = lastNl == std::string_view::npos ? t : t.substr(lastNl + 1);
  if (isDateLine(lastLine)) t = t.substr(0, lastNl == std::string_view::npos ? 0 : lastNl);

  std::string out;
  out.reserve(t.size());
  size_t pos = 0;
  while (pos < t.size()) {
    size_t open = t.find('{', pos);
    if (open == std::string_view::npos) {
      out.append(t.substr(pos));
      break;
    }
    size_t close = t.find('}', open + 1);
    size_t nested = t.find('{', open + 1);
    if (close == std::string_view::npos || (nested != std::string_view::npos && nested < close)) {
      out.append(t.substr(pos, open + 1 - pos));
      pos = open + 1;
      continue;
    }
    out.append(t.substr(pos, open - pos));
    out.append(splitXref(t.substr(open + 1, close - open - 1)).text);
    pos = close + 1;
  }
  return collapseSpaces(out);
}

namespace {

// Words after which a period does not end a sentence (checked case-sensitively).
constexpr std::string_view kAbbreviations[] = {
    "e.g", "i.e", "etc", "al", "Inc", "Corp", "Ltd", "Co", "vs", "Dr", "Mr", "Mrs", "Ms", "Prof",
    "St", "Jr", "Sr", "No", "cf", "approx", "Vol", "pp", "Ed", "ed", "Eds", "Fig", "Jan", "Feb",
    "Mar", "Apr", "Aug", "Sep", "Sept", "Oct", "Nov", "Dec"};

// Removes "[...]" citations ("[Jargon File]", "[\"Title\", A. Author, 1980]").
std::string withoutCitations(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    else if (c == ']' && depth > 0) --depth;
    else if (depth == 0) out.push_back(c);
  }
  return collapseSpaces(out);
}

bool endsSentence(std::string_view s, size_t dot) {
  if (dot + 1 < s.size()) {
    if (s[dot + 1] != ' ' || dot + 2 >= s.size()) return false;
    const char next = s[dot + 2];
    if (!std::isupper(static_cast<unsigned char>(next)) && next != '(' && next != '"') return false;
  }
  if (s[dot] != '.') return true;
  size_t start = dot;
  while (start > 0 && s[start - 1] != ' ' && s[start - 1] != '(') --start;
  std::string_view word = s.substr(start, dot - start);
  // An initial ("Alfred V. Aho") or a dotted initialism ("P.C.J. Smith").
  if (word.size() == 1 && std::isupper(static_cast<unsigned char>(word[0]))) return false;
  if (word.size() >= 3 && word[word.size() - 2] == '.') return false;
  for (std::string_view a : kAbbreviations)
    if (word == a) return false;
  return true;
}

}  // namespace

std::string firstSentence(std::string_view plain) {
  std::string clean = withoutCitations(plain);
  std::string_view s = trimView(clean);
  while (!s.empty() && (s.front() == '.' || s.front() == ',' || s.front() == ';' || s.front() == ' '))
    s.remove_prefix(1);
  // A pronunciation ("/yoo'niks/") and a short leading parenthesis (an abbreviation or an
  // etymology) come before the definition proper.
  for (int pass = 0; pass < 2; ++pass) {
    if (s.starts_with('/')) {
      size_t close = s.find("/ ", 1);
      if (close != std::string_view::npos && close < 40) s = trimView(s.substr(close + 1));
    }
    if (s.starts_with('(')) {
      size_t close = s.find(')');
      if (close != std::string_view::npos && close < 40) s = trimView(s.substr(close + 1));
    }
  }
  size_t pos = 0;
  while (pos < s.size()) {
    size_t dot = s.find_first_of(".?!", pos);
    if (dot == std::string_view::npos) break;
    if (endsSentence(s, dot)) return std::string(s.substr(0, dot + 1));
    pos = dot + 1;
  }
  return std::string(s);
}

size_t countTokens(std::string_view text) {
  size_t n = 0;
  bool in = false;
  for (char c : text) {
    if (isSpace(c)) in = false;
    else if (!in) {
      in = true;
      ++n;
    }
  }
  return n;
}

std::vector<std::string> chunkText(std::string_view text, std::string_view prefixFirst,
                                   std::string_view prefixNext, size_t maxTokens) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && isSpace(text[pos])) ++pos;
    size_t start = pos;
    while (pos < text.size() && !isSpace(text[pos])) ++pos;
    if (pos > start) words.push_back(text.substr(start, pos - start));
  }
  std::vector<std::string> chunks;
  size_t i = 0;
  do {
    std::string_view prefix = chunks.empty() ? prefixFirst : prefixNext;
    size_t prefixTokens = countTokens(prefix);
    // A prefix longer than the limit still leaves room for one word so the loop ends.
    size_t room = maxTokens > prefixTokens ? maxTokens - prefixTokens : 1;
    size_t remaining = words.size() - i;
    size_t take = std::min(room, remaining);
    // Avoid a tiny last chunk: split the tail evenly over the last two chunks.
    if (remaining > room && remaining < room + room / 4) take = (remaining + 1) / 2;
    std::string c(trimView(prefix));
    for (size_t k = 0; k < take; ++k) {
      if (!c.empty()) c.push_back(' ');
      c.append(words[i + k]);
    }
    i += take;
    chunks.push_back(std::move(c));
  } while (i < words.size());
  return chunks;
}

Result<FoldocDictionary> readFoldoc(const std::filesystem::path& dir) {
  const std::filesystem::path indexPath = dir / "foldoc.index";
  const std::filesystem::path dictPath = dir / "foldoc.dict.dz";
  std::error_code ec;
  for (const auto& p : {indexPath, dictPath})
    if (!std::filesystem::exists(p, ec))
      return Status::notFound("FOLDOC file " + p.string() +
                              " is missing; install it with: apt-get install dict-foldoc "
                              "(or pass --foldoc DIR)");
  RAG_ASSIGN_OR_RETURN(std::string index, readFile(indexPath));
  Result<std::string> data = gunzipFile(dictPath);
  if (!data) {
    if (data.status().code() == StatusCode::Corrupt)
      return Status::corrupt(data.status().message() + std::string(kReinstall));
    return data.status();
  }
  return parseFoldoc(index, *data, indexPath, dictPath);
}

Result<FoldocDictionary> parseFoldoc(std::string_view index, std::string_view data,
                                     const std::filesystem::path& indexPath,
                                     const std::filesystem::path& dictPath) {
  FoldocDictionary dict;
  std::map<uint64_t, size_t> entryAtOffset;  // ordered: entries keep dictionary order
  struct Headword { std::string key; uint64_t offset; };
  std::vector<Headword> headwords;
  headwords.reserve(index.size() / 20);
  size_t pos = 0, lineNo = 0;
  while (pos < index.size()) {
    size_t end = index.find('\n', pos);
    if (end == std::string::npos) end = index.size();
    std::string_view line(index.data() + pos, end - pos);
    pos = end + 1;
    ++lineNo;
    if (line.empty()) continue;
    size_t t1 = line.find('\t');
    size_t t2 = t1 == std::string_view::npos ? t1 : line.find('\t', t1 + 1);
    uint64_t off = 0, len = 0;
    if (t2 == std::string_view::npos || !decodeDictNumber(line.substr(t1 + 1, t2 - t1 - 1), off) ||
        !decodeDictNumber(trimView(line.substr(t2 + 1)), len))
      return Status::corrupt(indexPath.string() + " line " + std::to_string(lineNo) +
                             " is not `headword TAB offset TAB length`" + std::string(kReinstall));
    if (off + len > data.size())
      return Status::corrupt(indexPath.string() + " line " + std::to_string(lineNo) +
                             " points past the end of " + dictPath.string() + " (byte " +
                             std::to_string(off + len) + " of " + std::to_string(data.size()) +
                             "): the dictionary is truncated or does not match its index" +
                             std::string(kReinstall));
    std::string_view word = line.substr(0, t1);
    if (word.starts_with("00-database") || word.starts_with("00database")) continue;
    headwords.push_back({lower(word), off});
    if (!entryAtOffset.count(off)) {
      FoldocEntry e = parseFoldocEntry(data.substr(off, len));
      e.offset = off;
      e.length = len;
      if (e.term.empty()) continue;
      entryAtOffset.emplace(off, 0);
      dict.entries.push_back(std::move(e));
    }
  }
  if (dict.entries.empty())
    return Status::corrupt(indexPath.string() + " lists no entries" + std::string(kReinstall));
  // Dictionary order, which is also the order of the decompressed file.
  std::sort(dict.entries.begin(), dict.entries.end(),
            [](const FoldocEntry& a, const FoldocEntry& b) { return a.offset < b.offset; });
  for (size_t i = 0; i < dict.entries.size(); ++i) entryAtOffset[dict.entries[i].offset] = i;
  dict.byName.reserve(headwords.size() * 2);
  // Terms and aliases first, so a headword of one entry wins over an index word of another.
  for (size_t i = 0; i < dict.entries.size(); ++i) {
    dict.byName.emplace(lower(dict.entries[i].term), i);
    for (const std::string& a : dict.entries[i].aliases) dict.byName.emplace(lower(a), i);
  }
  for (const Headword& h : headwords) {
    auto it = entryAtOffset.find(h.offset);
    if (it != entryAtOffset.end()) dict.byName.emplace(h.key, it->second);
  }
  return dict;
}

}  // namespace rag::corpus
