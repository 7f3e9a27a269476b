#include "corpus/corpus_model.h"

namespace rag::corpus {

std::string_view entityKindName(EntityKind k) {
  switch (k) {
    case EntityKind::Synset: return "synset";
    case EntityKind::Lemma: return "lemma";
    case EntityKind::Term: return "term";
  }
  return "unknown";
}

std::string_view CorpusModel::sourceOf(const Provenance& p) const {
  if (p.file < sourceFiles.size() && sourceFiles[p.file].starts_with("foldoc")) return "foldoc";
  return "wordnet";
}

}  // namespace rag::corpus
