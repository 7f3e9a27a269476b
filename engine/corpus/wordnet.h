// Reader for WordNet's lexicographer data files (data.noun, data.verb, data.adj, data.adv) as
// shipped by Debian's `wordnet-base`, in the format of wndb(5):
//
//   synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...]
//     [frames...] | gloss
//
// w_cnt is two hex digits, p_cnt three decimal digits, each pointer is
// `symbol target_offset pos source/target` (source/target: four hex digits, 0000 for a pointer
// between synsets, otherwise word numbers of a pointer between two specific lemmas).
//
//   RAG_ASSIGN_OR_RETURN(std::vector<WnSynset> nouns,
//                        readWordNetFile("/usr/share/wordnet/data.noun"));
//   for (const WnSynset& s : nouns) ... s.words[0].text ... pointerTypeName(p.symbol, s.pos)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"

namespace rag::corpus {

struct WnWord {
  std::string text;  // underscores replaced by spaces, adjective marker stripped: "domestic dog"
  int lexId = 0;
};

struct WnPointer {
  std::string_view type;   // readable name from pointerTypeName(): "hypernym", "part_holonym"
  uint32_t targetOffset = 0;
  char targetPos = 'n';    // n | v | a | s | r
  uint8_t sourceWord = 0;  // 1-based word number in this synset; 0 for a semantic pointer
  uint8_t targetWord = 0;  // 1-based word number in the target synset; 0 for a semantic pointer
  bool lexical() const { return sourceWord != 0; }
};

struct WnSynset {
  uint32_t offset = 0;       // synset_offset as written in the line (the key pointers use)
  uint64_t lineOffset = 0;   // byte offset of the line in its file (provenance)
  char pos = 'n';            // ss_type: n | v | a | s | r
  int lexFilenum = 0;
  std::vector<WnWord> words;
  std::vector<WnPointer> pointers;
  std::string definition;              // the gloss without its examples
  std::vector<std::string> examples;   // quoted usage examples from the gloss, quotes removed
};

// The readable snake_case name of a WordNet pointer symbol; `pos` disambiguates `\`
// (pertainym for adjectives, derived_from_adjective for adverbs). Empty for an unknown symbol.
std::string_view pointerTypeName(std::string_view symbol, char pos);

// Every pointer type name pointerTypeName() can return, in a fixed order.
const std::vector<std::string_view>& allPointerTypeNames();

// Parses one synset line (without its newline). `where` names the line in error messages.
Result<WnSynset> parseWordNetLine(std::string_view line, std::string_view where);

// Reads a whole data file, skipping the license header (lines starting with two spaces).
// NotFound (naming the package to install) when missing; Corrupt naming the line otherwise.
Result<std::vector<WnSynset>> readWordNetFile(const std::filesystem::path& path);
// The same on a data file's text already in memory; `path` names it in errors.
Result<std::vector<WnSynset>> parseWordNetData(std::string_view data,
                                               const std::filesystem::path& path);

// The four data files under `dir`, in the order noun, verb, adj, adv.
std::vector<std::filesystem::path> wordNetDataFiles(const std::filesystem::path& dir);

// "noun", "verb", "adjective" (also for satellites), "adverb".
std::string_view posName(char pos);

}  // namespace rag::corpus
