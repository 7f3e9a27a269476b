// GGUF (llama.cpp's model file) export of a Llama checkpoint, so the same weights can be run by
// llama.cpp side by side with this engine (`ragraph model gguf`, the decode comparison of
// issue 27). Torch-free: it reads config.json, the safetensors and tokenizer.json directly.
//
//   RAG_ASSIGN_OR_RETURN(GgufExport r, exportLlamaGguf({.modelDir = "datasets/models/rag-llama",
//                                                         .out = "/tmp/rag-llama.gguf"}));
//
// What is written (GGUF version 3, every tensor F32, 32-byte alignment):
// - llama.* hyper-parameters (context, embedding and feed-forward lengths, block count, head
//   counts, head dim, RoPE base, RMSNorm eps) and general.architecture "llama";
// - the byte-level BPE of tokenizer.json as tokenizer.ggml.model "gpt2" with pre-tokenizer
//   "gpt-2" (tokens, merges in rank order, token types: added special tokens CONTROL), BOS/EOS;
//   a vocabulary smaller than the model's is padded with "[PAD<id>]" tokens of type UNUSED, as
//   llama.cpp's own converter does;
// - llama.cpp's tensor names (token_embd, blk.N.attn_q, ..., output_norm, output unless tied),
//   each [out, in] matrix as GGUF dims {in, out}. attn_q and attn_k rows are permuted from HF's
//   rotate-half RoPE order to GGML's interleaved one (per head, row t * d/2 + i goes to
//   2 * i + t), which is what makes the two programs compute the same function.
//
// The file is written beside its target and renamed over it: an error or a kill leaves any old
// file whole. Errors name the problem: a non-Llama architecture, biases, rope_scaling (GGUF has
// them, this exporter does not write them), a tokenizer that is not byte-level BPE, a missing or
// misshapen tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "rag/status.h"

namespace rag::model {

// ("= {}": designated initializers may leave the optional ones out without -Wmissing-field-initializers.)
struct GgufExportOptions {
  std::filesystem::path modelDir = {};   // config.json + model.safetensors (or an index)
  std::filesystem::path tokenizer = {};  // empty: <modelDir>/tokenizer.json
  std::filesystem::path out = {};        // the .gguf file
  std::string name = {};                 // general.name; empty: the model directory's name
};

struct GgufExport {
  int64_t tensors = 0;
  int64_t bytes = 0;           // the file's size
  int64_t vocabTokens = 0;     // tokens from tokenizer.json
  int64_t paddedTokens = 0;    // "[PAD<id>]" tokens added up to the model's vocab_size
};

Result<GgufExport> exportLlamaGguf(const GgufExportOptions& options);

// HF rotate-half rows of one q or k projection ([heads * d, in], row-major) reordered for GGML's
// interleaved RoPE, in place: within each head, row t * d/2 + i moves to 2 * i + t.
void permuteRopeRows(float* rows, int64_t heads, int64_t headDim, int64_t in);

}  // namespace rag::model
