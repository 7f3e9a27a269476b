// Text -> vector, for dense retrieval: a BERT encoder (model/bert.h) and its tokenizer loaded
// from one Hugging Face directory, batched, with a fingerprint that names exactly which weights
// made a vector (the index refuses vectors of another embedder). The vector is the unit pooled
// embedding, followed, when the model has a lexical branch, by the text's bag of words
// (model/lexical_words.h: inner products are then cosine plus a BM25-like score).
//
//   RAG_ASSIGN_OR_RETURN(auto e, TextEmbedder::load("datasets/models/rag-embedder"));
//   RAG_ASSIGN_OR_RETURN(std::vector<float> v, e->embed(texts));   // texts.size() x e->dim()
//
// F32 encoders with the exact GELU run on the CPU kernels of decode_kernels.h on the calling
// thread (one matmul per projection over every token of a batch, no padding: `index build`
// embedded about 260 passages/s on one core here, against 130 with libtorch's ops in BF16 on
// two), or on a device after useBackend (model/encoder_backend.h); other dtypes and
// activations run on libtorch ops, whose threads setComputeThreads sets.
// This header is torch-free (pimpl): the index and the CLI compile without libtorch. embed() may
// run on several threads at once (its buffers are per call; the tokenizer's cache takes a lock):
// the serving engine's embedding thread and its knowledge-graph linking do; a `team` is one
// caller's at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/encoder_backend.h"
#include "rag/status.h"

namespace rag {
class ForkJoin;  // core/fork_join.h
}

namespace rag::model {

struct BertConfig;

// Writes a randomly initialised encoder of `config` (seeded) as a Hugging Face directory, for
// tests and tools that need an embedder without training one; the directory still needs a
// tokenizer.json to load as a TextEmbedder.
Status saveRandomEmbedder(const BertConfig& config, uint64_t seed, const std::filesystem::path& dir);

struct LexicalStatistics;  // model/lexical_words.h

// Writes the embedder in `from` (an HF directory with its tokenizer.json) to `to` with a new
// lexical branch (BertModel::withLexical: `dim` components, weight `lambda`, for a collection of
// `stats`), its tokenizer files copied beside it; the directory is written whole or not at all
// (core/fs.h's stageDirectory). InvalidArgument when `from` has a branch already or `to` exists;
// the load errors of `from` (NotFound for a missing tokenizer.json).
Status saveEmbedderWithLexical(const std::filesystem::path& from, const std::filesystem::path& to,
                               const LexicalStatistics& stats, int64_t dim, double lambda);

class TextEmbedder {
public:
  // dir holds config.json (a BERT architecture), model.safetensors and tokenizer.json. dtype
  // "f32" or "bf16". Texts are cut to maxTokens tokens (at most the model's positions). device
  // "cpu" or "cuda" (Unavailable when libtorch has no CUDA device: Debian's is CPU-only).
  static Result<std::unique_ptr<TextEmbedder>> load(const std::filesystem::path& dir,
                                                    std::string_view dtype = "f32",
                                                    int64_t maxTokens = 128,
                                                    std::string_view device = "cpu");
  ~TextEmbedder();

  // Components of a vector: the hidden size, plus lexical_dim with a lexical branch.
  int64_t dim() const;
  // The unit pooled part's components (the first of each vector): the hidden size.
  int64_t pooledDim() const;
  int64_t maxTokens() const;
  // "bert-<16 hex digits>": FNV-1a over config.json, model.safetensors and tokenizer.json, so
  // any change of weights or tokenizer changes it and a copy of the same files keeps it.
  const std::string& fingerprint() const;

  // One vector per text, row-major [texts.size() x dim()], in the order given: unit, or a unit
  // part and a bag of words with a lexical branch (whose words are all the text's, beyond the
  // encoder's maxTokens). Batches of
  // `batch` texts of similar length (sorted internally), so padding costs little; the result
  // does not depend on the batching. With a `team`, the F32 CPU kernels split each product's
  // output tiles, each text's attention and the row-wise ops over it: the same vectors, bit for
  // bit, in a fraction of the time (without one the encoder runs on the calling thread alone).
  // InvalidArgument naming the first empty text.
  Result<std::vector<float>> embed(std::span<const std::string> texts, int64_t batch = 32,
                                   ForkJoin* team = nullptr) const;

  // Runs the encoder on a backend made by `factory` from now on (a GPU: kernels/bert_encoder.h)
  // instead of the CPU kernels: the same vectors to float rounding, `team` unused; calls of
  // embed() on several threads take turns on it. Batches of fewer than `minTexts` texts stay on
  // the CPU kernels (a device call costs its launches and a synchronisation whatever its size,
  // so one or two queries may be cheaper on a team of cores). InvalidArgument for an encoder
  // that does not run on the CPU kernels (BF16, another activation) or minTexts < 1; the
  // factory's errors (Unavailable without a device). Call before the embedder is shared.
  Status useBackend(const EncoderBackendFactory& factory, int64_t minTexts = 1);
  // "cpu", or the backend's description.
  std::string device() const;

  struct Impl;

private:
  explicit TextEmbedder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

// Whether the embedder can run on CUDA: a GPU and a CUDA-enabled libtorch (checked at run time,
// so a CPU-only build works anywhere).
bool cudaAvailable();

}  // namespace rag::model
