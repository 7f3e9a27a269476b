// `ragraph model gguf`: a Llama checkpoint as a GGUF file, for llama.cpp to run the same weights.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "core/json_writer.h"
#include "model/gguf.h"

namespace rag::cli {

int cmdModelGguf(Args& args) {
  model::GgufExportOptions o;
  auto modelDir = args.get("model");
  auto out = args.get("out");
  o.tokenizer = args.getOr("tokenizer", "");
  o.name = args.getOr("name", "");
  const bool json = args.flag("json");
  if (Status s = args.finish(); !s) return fail(s);
  if (!modelDir || !out)
    return fail(Status::invalidArgument("--model DIR and --out FILE.gguf are required (e.g. --model datasets/models/rag-llama --out rag-llama.gguf)"));
  o.modelDir = *modelDir;
  o.out = *out;
  Result<model::GgufExport> r = model::exportLlamaGguf(o);
  if (!r) return fail(r.status());
  if (json) {
    JsonWriter w(std::cout, true);
    w.beginObject();
    w.key("out").value(o.out.string());
    w.key("tensors").value(r->tensors);
    w.key("bytes").value(r->bytes);
    w.key("vocab_tokens").value(r->vocabTokens);
    w.key("padded_tokens").value(r->paddedTokens);
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("wrote %s: %lld tensors (F32), %.1f MB, %lld tokens from the tokenizer", o.out.c_str(),
                static_cast<long long>(r->tensors), static_cast<double>(r->bytes) / 1e6,
                static_cast<long long>(r->vocabTokens));
    if (r->paddedTokens > 0) std::printf(" + %lld padding tokens", static_cast<long long>(r->paddedTokens));
    std::printf("\n");
  }
  return 0;
}

}  // namespace rag::cli
