// Questions reworded away from their passages: the held-out wording check of `ragraph eval
// retrieval --reworded` (issue 21). Every question of the corpus is generated from the passage
// that answers it, so it shares most of its words with that passage, which flatters lexical
// retrieval. A reworded question keeps its meaning and swaps each content word (not a function
// word, three letters or more) for a WordNet synonym: another lemma of a synset the word (or its
// singular, for a plural) is a lemma of, the first in corpus order that is a different word.
// Deterministic; words without a synonym stay.
//
//   RAG_ASSIGN_OR_RETURN(Rewording r, Rewording::open(corpusPath));
//   RAG_ASSIGN_OR_RETURN(std::string q, r.reword("Which term means: natural objects visible in the sky?"));
//   // "Which term means: born physical objects seeable in the sky?"
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "rag/status.h"
#include "storage/sqlite.h"

namespace rag::retrieval {

class Rewording {
public:
  // The corpus's errors: missing (with the fix), not a corpus.
  static Result<Rewording> open(const std::filesystem::path& corpus);

  Result<std::string> reword(std::string_view question);
  // The first synonym of a lower-case word, if it has one.
  Result<std::optional<std::string>> synonym(const std::string& word);

  // The share of `question`'s content words that occur among `passage`'s words (0 when it has
  // none): how much wording a question shares with the passage that answers it.
  static double sharedWords(std::string_view question, std::string_view passage);

private:
  explicit Rewording(sql::Db db) : m_db(std::move(db)) {}
  sql::Db m_db;
  std::map<std::string, std::optional<std::string>, std::less<>> m_cache;
};

}  // namespace rag::retrieval
