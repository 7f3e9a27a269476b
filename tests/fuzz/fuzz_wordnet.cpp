// WordNet data files (engine/corpus/wordnet.h): any text either reads as synsets whose
// lexical pointers name words the synset has, or gives a Corrupt error naming the line.
#include "corpus/wordnet.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rag::corpus;
  rag::Result<std::vector<WnSynset>> synsets = parseWordNetData(rag::fuzz::asText(data, size), "data.fuzz");
  if (!synsets) {
    RAG_FUZZ_CHECK(synsets.status().code() == rag::StatusCode::Corrupt);
    return 0;
  }
  for (const WnSynset& s : *synsets) {
    RAG_FUZZ_CHECK(!s.words.empty() && s.lineOffset < size);
    RAG_FUZZ_CHECK(posName(s.pos) != "unknown");
    for (const WnPointer& p : s.pointers) {
      RAG_FUZZ_CHECK(!p.type.empty() && p.sourceWord <= s.words.size());
      RAG_FUZZ_CHECK(p.lexical() == (p.targetWord != 0));
    }
  }
  return 0;
}
