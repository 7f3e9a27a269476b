#include "corpus/qa_prompt.h"

#include <algorithm>
#include <unordered_set>

#include "corpus/corpus_db.h"
#include "corpus/qa_reader.h"
#include "core/random.h"

namespace rag::corpus {

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool isUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The longest prefix of `s` within `max` bytes that ends before a space (or, with no space in
// reach, on a UTF-8 character boundary), without trailing white space.
std::string_view cutAtWord(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && s[cut] != ' ') --cut;
  if (cut == 0) {
    cut = max;
    while (cut > 0 && isUtf8Continuation(s[cut])) --cut;
  }
  s = s.substr(0, cut);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Splits on ", " and "; " (targets of a relation are separated by "; ", lemmas by ", ").
std::vector<std::string_view> listItems(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if ((s[i] == ',' || s[i] == ';') && s[i + 1] == ' ') {
      out.push_back(s.substr(start, i - start));
      start = i + 2;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

std::string joinFirst(std::span<const std::string_view> items, size_t n) {
  std::string out;
  for (size_t i = 0; i < std::min(n, items.size()); ++i) {
    if (i) out += ", ";
    out += items[i];
  }
  return out;
}

// "x and 22 more" -> "x" (how a synset passage says a list was cut).
std::string_view withoutMoreSuffix(std::string_view item) {
  const size_t at = item.rfind(" and ");
  if (at == std::string_view::npos || !item.ends_with(" more")) return item;
  std::string_view count = item.substr(at + 5, item.size() - at - 5 - 5);
  if (count.empty() || !std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return item;
  return item.substr(0, at);
}

// A clause label after ". " in a synset passage: "kind of: ", "has kinds: ", "Example: ".
// Returns the label's length up to the colon, or 0.
size_t clauseLabelAt(std::string_view s, size_t at) {
  size_t k = at;
  const bool example = s.substr(at).starts_with("Example");
  if (example) k += 7;
  while (k < s.size() && k - at <= 24 && ((s[k] >= 'a' && s[k] <= 'z') || s[k] == ' ')) ++k;
  if (k == at || k + 1 >= s.size() || s[k] != ':' || s[k + 1] != ' ') return 0;
  return k - at;
}

std::string compactSynsetPassage(std::string_view lemmas, std::string_view body,
                                 const PassageStyle& style) {
  // Cut the body into the gloss and the clauses that follow it.
  std::vector<std::string_view> clauses;
  std::string_view gloss = body;
  size_t clauseStart = std::string_view::npos;
  for (size_t i = 0; i + 2 < body.size(); ++i) {
    if (body[i] != '.' || body[i + 1] != ' ' || clauseLabelAt(body, i + 2) == 0) continue;
    if (clauseStart == std::string_view::npos) gloss = body.substr(0, i);
    else clauses.push_back(body.substr(clauseStart, i - clauseStart));
    clauseStart = i + 2;
  }
  if (clauseStart != std::string_view::npos) {
    std::string_view last = body.substr(clauseStart);
    if (last.ends_with('.')) last.remove_suffix(1);
    clauses.push_back(last);
  } else if (gloss.ends_with('.')) {
    gloss.remove_suffix(1);
  }

  std::vector<std::string_view> lemmaList = listItems(lemmas);
  std::string head = joinFirst(lemmaList, style.listItems) + ": ";
  size_t words = 0, end = 0;
  for (size_t i = 0; i <= gloss.size(); ++i) {
    const bool boundary = i == gloss.size() || gloss[i] == ' ';
    if (boundary && i > 0 && gloss[i - 1] != ' ') {
      if (++words > style.glossWords) break;
      end = i;
    }
  }
  std::string_view keptGloss = gloss.substr(0, end);
  while (!keptGloss.empty() && (keptGloss.back() == ',' || keptGloss.back() == ';' || keptGloss.back() == ':'))
    keptGloss.remove_suffix(1);
  std::string out = head + std::string(keptGloss) + ".";

  std::vector<std::string> kept;
  for (std::string_view c : clauses) {
    const size_t labelLen = clauseLabelAt(c, 0);
    if (c.starts_with("Example")) continue;  // examples cost tokens and answer nothing
    std::vector<std::string_view> items = listItems(c.substr(labelLen + 2));
    for (std::string_view& it : items) it = withoutMoreSuffix(it);
    kept.push_back(std::string(c.substr(0, labelLen)) + ": " + joinFirst(items, style.listItems) + ".");
  }
  size_t length = out.size();
  size_t fit = 0;
  while (fit < kept.size() && length + 1 + kept[fit].size() <= style.maxChars) length += 1 + kept[fit++].size();
  for (size_t i = 0; i < fit; ++i) out += " " + kept[i];
  return std::string(cutAtWord(out, style.maxChars));
}

std::string normalizeForMatch(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool pendingSpace = false;
  for (char c : s) {
    if (isSpace(c)) {
      pendingSpace = !out.empty();
      continue;
    }
    if (pendingSpace) out += ' ';
    pendingSpace = false;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

}  // namespace

std::string_view qaContextName(QaContext c) { return c == QaContext::Gold ? "gold" : "none"; }

Result<QaContext> parseQaContext(std::string_view name) {
  if (name == "gold") return QaContext::Gold;
  if (name == "none") return QaContext::None;
  return Status::invalidArgument("unknown context '" + std::string(name) +
                                 "'; use gold (gold passages among distractors) or none "
                                 "(the question alone)");
}

std::string formatPassage(const rag::Passage& passage, const PassageStyle& style) {
  std::string_view text = passage.text;
  while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
  if (style.compact && passage.source == "wordnet") {
    // "lemma, lemma (noun): body"
    const size_t colon = text.find("): ");
    const size_t open = colon == std::string_view::npos ? colon : text.rfind(" (", colon);
    if (open != std::string_view::npos)
      return compactSynsetPassage(text.substr(0, open), text.substr(colon + 3), style);
  }
  return std::string(cutAtWord(text, style.maxChars));
}

std::string_view QaPrompt::segment(size_t i) const {
  const size_t end = i + 1 < segmentStarts.size() ? segmentStarts[i + 1] : text.size();
  return std::string_view(text).substr(segmentStarts[i], end - segmentStarts[i]);
}

QaPrompt buildQaPrompt(const rag::QaItem& item, std::span<const rag::Passage> contextPassages,
                       const QaPromptOptions& options) {
  QaPrompt p;
  for (const rag::Passage& passage : contextPassages) {
    const bool gold = std::any_of(item.goldPassages.begin(), item.goldPassages.end(),
                                  [&](const rag::Passage& g) { return g.id == passage.id; });
    if (gold) p.goldSlots.push_back(p.passageIds.size());
    p.passageIds.push_back(passage.id);
    p.segmentStarts.push_back(p.text.size());
    p.text += formatPassage(passage, options.style);
    p.text += '\n';
  }
  p.segmentStarts.push_back(p.text.size());
  p.text += "Question: " + item.question + "\nAnswer:";
  p.answer = item.answers.empty() ? std::string() : item.answers.front();
  p.completion = " " + p.answer;
  return p;
}

void addGoldPassages(rag::QaItem& context, const rag::QaItem& other) {
  for (const rag::Passage& g : other.goldPassages)
    if (std::none_of(context.goldPassages.begin(), context.goldPassages.end(),
                     [&](const rag::Passage& a) { return a.id == g.id; }))
      context.goldPassages.push_back(g);
}

bool answerMatches(std::string_view output, std::span<const std::string> answers) {
  const std::string haystack = normalizeForMatch(output);
  for (const std::string& a : answers) {
    const std::string needle = normalizeForMatch(a);
    if (!needle.empty() && haystack.find(needle) != std::string::npos) return true;
  }
  return false;
}

Result<QaPromptReader> QaPromptReader::open(const std::filesystem::path& corpus) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, openCorpus(corpus));
  RAG_ASSIGN_OR_RETURN(int64_t maxId, db.queryInt64("SELECT coalesce(max(id), 0) FROM passages"));
  return QaPromptReader(std::move(db), maxId);
}

Result<std::vector<int64_t>> QaPromptReader::splitIds(std::string_view split) {
  RAG_ASSIGN_OR_RETURN(std::vector<int64_t> ids, listQaIds(m_db, split));
  if (ids.empty()) return emptySplitError(m_db, split, "choose one of them");
  return ids;
}

Result<rag::QaItem> QaPromptReader::item(int64_t qaId) { return readQaItem(m_db, qaId); }

Result<rag::Passage> QaPromptReader::passage(int64_t passageId) {
  return readPassage(m_db, passageId);
}

Result<std::vector<rag::Passage>> QaPromptReader::contextPassages(const rag::QaItem& item,
                                                                  const QaPromptOptions& options,
                                                                  uint64_t salt) {
  if (options.context == QaContext::None) return std::vector<rag::Passage>{};
  std::vector<rag::Passage> out = item.goldPassages;
  std::unordered_set<int64_t> used;
  for (const rag::Passage& p : out) used.insert(p.id);
  const size_t want = std::max(options.passages, out.size());
  Rng rng(deriveSeed(static_cast<uint64_t>(item.id), salt));
  // Ids are dense, so a few rejected draws (a gold passage, a repeat) are all it costs; the
  // bound only matters for a corpus smaller than the prompt.
  for (size_t attempts = 0; out.size() < want && m_maxPassageId > 0 && attempts < 20 * want; ++attempts) {
    const int64_t id = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(m_maxPassageId)));
    if (!used.insert(id).second) continue;
    Result<rag::Passage> p = readPassage(m_db, id);
    if (!p && p.status().code() == StatusCode::NotFound) continue;
    if (!p) return p.status();
    out.push_back(std::move(*p));
  }
  rng.shuffle(out);
  return out;
}

Result<QaPrompt> QaPromptReader::prompt(int64_t qaId, const QaPromptOptions& options, uint64_t salt) {
  RAG_ASSIGN_OR_RETURN(rag::QaItem it, item(qaId));
  RAG_ASSIGN_OR_RETURN(std::vector<rag::Passage> context, contextPassages(it, options, salt));
  return buildQaPrompt(it, context, options);
}

}  // namespace rag::corpus
