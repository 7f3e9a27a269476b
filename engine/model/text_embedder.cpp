#include "model/text_embedder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <numeric>

#include "core/fork_join.h"
#include "core/fs.h"
#include "model/bert.h"
#include "model/decode_kernels.h"
#include "model/lexical_words.h"
#include "model/tokenizer.h"

namespace rag::model {

namespace {

// An F32 encoder on the CPU as decode_kernels.h runs it: each layer's projections transposed to
// [in, out], q/k/v stacked into one matrix (the model keeps its [out, in] tensors).
struct KernelLayer {
  torch::Tensor qkvT, qkvBias, attnOutT, interT, outT;  // [H, 3H], [3H], [H, H], [H, I], [I, H]
};

const float* f32(const torch::Tensor& t) { return t.data_ptr<float>(); }

}  // namespace

struct TextEmbedder::Impl {
  BertModel model;
  Tokenizer tokenizer;
  int64_t maxTokens = 128;
  std::string fingerprint;
  torch::Device device = torch::kCPU;
  // F32 on the CPU with the exact GELU: the encoder runs on the kernels (one matmul per
  // projection over every token of the batch, attention per text, no padding), several times
  // faster than libtorch's ops on the few tokens of a query; empty: libtorch.
  std::vector<KernelLayer> kernels;
  // The encoder on a device (useBackend), which embed() calls take turns on; null: the CPU.
  struct Offload {
    std::unique_ptr<EncoderBackend> backend;
    int64_t minTexts = 1;  // smaller batches run on the CPU kernels
    std::mutex mutex;
  };
  std::unique_ptr<Offload> offload;
  // Appends text t's bag of words after its pooled part (out: hidden floats of it, then the
  // branch's lexical_dim), when the model has a lexical branch.
  void appendLexical(const Words& words, float* out) const;
  // The embeddings of the texts `ids` (tokens, each non-empty; `words` their words when the model
  // has a lexical branch) into out [ids.size(), config.embeddingDim()]; the loops split over
  // `team` when one is given.
  void embedWithKernels(std::span<const std::vector<int32_t>* const> ids, std::span<const Words> words, float* out,
                        ForkJoin* team) const;
};

void TextEmbedder::Impl::embedWithKernels(std::span<const std::vector<int32_t>* const> ids,
                                           std::span<const Words> words, float* out, ForkJoin* team) const {
  const BertConfig& c = model.config();
  const BertWeights& w = model.weights();
  const int64_t hid = c.hiddenSize, nh = c.numAttentionHeads, d = hid / nh, inter = c.intermediateSize;
  const float eps = static_cast<float>(c.layerNormEps);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const int64_t texts = std::ssize(ids);
  std::vector<int64_t> firstRow(static_cast<size_t>(texts) + 1, 0);  // text t: rows [firstRow[t], firstRow[t + 1])
  int64_t longest = 0;
  for (int64_t t = 0; t < texts; ++t) {
    firstRow[static_cast<size_t>(t) + 1] = firstRow[static_cast<size_t>(t)] + std::ssize(*ids[static_cast<size_t>(t)]);
    longest = std::max<int64_t>(longest, std::ssize(*ids[static_cast<size_t>(t)]));
  }
  const int64_t rows = firstRow.back();
  // [0, n) of `work` units each, in parts over the team when there is enough work (every element
  // computed by the same code whoever runs it, so the vectors do not depend on the team), else on
  // this thread. The threshold is the runner's for its products.
  auto split = [&](int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn) {
    if (team) parallelRange(*team, n, work, 1 << 16, fn);
    else fn(0, n);
  };
  std::vector<float> x(static_cast<size_t>(rows * hid)), qkv(static_cast<size_t>(rows * 3 * hid)),
      att(static_cast<size_t>(rows * hid)), mid(static_cast<size_t>(rows * inter));
  const float *word = f32(w.word), *position = f32(w.position), *tokenType = f32(w.tokenType);
  split(texts, longest * hid, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const std::vector<int32_t>& tok = *ids[static_cast<size_t>(t)];
      for (size_t j = 0; j < tok.size(); ++j) {
        const int64_t r = firstRow[static_cast<size_t>(t)] + static_cast<int64_t>(j);
        for (int64_t i = 0; i < hid; ++i)
          x[static_cast<size_t>(r * hid + i)] = word[tok[j] * hid + i] + position[static_cast<int64_t>(j) * hid + i] + tokenType[i];
      }
    }
  });
  auto layerNorm = [&](const torch::Tensor& g, const torch::Tensor& b) {
    split(rows, 4 * hid, [&](int64_t r0, int64_t r1) {
      cpu::layerNorm(x.data() + r0 * hid, f32(g), f32(b), r1 - r0, hid, eps, x.data() + r0 * hid);
    });
  };
  layerNorm(w.embedNorm, w.embedNormBias);
  // y[:, 0 .. outW) over every row, in units of one 64-output tile by one block of 16 rows (the
  // last block also takes the rows past the last multiple of 16, so no block is a 1-3 row tail
  // that cpu::linear would run on its streaming path): the same units whatever the team, so the
  // vectors do not depend on it, and enough of them to busy a team when a product has few tiles
  // (a 256-wide output is 4 tiles: 4 threads of 8 when tiles alone were split).
  auto linear = [&](const float* in, int64_t inW, const torch::Tensor& wt, const torch::Tensor& bias, int64_t outW,
                    float* y, bool accumulate) {
    constexpr int64_t tile = 64, block = 16;
    const int64_t tiles = (outW + tile - 1) / tile, blocks = std::max<int64_t>(1, rows / block);
    split(tiles * blocks, block * inW * tile, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t t = u % tiles, b = u / tiles;
        const int64_t r0 = b * block, r1 = b + 1 == blocks ? rows : r0 + block;
        cpu::linear(in + r0 * inW, r1 - r0, inW, f32(wt), outW, f32(bias), t * tile, std::min(outW, (t + 1) * tile),
                    y + r0 * outW, outW, accumulate);
      }
    });
  };
  const std::vector<int32_t> oneBlock = {0};  // a text's K/V as one block of its length
  for (size_t l = 0; l < kernels.size(); ++l) {
    const BertLayerWeights& lw = w.layers[l];
    const KernelLayer& kl = kernels[l];
    linear(x.data(), hid, kl.qkvT, kl.qkvBias, 3 * hid, qkv.data(), false);
    split(texts, longest * longest * hid, [&](int64_t t0, int64_t t1) {
      thread_local std::vector<float> k, v, scratch;  // one set per thread of the team
      k.resize(static_cast<size_t>(longest * hid));
      v.resize(static_cast<size_t>(longest * hid));
      scratch.resize(static_cast<size_t>(cpu::attendPrefillScratch(longest, longest, d)));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t first = firstRow[static_cast<size_t>(t)], n = firstRow[static_cast<size_t>(t) + 1] - first;
        for (int64_t j = 0; j < n; ++j) {
          const float* row = qkv.data() + (first + j) * 3 * hid;
          std::copy(row + hid, row + 2 * hid, k.begin() + j * hid);
          std::copy(row + 2 * hid, row + 3 * hid, v.begin() + j * hid);
        }
        const cpu::PagedKv kv{k.data(), v.data(), oneBlock.data(), n, nh, d};
        cpu::attendBidirectional(qkv.data() + first * 3 * hid, 3 * hid, n, nh, kv, scale, scratch.data(),
                                 att.data() + first * hid, hid);
      }
    });
    linear(att.data(), hid, kl.attnOutT, lw.attnOutBias, hid, x.data(), true);
    layerNorm(lw.attnNorm, lw.attnNormBias);
    linear(x.data(), hid, kl.interT, lw.interBias, inter, mid.data(), false);
    split(rows, 8 * inter, [&](int64_t r0, int64_t r1) {
      cpu::gelu(mid.data() + r0 * inter, (r1 - r0) * inter, mid.data() + r0 * inter);
    });
    linear(mid.data(), inter, kl.outT, lw.outBias, hid, x.data(), true);
    layerNorm(lw.outNorm, lw.outNormBias);
  }
  // Mean over each text's tokens, then L2-normalised, then the lexical branch's bag (as
  // BertModel::embed).
  const int64_t stride = c.embeddingDim();
  for (int64_t t = 0; t < texts; ++t) {
    const int64_t first = firstRow[static_cast<size_t>(t)], n = firstRow[static_cast<size_t>(t) + 1] - first;
    float* o = out + t * stride;
    std::fill(o, o + hid, 0.0f);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < hid; ++i) o[i] += x[static_cast<size_t>((first + j) * hid + i)];
    double norm = 0;
    for (int64_t i = 0; i < hid; ++i) norm += static_cast<double>(o[i] / n) * (o[i] / n);
    const float inv = 1.0f / static_cast<float>(n * std::max(std::sqrt(norm), 1e-12));
    for (int64_t i = 0; i < hid; ++i) o[i] *= inv;
    if (c.lexicalBuckets > 0) appendLexical(words[static_cast<size_t>(t)], o);
  }
}

void TextEmbedder::Impl::appendLexical(const Words& words, float* out) const {
  const BertConfig& c = model.config();
  if (c.lexicalBuckets <= 0) return;
  const std::span<const float> weights(f32(model.weights().lexicalWeight), static_cast<size_t>(c.lexicalBuckets));
  lexicalBag(words, weights, c.lexicalAvgWords, c.lexicalDim, out + c.hiddenSize);
}

namespace {

Result<std::string> fingerprintOf(const std::filesystem::path& dir) {
  RAG_ASSIGN_OR_RETURN(uint64_t h, hashFiles(dir, {"config.json", "model.safetensors", "tokenizer.json"}));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("bert-") + hex;
}

BertModel onDevice(const BertModel& m, torch::Device device) {
  BertWeights w = m.weights();
  for (torch::Tensor* t : {&w.word, &w.position, &w.tokenType, &w.embedNorm, &w.embedNormBias, &w.lexicalWeight})
    if (t->defined()) *t = t->to(device);
  for (BertLayerWeights& l : w.layers)
    for (torch::Tensor* t : {&l.q, &l.qBias, &l.k, &l.kBias, &l.v, &l.vBias, &l.attnOut, &l.attnOutBias, &l.attnNorm,
                             &l.attnNormBias, &l.inter, &l.interBias, &l.out, &l.outBias, &l.outNorm, &l.outNormBias})
      *t = t->to(device);
  return BertModel(m.config(), std::move(w));
}

}  // namespace

TextEmbedder::TextEmbedder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
TextEmbedder::~TextEmbedder() = default;

Result<std::unique_ptr<TextEmbedder>> TextEmbedder::load(const std::filesystem::path& dir,
                                                         std::string_view dtype, int64_t maxTokens,
                                                         std::string_view device) {
  if (dtype != "f32" && dtype != "bf16")
    return Status::invalidArgument("embedder dtype must be f32 or bf16 (got '" + std::string(dtype) + "')");
  if (device != "cpu" && device != "cuda")
    return Status::invalidArgument("embedder device must be cpu or cuda (got '" + std::string(device) + "')");
  if (device == "cuda" && !torch::cuda::is_available())
    return Status::unavailable("the embedder was asked to run on CUDA but libtorch reports no CUDA device "
                               "(Debian's libtorch is CPU-only; configure with Torch_DIR of a CUDA libtorch)");
  if (maxTokens < 1) return Status::invalidArgument("the embedder's token limit must be at least 1");
  try {
    RAG_ASSIGN_OR_RETURN(BertModel model,
                         BertModel::load(dir, dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32));
    RAG_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(dir / "tokenizer.json"));
    if (tokenizer.vocabSize() > model.config().vocabSize)
      return Status::invalidArgument("the tokenizer in " + dir.string() + " has " +
                                     std::to_string(tokenizer.vocabSize()) + " tokens but the model " +
                                     std::to_string(model.config().vocabSize) +
                                     "; put the tokenizer the embedder was trained with next to it");
    RAG_ASSIGN_OR_RETURN(std::string fp, fingerprintOf(dir));
    const torch::Device dev = device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
    if (dev.is_cuda()) model = onDevice(model, dev);
    auto impl = std::make_unique<Impl>(Impl{std::move(model), std::move(tokenizer), 0, std::move(fp), dev, {}, {}});
    if (dev.is_cpu() && dtype == "f32" && impl->model.config().hiddenAct == "gelu") {
      auto transposed = [](const torch::Tensor& t) { return t.t().contiguous(); };
      for (const BertLayerWeights& l : impl->model.weights().layers)
        impl->kernels.push_back({transposed(torch::cat({l.q, l.k, l.v}, 0)), torch::cat({l.qBias, l.kBias, l.vBias}).contiguous(),
                                 transposed(l.attnOut), transposed(l.inter), transposed(l.out)});
    }
    impl->maxTokens = std::min(maxTokens, impl->model.config().maxPositionEmbeddings);
    return std::unique_ptr<TextEmbedder>(new TextEmbedder(std::move(impl)));
  } catch (const c10::Error& e) {
    return Status::internal(std::string("libtorch failed loading the embedder: ") + e.what_without_backtrace());
  }
}

bool cudaAvailable() { return torch::cuda::is_available(); }

int64_t TextEmbedder::dim() const { return m_impl->model.config().embeddingDim(); }
int64_t TextEmbedder::pooledDim() const { return m_impl->model.config().hiddenSize; }
int64_t TextEmbedder::maxTokens() const { return m_impl->maxTokens; }
const std::string& TextEmbedder::fingerprint() const { return m_impl->fingerprint; }

Status TextEmbedder::useBackend(const EncoderBackendFactory& factory, int64_t minTexts) {
  if (minTexts < 1) return Status::invalidArgument("the smallest batch for the device must be at least 1 text");
  if (m_impl->kernels.empty())
    return Status::invalidArgument("this embedder runs on libtorch ops (" +
                                      std::string(m_impl->device.is_cuda() ? "on CUDA" : "not F32 with the exact GELU") +
                                      "); a device backend runs F32 encoders with the exact GELU: load it with dtype f32");
  const BertConfig& c = m_impl->model.config();
  const BertWeights& w = m_impl->model.weights();
  const EncoderShape shape{.vocab = c.vocabSize,
                           .positions = c.maxPositionEmbeddings,
                           .hidden = c.hiddenSize,
                           .heads = c.numAttentionHeads,
                           .intermediate = c.intermediateSize,
                           .layerNormEps = static_cast<float>(c.layerNormEps)};
  EncoderWeights ew{.word = f32(w.word),
                    .position = f32(w.position),
                    .tokenType = f32(w.tokenType),
                    .embedNorm = f32(w.embedNorm),
                    .embedNormBias = f32(w.embedNormBias),
                    .layers = {}};
  for (size_t l = 0; l < m_impl->kernels.size(); ++l) {
    const KernelLayer& k = m_impl->kernels[l];
    const BertLayerWeights& lw = w.layers[l];
    ew.layers.push_back({.qkvT = f32(k.qkvT),
                         .qkvBias = f32(k.qkvBias),
                         .attnOutT = f32(k.attnOutT),
                         .attnOutBias = f32(lw.attnOutBias),
                         .attnNorm = f32(lw.attnNorm),
                         .attnNormBias = f32(lw.attnNormBias),
                         .interT = f32(k.interT),
                         .interBias = f32(lw.interBias),
                         .outT = f32(k.outT),
                         .outBias = f32(lw.outBias),
                         .outNorm = f32(lw.outNorm),
                         .outNormBias = f32(lw.outNormBias)});
  }
  RAG_ASSIGN_OR_RETURN(std::unique_ptr<EncoderBackend> backend, factory(shape, ew));
  auto offload = std::make_unique<Impl::Offload>();
  offload->backend = std::move(backend);
  offload->minTexts = minTexts;
  m_impl->offload = std::move(offload);
  return Status::ok();
}

std::string TextEmbedder::device() const {
  if (const Impl::Offload* o = m_impl->offload.get())
    return o->backend->description() +
           (o->minTexts > 1 ? ", batches of " + std::to_string(o->minTexts) + "+ texts (smaller on the cpu)" : "");
  return m_impl->device.is_cuda() ? "cuda (libtorch)" : "cpu";
}

Result<std::vector<float>> TextEmbedder::embed(std::span<const std::string> texts, int64_t batch,
                                               ForkJoin* team) const {
  if (batch < 1) return Status::invalidArgument("the embedding batch must be at least 1");
  const EncodeOptions plain{.parseSpecial = false};
  std::vector<std::vector<int32_t>> ids(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    ids[i] = m_impl->tokenizer.encode(texts[i], plain);
    if (ids[i].empty())
      return Status::invalidArgument("text " + std::to_string(i) + " is empty; an embedder needs "
                                     "at least one token");
    if (static_cast<int64_t>(ids[i].size()) > m_impl->maxTokens) ids[i].resize(static_cast<size_t>(m_impl->maxTokens));
  }
  // The lexical branch reads every word of a text: the encoder's window cuts only its tokens.
  std::vector<Words> words(m_impl->model.config().lexicalBuckets > 0 ? texts.size() : 0);
  for (size_t i = 0; i < words.size(); ++i) words[i] = textWords(texts[i]);
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  const int64_t d = dim();
  std::vector<float> out(texts.size() * static_cast<size_t>(d));
  try {
    torch::NoGradGuard noGrad;
    for (size_t first = 0; first < order.size(); first += static_cast<size_t>(batch)) {
      const size_t n = std::min(order.size() - first, static_cast<size_t>(batch));
      // The batch's vectors, row r for text order[first + r], go back to the caller's order.
      auto scatter = [&](const float* src) {
        for (size_t r = 0; r < n; ++r)
          std::copy(src + r * static_cast<size_t>(d), src + (r + 1) * static_cast<size_t>(d),
                    out.begin() + static_cast<std::ptrdiff_t>(order[first + r] * static_cast<size_t>(d)));
      };
      std::vector<Words> batchWords;
      for (size_t r = 0; r < n && !words.empty(); ++r) batchWords.push_back(std::move(words[order[first + r]]));
      if (!m_impl->kernels.empty()) {
        std::vector<const std::vector<int32_t>*> batchIds;
        for (size_t r = 0; r < n; ++r) batchIds.push_back(&ids[order[first + r]]);
        std::vector<float> vecs(n * static_cast<size_t>(d));
        Impl::Offload* device = m_impl->offload.get();
        if (device && static_cast<int64_t>(n) >= device->minTexts) {
          {
            std::lock_guard lock(device->mutex);
            RAG_RETURN_IF_ERROR(device->backend->encode(batchIds, vecs.data(), d));
          }
          for (size_t r = 0; r < batchWords.size(); ++r) m_impl->appendLexical(batchWords[r], vecs.data() + r * static_cast<size_t>(d));
        } else {
          m_impl->embedWithKernels(batchIds, batchWords, vecs.data(), team);
        }
        scatter(vecs.data());
        continue;
      }
      size_t len = 0;
      for (size_t r = 0; r < n; ++r) len = std::max(len, ids[order[first + r]].size());
      std::vector<int64_t> tok(n * len, m_impl->model.config().padTokenId);
      std::vector<uint8_t> valid(n * len, 0);
      for (size_t r = 0; r < n; ++r) {
        const std::vector<int32_t>& t = ids[order[first + r]];
        for (size_t j = 0; j < t.size(); ++j) {
          tok[r * len + j] = t[j];
          valid[r * len + j] = 1;
        }
      }
      const auto rows = static_cast<int64_t>(n), cols = static_cast<int64_t>(len);
      torch::Tensor e = m_impl->model
                            .embed(torch::from_blob(tok.data(), {rows, cols}, torch::kLong).to(m_impl->device),
                                   torch::from_blob(valid.data(), {rows, cols}, torch::kUInt8)
                                       .to(m_impl->device, torch::kBool),
                                   batchWords)
                            .to(torch::kCPU)
                            .contiguous();
      scatter(e.data_ptr<float>());
    }
  } catch (const c10::Error& e) {
    return Status::internal(std::string("libtorch failed embedding: ") + e.what_without_backtrace());
  }
  return out;
}

Status saveEmbedderWithLexical(const std::filesystem::path& from, const std::filesystem::path& to,
                               const LexicalStatistics& stats, int64_t dim, double lambda) {
  std::error_code ec;
  if (std::filesystem::exists(to, ec))
    return Status::invalidArgument(to.string() + " exists; give --out a new directory (nothing is overwritten)");
  try {
    RAG_ASSIGN_OR_RETURN(BertModel model, BertModel::load(from, torch::kFloat32));
    RAG_ASSIGN_OR_RETURN(BertModel lexical, model.withLexical(stats, dim, lambda));
    RAG_ASSIGN_OR_RETURN(std::filesystem::path staging, stageDirectory(to));
    Status written = lexical.save(staging);
    if (written) written = copyTokenizerFiles(from, staging);
    if (!written) {
      std::filesystem::remove_all(staging, ec);  // nothing half-written is left beside `to`
      return written;
    }
    return commitStagedDirectory(staging, to);
  } catch (const c10::Error& e) {
    return Status::internal(std::string("libtorch failed adding the lexical branch: ") + e.what_without_backtrace());
  }
}

Status saveRandomEmbedder(const BertConfig& config, uint64_t seed, const std::filesystem::path& dir) {
  RAG_ASSIGN_OR_RETURN(BertModel bert, BertModel::initRandom(config, seed));
  return bert.save(dir);
}

}  // namespace rag::model
