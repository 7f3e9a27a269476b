// tokenizer.json loading (engine/model/tokenizer.h): the input is a tokenizer.json, optionally
// followed by a NUL byte and a tokenizer_config.json. Loading either fails with an error or
// gives a tokenizer whose encode() yields ids below vocabSize() that decode() accepts.
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "model/tokenizer.h"

namespace {

// Plain words, digits, punctuation, whitespace runs, multi-byte UTF-8, an invalid byte and the
// spellings of common added tokens.
constexpr std::string_view kSample =
    "The quick fox, 2024 Hello!!  \t\n  x <|bos|>[CLS] caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
    "\xf0\x9f\x99\x82 \xff [SEP]<|eot_id|> unaffable ##ing";

void checkRoundTrip(const rag::model::Tokenizer& tok, std::string_view text,
                    const rag::model::EncodeOptions& options) {
  std::vector<int32_t> ids = tok.encode(text, options);
  for (int32_t id : ids) RAG_FUZZ_CHECK(id >= 0 && id < tok.vocabSize());
  for (bool skip : {false, true}) {
    rag::Result<std::string> back = tok.decode(ids, {.skipSpecial = skip});
    (void)back;  // an id without a spelling is an error, never a crash
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [json, config] = rag::fuzz::splitAtNul(rag::fuzz::asText(data, size));
  rag::Result<rag::model::Tokenizer> tok = rag::model::Tokenizer::fromJson(json, "fuzz/tokenizer.json", config);
  if (!tok) {
    RAG_FUZZ_CHECK(!tok.status().message().empty());
    return 0;
  }
  checkRoundTrip(*tok, kSample, {});
  checkRoundTrip(*tok, kSample, {.addBos = true, .addEos = true, .addClsSep = true, .parseSpecial = false});
  checkRoundTrip(*tok, json.substr(0, 64), {});
  for (int32_t id : {0, 1, tok->vocabSize() - 1, tok->vocabSize()}) {
    if (std::optional<std::string> text = tok->tokenText(id))
      RAG_FUZZ_CHECK(id >= 0 && id < tok->vocabSize());
    (void)tok->isSpecial(id);
  }
  (void)tok->preTokenize(kSample);
  return 0;
}
