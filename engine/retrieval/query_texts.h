// Query texts for loading an embedding service (`ragraph bench embed`, the workbench's WindVE
// page): the corpus's test-split QA questions, or, without a corpus, sentences of words drawn from
// the embedder's own tokenizer vocabulary.
//
//   RAG_ASSIGN_OR_RETURN(QueryTexts q, loadQueryTexts(corpusPath, embedderDir, 256));
//   service->submit(q.texts[i % q.texts.size()]);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "rag/status.h"

namespace rag::retrieval {

struct QueryTexts {
  std::vector<std::string> texts;  // never empty on success
  std::string source;              // where they came from, for the user
};

// Up to `count` test-split questions spread over the question types, shuffled (the ids are grouped
// by type and the types differ in length: shuffled, every burst of the first C texts has the same
// mix). Without a corpus file (or with no test questions in it), `count` sentences of 8-16 words
// taken from <embedderDir>/tokenizer.json, said so in `source`. The corpus reader's errors for a
// file that is not a corpus; NotFound when neither source gives a text.
Result<QueryTexts> loadQueryTexts(const std::filesystem::path& corpus, const std::filesystem::path& embedderDir,
                                  int64_t count);

}  // namespace rag::retrieval
