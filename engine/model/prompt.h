// Prompts as token segments: the one place text becomes the token ids a model reads, for
// training, evaluation and serving alike. A prompt is a list of pieces (template text, a
// variable's text, one retrieved passage); each piece is tokenized on its own, so a passage's
// tokens are the same in every prompt that holds it (what the prefix cache and Block-Attention
// reuse), and every segment remembers where it came from.
//
//   // serving: a workflow node's template over the request's variables and passages
//   RAG_ASSIGN_OR_RETURN(std::vector<PromptPiece> pieces, promptPieces(node.promptTemplate, vars, passages));
//   PromptTokens p = tokenizePieces(tokenizer, pieces);
//   ... p.tokens to the runner; p.segments say which tokens are passage 123's ...
//
//   // training and evaluation: a QA prompt (corpus/qa_prompt.h)
//   QaTokens t = tokenizeQaPrompt(tokenizer, qaPrompt);
//
// How pieces form: in a template, literal text and variables that hold plain text run together
// into one Text piece (tokenized as one string, so "Question: {question}" reads as it did in
// training); a variable that holds passages (a retrieval node's output, whose text is still
// theirs) gives one Passage piece per passage, each ending with its newline. This is the segment
// layout of corpus/qa_prompt.h's prompts: passages, then the question segment.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/qa_prompt.h"
#include "model/tokenizer.h"
#include "rag/workflow.h"

namespace rag::model {

enum class SegmentOrigin : uint8_t { Text, Passage };

struct PromptPiece {
  std::string text;
  SegmentOrigin origin = SegmentOrigin::Text;
  int64_t passageId = -1;  // Passage pieces
};

struct PromptSegment {
  SegmentOrigin origin = SegmentOrigin::Text;
  int64_t passageId = -1;
  int32_t begin = 0;  // token range [begin, end) in PromptTokens::tokens
  int32_t end = 0;
};

struct PromptTokens {
  std::vector<int32_t> tokens;
  std::vector<PromptSegment> segments;  // in order, covering `tokens`
  std::string text;                     // the pieces' text, concatenated
  // Each segment's first token: the block starts of a Block-Attention mask.
  std::vector<int32_t> blockStarts() const;
};

// Encodes each piece on its own (corpus text never makes a special token); empty pieces, and
// pieces that encode to nothing, give no segment.
PromptTokens tokenizePieces(const Tokenizer& tokenizer, std::span<const PromptPiece> pieces);

// The passages a retrieval node left in a variable, best first; `text` is what the prompt shows
// (corpus::formatPassage plus its newline).
struct PassageText {
  int64_t id = 0;
  std::string text;
};
// A passage as every served prompt shows it: corpus::formatPassage in the default style and its
// newline (what a retrieval node leaves in its output variable).
PassageText passageText(const Passage& passage);

using PassageVariables = std::map<std::string, std::vector<PassageText>, std::less<>>;

// The pieces of `tmpl` over `vars` (see the file comment). A variable in `passages` whose text
// in `vars` is no longer the passages' concatenation (a later node overwrote it) is plain text.
// Errors are renderTemplate's: a malformed template, a variable that is not set.
Result<std::vector<PromptPiece>> promptPieces(std::string_view tmpl, const Variables& vars,
                                              const PassageVariables& passages);

// A QA prompt in token ids: each of its segments (passages, then the question) tokenized on its
// own, so block boundaries fall on token boundaries.
struct QaTokens {
  std::vector<int32_t> tokens;       // prompt, then completion, then EOS (when the tokenizer has one)
  std::vector<int32_t> blockStarts;  // token offset of each segment; [0] = 0
  int32_t promptLength = 0;          // tokens of the prompt; the completion starts here
};
QaTokens tokenizeQaPrompt(const Tokenizer& tokenizer, const corpus::QaPrompt& prompt);

}  // namespace rag::model
