#include "retrieval/query_texts.h"

#include <algorithm>
#include <optional>
#include <random>

#include "corpus/qa_prompt.h"
#include "model/tokenizer.h"

namespace rag::retrieval {

namespace fs = std::filesystem;

Result<QueryTexts> loadQueryTexts(const fs::path& corpus, const fs::path& embedderDir, int64_t count) {
  if (count < 1) return Status::invalidArgument("asked for " + std::to_string(count) + " query texts; ask for at least 1");
  std::error_code ec;
  if (fs::exists(corpus, ec)) {
    RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(corpus));
    RAG_ASSIGN_OR_RETURN(std::vector<int64_t> all, reader.splitIds("test"));
    // Only the question text is needed (QaPromptReader::item would read the gold passages too).
    RAG_ASSIGN_OR_RETURN(sql::Stmt ask, reader.db().prepare("SELECT question FROM qa WHERE id = ?"));
    QueryTexts q;
    const size_t n = std::min(static_cast<size_t>(count), all.size());
    for (size_t i = 0; i < n; ++i) {  // spread evenly over the split
      ask.reset();
      ask.bind(1, all[i * all.size() / n]);
      RAG_ASSIGN_OR_RETURN(bool row, ask.step());
      if (row && !ask.columnTextView(0).empty()) q.texts.emplace_back(ask.columnTextView(0));
    }
    if (!q.texts.empty()) {
      std::shuffle(q.texts.begin(), q.texts.end(), std::mt19937_64(7));
      q.source = "test-split QA questions of " + corpus.string() + ", shuffled";
      return q;
    }
  }
  RAG_ASSIGN_OR_RETURN(model::Tokenizer tok, model::Tokenizer::load(embedderDir / "tokenizer.json"));
  std::vector<std::string> words;
  for (int32_t id = 0; id < tok.vocabSize(); ++id) {
    if (tok.isSpecial(id)) continue;
    std::optional<std::string> t = tok.tokenText(id);
    if (!t) continue;
    std::string w;
    for (char c : *t)
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) w += c;
    if (w.size() >= 3 && w.size() + 2 >= t->size()) words.push_back(std::move(w));
  }
  if (words.empty()) return Status::notFound("no corpus at " + corpus.string() + " and no word-like tokens in " +
                                             (embedderDir / "tokenizer.json").string() + "; give a corpus");
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
  std::uniform_int_distribution<int> length(8, 16);
  QueryTexts q;
  for (int64_t i = 0; i < count; ++i) {
    std::string s;
    for (int n = length(rng), j = 0; j < n; ++j) {
      if (j) s += ' ';
      s += words[pick(rng)];
    }
    s += '?';
    q.texts.push_back(std::move(s));
  }
  q.source = "generated from the embedder's tokenizer vocabulary (no corpus at " + corpus.string() + ")";
  return q;
}

}  // namespace rag::retrieval
