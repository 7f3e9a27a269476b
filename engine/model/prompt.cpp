#include "model/prompt.h"

namespace rag::model {

PassageText passageText(const Passage& passage) {
  return {passage.id, corpus::formatPassage(passage, corpus::PassageStyle{}) + "\n"};
}


std::vector<int32_t> PromptTokens::blockStarts() const {
  std::vector<int32_t> starts;
  for (const PromptSegment& s : segments) starts.push_back(s.begin);
  return starts;
}

PromptTokens tokenizePieces(const Tokenizer& tokenizer, std::span<const PromptPiece> pieces) {
  const EncodeOptions plain{.parseSpecial = false};
  PromptTokens p;
  for (const PromptPiece& piece : pieces) {
    p.text += piece.text;
    if (piece.text.empty()) continue;
    std::vector<int32_t> ids = tokenizer.encode(piece.text, plain);
    if (ids.empty()) continue;
    const auto begin = static_cast<int32_t>(p.tokens.size());
    p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
    p.segments.push_back({piece.origin, piece.passageId, begin, static_cast<int32_t>(p.tokens.size())});
  }
  return p;
}

Result<std::vector<PromptPiece>> promptPieces(std::string_view tmpl, const Variables& vars,
                                              const PassageVariables& passages) {
  RAG_ASSIGN_OR_RETURN(std::vector<TemplatePiece> parts, parseTemplate(tmpl));
  std::vector<PromptPiece> out;
  std::string text;  // the Text piece being gathered
  auto flush = [&] {
    if (!text.empty()) out.push_back({std::move(text), SegmentOrigin::Text, -1});
    text.clear();
  };
  for (const TemplatePiece& part : parts) {
    if (!part.isVariable) {
      text += part.text;
      continue;
    }
    auto value = vars.find(part.text);
    if (value == vars.end()) return renderTemplate(tmpl, vars).status();  // its message names what is set
    auto list = passages.find(part.text);
    std::string joined;
    if (list != passages.end())
      for (const PassageText& pt : list->second) joined += pt.text;
    if (list == passages.end() || list->second.empty() || joined != value->second) {
      text += value->second;
      continue;
    }
    flush();
    for (const PassageText& pt : list->second) out.push_back({pt.text, SegmentOrigin::Passage, pt.id});
  }
  flush();
  return out;
}

QaTokens tokenizeQaPrompt(const Tokenizer& tokenizer, const corpus::QaPrompt& prompt) {
  std::vector<PromptPiece> pieces;
  for (size_t i = 0; i < prompt.segmentCount(); ++i) {
    const bool passage = i < prompt.passageIds.size();
    pieces.push_back({std::string(prompt.segment(i)), passage ? SegmentOrigin::Passage : SegmentOrigin::Text,
                      passage ? prompt.passageIds[i] : -1});
  }
  PromptTokens p = tokenizePieces(tokenizer, pieces);
  QaTokens t;
  t.tokens = std::move(p.tokens);
  t.blockStarts = p.blockStarts();
  if (t.blockStarts.empty()) t.blockStarts.push_back(0);
  t.promptLength = static_cast<int32_t>(t.tokens.size());
  std::vector<int32_t> completion = tokenizer.encode(prompt.completion, {.parseSpecial = false});
  t.tokens.insert(t.tokens.end(), completion.begin(), completion.end());
  if (auto eos = tokenizer.eosId()) t.tokens.push_back(*eos);
  return t;
}

}  // namespace rag::model
