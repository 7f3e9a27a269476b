#include "model/text_embedder.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/fs.h"
#include "model/bert.h"
#include "model/tokenizer.h"

namespace rag::model {

struct TextEmbedder::Impl {
  BertModel model;
  Tokenizer tokenizer;
  int64_t maxTokens = 128;
  std::string fingerprint;
  torch::Device device = torch::kCPU;
};

namespace {

Result<std::string> fingerprintOf(const std::filesystem::path& dir) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"}) {
    RAG_ASSIGN_OR_RETURN(std::string bytes, readFile(dir / name));
    for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("bert-") + hex;
}

BertModel onDevice(const BertModel& m, torch::Device device) {
  BertWeights w = m.weights();
  for (torch::Tensor* t : {&w.word, &w.position, &w.tokenType, &w.embedNorm, &w.embedNormBias}) *t = t->to(device);
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
    auto impl = std::make_unique<Impl>(Impl{std::move(model), std::move(tokenizer), 0, std::move(fp), dev});
    impl->maxTokens = std::min(maxTokens, impl->model.config().maxPositionEmbeddings);
    return std::unique_ptr<TextEmbedder>(new TextEmbedder(std::move(impl)));
  } catch (const c10::Error& e) {
    return Status::internal(std::string("libtorch failed loading the embedder: ") + e.what_without_backtrace());
  }
}

bool cudaAvailable() { return torch::cuda::is_available(); }

int64_t TextEmbedder::dim() const { return m_impl->model.config().hiddenSize; }
int64_t TextEmbedder::maxTokens() const { return m_impl->maxTokens; }
const std::string& TextEmbedder::fingerprint() const { return m_impl->fingerprint; }

Result<std::vector<float>> TextEmbedder::embed(std::span<const std::string> texts, int64_t batch) const {
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
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() < ids[b].size(); });
  const int64_t d = dim();
  std::vector<float> out(texts.size() * static_cast<size_t>(d));
  try {
    torch::NoGradGuard noGrad;
    for (size_t first = 0; first < order.size(); first += static_cast<size_t>(batch)) {
      const size_t n = std::min(order.size() - first, static_cast<size_t>(batch));
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
                                       .to(m_impl->device, torch::kBool))
                            .to(torch::kCPU)
                            .contiguous();
      const float* src = e.data_ptr<float>();
      for (size_t r = 0; r < n; ++r)
        std::copy(src + r * static_cast<size_t>(d), src + (r + 1) * static_cast<size_t>(d),
                  out.begin() + static_cast<std::ptrdiff_t>(order[first + r] * static_cast<size_t>(d)));
    }
  } catch (const c10::Error& e) {
    return Status::internal(std::string("libtorch failed embedding: ") + e.what_without_backtrace());
  }
  return out;
}

Status saveRandomEmbedder(const BertConfig& config, uint64_t seed, const std::filesystem::path& dir) {
  RAG_ASSIGN_OR_RETURN(BertModel bert, BertModel::initRandom(config, seed));
  return bert.save(dir);
}

}  // namespace rag::model
