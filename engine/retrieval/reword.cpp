#include "retrieval/reword.h"

#include <cctype>
#include <set>

#include "corpus/corpus_db.h"
#include "retrieval/bm25_index.h"

namespace rag::retrieval {

Result<Rewording> Rewording::open(const std::filesystem::path& corpus) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(corpus));
  return Rewording(std::move(db));
}

Result<std::optional<std::string>> Rewording::synonym(const std::string& word) {
  if (auto hit = m_cache.find(word); hit != m_cache.end()) return hit->second;
  // Another lemma of a synset `word` names, in corpus order (WordNet lists a word's senses most
  // frequent first).
  static constexpr const char* kSql =
      "SELECT l2.name FROM entities l1 "
      "JOIN relations r1 ON r1.src = l1.id AND r1.type = 'lemma_of' "
      "JOIN relations r2 ON r2.dst = r1.dst AND r2.type = 'lemma_of' "
      "JOIN entities l2 ON l2.id = r2.src "
      "WHERE l1.kind = 'lemma' AND l1.name = ? AND lower(l2.name) <> ? ORDER BY r1.id, r2.id LIMIT 1";
  std::optional<std::string> found;
  for (const std::string& form : {word, word.size() > 3 && word.back() == 's' ? word.substr(0, word.size() - 1) : std::string()}) {
    if (form.empty()) continue;
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_db.prepare(kSql));
    st.bind(1, form);
    st.bind(2, form);
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (row) {
      found = st.columnText(0);
      break;
    }
  }
  m_cache.emplace(word, found);
  return found;
}

Result<std::string> Rewording::reword(std::string_view question) {
  const std::vector<std::string> content = Bm25Index::queryWords(question);
  const std::set<std::string, std::less<>> contentWords(content.begin(), content.end());
  std::string out;
  size_t at = 0;
  while (at < question.size()) {
    if (!std::isalpha(static_cast<unsigned char>(question[at]))) {
      out += question[at++];
      continue;
    }
    size_t end = at;
    while (end < question.size() && std::isalpha(static_cast<unsigned char>(question[end]))) ++end;
    const std::string_view word = question.substr(at, end - at);
    std::string lower(word);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::optional<std::string> swap;
    if (word.size() >= 3 && contentWords.count(lower)) {
      RAG_ASSIGN_OR_RETURN(swap, synonym(lower));
    }
    if (swap) {
      if (std::isupper(static_cast<unsigned char>(word[0])) && !swap->empty())
        (*swap)[0] = static_cast<char>(std::toupper(static_cast<unsigned char>((*swap)[0])));
      out += *swap;
    } else {
      out += word;
    }
    at = end;
  }
  return out;
}

double Rewording::sharedWords(std::string_view question, std::string_view passage) {
  const std::vector<std::string> q = Bm25Index::queryWords(question);
  if (q.empty()) return 0;
  const std::vector<std::string> p = Bm25Index::queryWords(passage);
  const std::set<std::string, std::less<>> inPassage(p.begin(), p.end());
  size_t shared = 0;
  for (const std::string& w : q) shared += inPassage.count(w);
  return static_cast<double>(shared) / static_cast<double>(q.size());
}

}  // namespace rag::retrieval
