// The FOLDOC dictd reader (engine/corpus/foldoc.h). The input is `foldoc.index`, a NUL byte and
// the decompressed dictionary; the index either reads or gives a Corrupt error, and every entry
// (and the whole input read as one raw entry) goes through the text helpers the corpus builder
// uses: cross-references, plain text, first sentence, chunks.
#include "corpus/foldoc.h"
#include "fuzz_check.h"

namespace {

void useEntry(const rag::corpus::FoldocEntry& e, const rag::corpus::FoldocDictionary* dict) {
  using namespace rag::corpus;
  for (const FoldocXref& x : extractXrefs(e.body))
    if (dict) (void)dict->find(x.target);
  const std::string plain = foldocPlainText(e.body);
  (void)firstSentence(plain);
  const std::vector<std::string> chunks = chunkText(plain, e.term + ": ", e.term + " (cont.): ", 16);
  RAG_FUZZ_CHECK(!chunks.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rag::corpus;
  const std::string_view text = rag::fuzz::asText(data, size);
  const auto [index, dictText] = rag::fuzz::splitAtNul(text);
  rag::Result<FoldocDictionary> dict = parseFoldoc(index, dictText, "foldoc.index", "foldoc.dict.dz");
  if (dict) {
    for (const FoldocEntry& e : dict->entries) {
      RAG_FUZZ_CHECK(!e.term.empty() && e.offset + e.length <= dictText.size());
      useEntry(e, &*dict);
    }
    for (const auto& [name, i] : dict->byName) RAG_FUZZ_CHECK(i < dict->entries.size());
  } else {
    RAG_FUZZ_CHECK(dict.status().code() == rag::StatusCode::Corrupt);
  }
  useEntry(parseFoldocEntry(text), nullptr);
  uint64_t n = 0;
  (void)decodeDictNumber(index.substr(0, 12), n);
  return 0;
}
