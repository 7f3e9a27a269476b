// Reading QA items and passages back from a corpus database (the rows `corpus build` wrote),
// shared by the engine facade, the trainer's data and the evaluation.
//
//   RAG_ASSIGN_OR_RETURN(sql::Db db, openCorpus(path));
//   RAG_ASSIGN_OR_RETURN(std::vector<int64_t> ids, listQaIds(db, "train"));
//   RAG_ASSIGN_OR_RETURN(rag::QaItem item, readQaItem(db, ids.front()));  // with gold passages
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rag/corpus.h"
#include "rag/status.h"
#include "storage/sqlite.h"

namespace rag::corpus {

// One QA item with its answers and gold passages. NotFound for an unknown id, Corrupt when its
// JSON columns are malformed or it names a passage that does not exist.
Result<::rag::QaItem> readQaItem(sql::Db& db, int64_t qaId);

// One passage by id; NotFound for an unknown id.
Result<::rag::Passage> readPassage(sql::Db& db, int64_t passageId);

// Ids of the items of `split` (and of `type`, when not empty), in id order; may be empty.
Result<std::vector<int64_t>> listQaIds(sql::Db& db, std::string_view split,
                                       std::string_view type = {});

// A JSON array of strings (the `answers` column); Corrupt naming `what` otherwise.
Result<std::vector<std::string>> parseJsonStrings(std::string_view text, std::string_view what);

// The NotFound for a split without items, naming the splits the corpus does have:
// "corpus X has no QA items in split 'dev'; it has: test, train (<fix>)". A corpus with no QA
// at all is told to rebuild.
Status emptySplitError(sql::Db& db, std::string_view split, std::string_view fix);

}  // namespace rag::corpus
