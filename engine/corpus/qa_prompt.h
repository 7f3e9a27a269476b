// The one QA prompt format: training (`ragraph train lm`), evaluation (`ragraph eval qa`) and
// serving (`ragraph run`) all build prompts here, so they cannot disagree on what a model sees.
//
//   RAG_ASSIGN_OR_RETURN(QaPromptReader reader, QaPromptReader::open(corpusPath));
//   RAG_ASSIGN_OR_RETURN(std::vector<int64_t> ids, reader.splitIds("dev"));
//   QaPromptOptions opts;                       // gold passage among 5, compact passages
//   RAG_ASSIGN_OR_RETURN(QaPrompt p, reader.prompt(ids[0], opts));
//   model::QaTokens t = model::tokenizeQaPrompt(tokenizer, p);  // token ids (model/prompt.h)
//   ... generate from t.tokens[0, t.promptLength) ...
//   bool correct = answerMatches(output, item.answers);
//
// A prompt is a list of segments: one per context passage (each ends with a newline), then
// the question segment "Question: <question>\nAnswer:". The model is trained to continue with
// the completion " <first gold answer>" and the end-of-sequence token. With Block-Attention each
// passage segment is one block and the question (with everything generated after it) is the
// last block, which attends to all.
//
// Context modes: gold puts the item's gold passages among `passages` passages (the rest are
// distractors drawn from the whole corpus), in an order shuffled by a generator seeded with the
// QA id and a salt, so a prompt is reproducible (evaluation uses salt 0; training varies the
// salt per draw). none gives the question alone (closed-book).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/corpus.h"
#include "rag/status.h"
#include "storage/sqlite.h"

namespace rag::corpus {

enum class QaContext { Gold, None };
std::string_view qaContextName(QaContext c);  // "gold" | "none"
// InvalidArgument naming the accepted values for anything else.
Result<QaContext> parseQaContext(std::string_view name);

// How a passage is written into a prompt. The compact form keeps what questions ask about and
// drops what costs tokens: for a WordNet passage "lemmas (pos): gloss. Example: ... kind of:
// a, b. has kinds: ..." it keeps at most `listItems` lemmas without the part of speech, the
// first `glossWords` words of the gloss, no examples, and each relation clause with at most
// `listItems` items; whole relation clauses are dropped from the end to fit `maxChars`. Other
// passages (FOLDOC) are cut at a word boundary within `maxChars`. The verbatim form only cuts.
// The defaults keep an answer in its gold passage for 99.6% of the dev questions and make the
// median 5-passage prompt 221 tokens with a 4,096-piece tokenizer (p90 258).
struct PassageStyle {
  bool compact = true;
  size_t maxChars = 180;  // the budget of one passage (bytes of UTF-8)
  size_t glossWords = 8;  // compact only
  size_t listItems = 2;   // compact only
};

// The text of one passage in a prompt, without the trailing newline.
std::string formatPassage(const rag::Passage& passage, const PassageStyle& style);

// What the passage index embeds for a passage, and what embedder training pairs queries with:
// the passage text as stored.
inline std::string_view embeddingText(const rag::Passage& passage) { return passage.text; }

struct QaPromptOptions {
  QaContext context = QaContext::Gold;
  size_t passages = 5;  // gold mode: gold + distractors (more when an item has more gold ones)
  PassageStyle style;
};

struct QaPrompt {
  std::string text;                   // every segment, concatenated
  std::vector<size_t> segmentStarts;  // byte offset of each segment; [0] = 0; the last is the question
  std::vector<int64_t> passageIds;    // the context passages in prompt order
  std::vector<size_t> goldSlots;      // indexes into passageIds of the gold passages, ascending
  std::string answer;                 // the first gold answer
  std::string completion;             // what follows `text` in training: " " + answer

  size_t segmentCount() const { return segmentStarts.size(); }
  std::string_view segment(size_t i) const;
};

// Builds the prompt of `item` over `contextPassages` (taken in the order given; pass none for
// a closed-book prompt). Gold slots are the positions of passages whose id is one of the
// item's gold passages.
QaPrompt buildQaPrompt(const rag::QaItem& item, std::span<const rag::Passage> contextPassages,
                       const QaPromptOptions& options);

// Adds the gold passages of `other` that `context` does not hold yet, in order: the context of a
// prompt that asks several questions over one set of passages (`train lm --questions`,
// `--gold-questions`) is the first item with every question's gold passages.
void addGoldPassages(rag::QaItem& context, const rag::QaItem& other);

// True when one of `answers` occurs in `output`, ignoring ASCII case and with every run of
// white space read as one space (the Block-Attention paper's accuracy). Empty answers never
// match.
bool answerMatches(std::string_view output, std::span<const std::string> answers);

// QA items and context passages from a corpus database.
class QaPromptReader {
public:
  // openCorpus's errors: NotFound with the fix, SchemaMismatch for another kind of file.
  static Result<QaPromptReader> open(const std::filesystem::path& corpus);

  // The ids of a split in id order. NotFound when the split has no items, naming the splits
  // the corpus has.
  Result<std::vector<int64_t>> splitIds(std::string_view split);
  Result<rag::QaItem> item(int64_t qaId);
  Result<rag::Passage> passage(int64_t passageId);
  // Passages to draw uniformly from: every id in [1, maxPassageId()] (ids are dense).
  int64_t maxPassageId() const { return m_maxPassageId; }

  // The context of `item` under `options` (see the file comment); deterministic in
  // (item.id, salt). A corpus with fewer passages than asked for gives fewer distractors.
  Result<std::vector<rag::Passage>> contextPassages(const rag::QaItem& item,
                                                    const QaPromptOptions& options,
                                                    uint64_t salt = 0);
  // item() + contextPassages() + buildQaPrompt().
  Result<QaPrompt> prompt(int64_t qaId, const QaPromptOptions& options, uint64_t salt = 0);

  sql::Db& db() { return m_db; }

private:
  QaPromptReader(sql::Db db, int64_t maxPassageId)
      : m_db(std::move(db)), m_maxPassageId(maxPassageId) {}
  sql::Db m_db;
  int64_t m_maxPassageId = 0;
};

}  // namespace rag::corpus
