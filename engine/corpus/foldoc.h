// Reader for the Free On-line Dictionary of Computing as shipped by Debian's `dict-foldoc`:
// a dictd database of `foldoc.index` (one `headword TAB offset TAB length` line per headword,
// offset and length in dictd's base64: A-Z a-z 0-9 + /) and `foldoc.dict.dz` (dictzip, which is
// gzip with an extra header field, so zlib reads it). An entry starts with its headword line(s)
// ("two-binary, one-quaternary" / "2B1Q"), then a blank line, then a body indented by three
// spaces that begins with a subject in angle brackets and cross-references other entries
// `{like this}` or `{shown text (target)}`.
//
//   RAG_ASSIGN_OR_RETURN(FoldocDictionary dict, readFoldoc("/usr/share/dictd"));
//   for (const FoldocEntry& e : dict.entries)
//     for (const FoldocXref& x : extractXrefs(e.body)) dict.find(x.target) ...
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rag/status.h"

namespace rag::corpus {

struct FoldocEntry {
  std::string term;                  // first headword line, as written: "Ada", "Unix"
  std::vector<std::string> aliases;  // further headword lines: "2B1Q"
  std::string category;              // the leading <subject>, brackets removed; may be empty
  std::string body;                  // text after the headwords, indentation removed, newlines kept
  uint64_t offset = 0;               // byte offset of the entry in the decompressed dictionary
  uint64_t length = 0;
};

struct FoldocDictionary {
  std::vector<FoldocEntry> entries;  // in dictionary order, database-info entries left out
  // Lower-cased headwords (index words, terms and aliases) -> index into entries.
  std::unordered_map<std::string, size_t> byName;

  // The entry a cross-reference or headword names, trying simple plural forms
  // ("bits" -> "bit", "libraries" -> "library"); nullptr when none.
  const FoldocEntry* find(std::string_view name) const;
  size_t indexOf(const FoldocEntry* e) const { return static_cast<size_t>(e - entries.data()); }
};

struct FoldocXref {
  std::string text;    // what the reader sees, whitespace collapsed
  std::string target;  // what the link names: the part in parentheses when there is one
};

// Decodes one dictd base64 number ("K2+v"); false on a character outside the alphabet.
bool decodeDictNumber(std::string_view s, uint64_t& out);

// Decompresses a gzip (or dictzip) file completely. Corrupt when it is truncated, damaged or
// not gzip at all; NotFound when missing.
Result<std::string> gunzipFile(const std::filesystem::path& path);

// Reads `dir`/foldoc.index and `dir`/foldoc.dict.dz. Errors name the file and the fix
// (apt-get install dict-foldoc, or --reinstall when the files are damaged).
Result<FoldocDictionary> readFoldoc(const std::filesystem::path& dir);
// The same on the index text and the decompressed dictionary already in memory; the paths
// name them in errors.
Result<FoldocDictionary> parseFoldoc(std::string_view index, std::string_view data,
                                     const std::filesystem::path& indexPath,
                                     const std::filesystem::path& dictPath);

// Splits one raw entry (headword lines, blank line, indented body) into an entry.
FoldocEntry parseFoldocEntry(std::string_view raw);

// Cross-references in a body, in order of appearance, duplicates kept.
std::vector<FoldocXref> extractXrefs(std::string_view body);

// The body as running text: cross-reference braces removed ({shown (target)} -> "shown"),
// the leading <subject> and the trailing "(YYYY-MM-DD)" date line dropped, whitespace collapsed.
std::string foldocPlainText(std::string_view body);

// The first sentence of plain text: "[citations]" removed, a leading "/pronunciation/" and a
// short leading "(ABBR)" parenthesis dropped; initials ("Alfred V. Aho") and common
// abbreviations ("e.g.", "Inc.") do not end it.
std::string firstSentence(std::string_view plain);

// Splits `text` into chunks of at most `maxTokens` whitespace tokens, each starting with
// `prefixFirst` (chunk 0) or `prefixNext` (later chunks) so that it stands alone; the prefix
// counts toward the limit. At least one chunk, even for empty text.
std::vector<std::string> chunkText(std::string_view text, std::string_view prefixFirst,
                                   std::string_view prefixNext, size_t maxTokens);

// Number of whitespace-separated tokens.
size_t countTokens(std::string_view text);

}  // namespace rag::corpus
