#include "model/model_grow.h"

#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <string>
#include <string_view>

#include "core/fs.h"
#include "core/random.h"
#include "model/model_config.h"
#include "model/safetensors.h"

namespace rag::model {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kLayerPrefix = "model.layers.";

// The tensors of a new layer that write into the residual stream: zero, so the layer adds nothing.
bool writesResidual(std::string_view suffix) {
  return suffix.starts_with("self_attn.o_proj.") || suffix.starts_with("mlp.down_proj.");
}

// A tensor the grown model owns: copied from the checkpoint, or widened.
struct OwnedTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

std::vector<float> floatsOf(const OwnedTensor& t) {
  std::vector<float> v(t.bytes.size() / sizeof(float));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

OwnedTensor fromFloats(std::vector<int64_t> shape, const std::vector<float>& v) {
  OwnedTensor t{DType::F32, std::move(shape), std::vector<std::byte>(v.size() * sizeof(float))};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// Normal(0, 1) by Box-Muller from the engine's uniform draws (the same numbers on every library).
float standardNormal(Rng& rng) {
  const double u1 = 1.0 - rng.uniform01();  // (0, 1]: log is finite
  const double u2 = rng.uniform01();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

// How a matrix's new entries are filled: the weights that read the residual stream get random
// new rows (the new heads' and units' inputs, at the old matrix's own scale), the old rows' new
// columns zero; the weights that write it get zeros. The old units thus read only the old
// channels until training connects them, so what the model knew is not drowned in noise as the
// new channels fill (with random old-row columns a role run's loss rose 1.11 -> 1.47 in its first
// 200 steps at lr 3e-4).
enum class NewEntries { Random, Zero };

// [rows, cols] -> [newRows, newCols]: the old matrix in the top-left corner.
OwnedTensor grownMatrix(const OwnedTensor& t, int64_t newRows, int64_t newCols, NewEntries fill, Rng& rng) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const std::vector<float> old = floatsOf(t);
  double squares = 0;
  for (float w : old) squares += static_cast<double>(w) * w;
  const auto scale = static_cast<float>(std::sqrt(squares / static_cast<double>(std::max<size_t>(old.size(), 1))));
  std::vector<float> out(static_cast<size_t>(newRows * newCols), 0.0f);
  for (int64_t r = 0; r < newRows; ++r)
    for (int64_t c = 0; c < newCols; ++c) {
      float& w = out[static_cast<size_t>(r * newCols + c)];
      if (r < rows) w = c < cols ? old[static_cast<size_t>(r * cols + c)] : 0.0f;
      else if (fill == NewEntries::Random) w = scale * standardNormal(rng);
    }
  return fromFloats({newRows, newCols}, out);
}

// A bias [n] -> [newN], zeros after the old entries.
OwnedTensor grownBias(const OwnedTensor& t, int64_t newN) {
  std::vector<float> v = floatsOf(t);
  v.resize(static_cast<size_t>(newN), 0.0f);
  return fromFloats({newN}, v);
}

// An RMSNorm gain [h] -> [newH]: the mean of squares over newH channels of which only the old h
// are non-zero is h/newH of the old one, so the old gains shrink by sqrt(h/newH) to give the same
// output; the new channels' gains are the old ones' mean, equally scaled.
OwnedTensor grownGain(const OwnedTensor& t, int64_t newH) {
  std::vector<float> g = floatsOf(t);
  const auto h = static_cast<int64_t>(g.size());
  const auto s = static_cast<float>(std::sqrt(static_cast<double>(h) / static_cast<double>(newH)));
  double mean = 0;
  for (float x : g) mean += x;
  mean /= static_cast<double>(std::max<int64_t>(h, 1));
  for (float& x : g) x *= s;
  g.resize(static_cast<size_t>(newH), static_cast<float>(mean) * s);
  return fromFloats({newH}, g);
}

struct Widths {
  int64_t hidden, q, kv, ffn;  // q = heads * head_dim, kv = kv heads * head_dim
};

// One tensor of the checkpoint widened to `to`, by what it is.
Result<OwnedTensor> widened(const std::string& name, const OwnedTensor& t, const Widths& to, Rng& rng) {
  const std::string_view n = name;
  const auto is = [&](std::string_view suffix) { return n.ends_with(suffix); };
  if (is("layernorm.weight") || n == "model.norm.weight") return grownGain(t, to.hidden);
  if (n == "model.embed_tokens.weight" || n == "lm_head.weight")
    return grownMatrix(t, t.shape[0], to.hidden, NewEntries::Zero, rng);
  if (is("self_attn.q_proj.weight")) return grownMatrix(t, to.q, to.hidden, NewEntries::Random, rng);
  if (is("self_attn.k_proj.weight") || is("self_attn.v_proj.weight"))
    return grownMatrix(t, to.kv, to.hidden, NewEntries::Random, rng);
  if (is("self_attn.o_proj.weight")) return grownMatrix(t, to.hidden, to.q, NewEntries::Zero, rng);
  if (is("mlp.gate_proj.weight") || is("mlp.up_proj.weight"))
    return grownMatrix(t, to.ffn, to.hidden, NewEntries::Random, rng);
  if (is("mlp.down_proj.weight")) return grownMatrix(t, to.hidden, to.ffn, NewEntries::Zero, rng);
  if (is("self_attn.q_proj.bias")) return grownBias(t, to.q);
  if (is("self_attn.k_proj.bias") || is("self_attn.v_proj.bias")) return grownBias(t, to.kv);
  if (is("self_attn.o_proj.bias") || is("mlp.down_proj.bias")) return grownBias(t, to.hidden);
  if (is("mlp.gate_proj.bias") || is("mlp.up_proj.bias")) return grownBias(t, to.ffn);
  return Status::invalidArgument("tensor '" + name + "' is not one of a Llama checkpoint's; widening knows only those");
}

Status checkSizes(const LlamaConfig& c, const GrowOptions& o) {
  const auto below = [](std::string_view flag, int64_t asked, int64_t has) {
    return Status::invalidArgument("--" + std::string(flag) + " " + std::to_string(asked) + ": the model has " +
                                   std::to_string(has) + "; a grown model is at least as large");
  };
  if (o.layers < 0 || (o.layers && o.layers < c.numHiddenLayers)) return below("layers", o.layers, c.numHiddenLayers);
  if (o.layers > 256) return Status::invalidArgument("--layers " + std::to_string(o.layers) + ": at most 256");
  if (o.hidden < 0 || (o.hidden && o.hidden < c.hiddenSize)) return below("hidden", o.hidden, c.hiddenSize);
  if (o.intermediate < 0 || (o.intermediate && o.intermediate < c.intermediateSize))
    return below("ffn", o.intermediate, c.intermediateSize);
  if (o.heads < 0 || (o.heads && o.heads < c.numAttentionHeads)) return below("heads", o.heads, c.numAttentionHeads);
  if (o.kvHeads < 0 || (o.kvHeads && o.kvHeads < c.numKeyValueHeads)) return below("kv-heads", o.kvHeads, c.numKeyValueHeads);
  return Status::ok();
}

}  // namespace

Result<GrownModel> growLlama(const GrowOptions& o) {
  RAG_ASSIGN_OR_RETURN(LlamaConfig c, loadLlamaConfig(o.modelDir));
  if (c.architecture != ModelArchitecture::Llama)
    return Status::invalidArgument(o.modelDir.string() + ": architecture " + c.architectureName +
                                   " is not LlamaForCausalLM; growing is for Llama checkpoints");
  RAG_RETURN_IF_ERROR(checkSizes(c, o));
  const int64_t oldLayers = c.numHiddenLayers;
  const int64_t layers = o.layers ? o.layers : oldLayers;
  const int64_t group = c.numAttentionHeads / c.numKeyValueHeads;
  const int64_t heads = o.heads ? o.heads : c.numAttentionHeads;
  const int64_t kvHeads = o.kvHeads ? o.kvHeads : heads / group;
  if (heads % kvHeads != 0 || heads / kvHeads != group)
    return Status::invalidArgument("--heads " + std::to_string(heads) + " with --kv-heads " + std::to_string(kvHeads) +
                                   ": the model has " + std::to_string(group) +
                                   " heads per key/value head, and a grown model keeps that (each old head keeps its keys)");
  const Widths from{c.hiddenSize, c.numAttentionHeads * c.headDim, c.numKeyValueHeads * c.headDim, c.intermediateSize};
  const Widths to{o.hidden ? o.hidden : c.hiddenSize, heads * c.headDim, kvHeads * c.headDim,
                  o.intermediate ? o.intermediate : c.intermediateSize};
  const bool wider = to.hidden != from.hidden || to.q != from.q || to.ffn != from.ffn;
  if (layers == oldLayers && !wider)
    return Status::invalidArgument("nothing to grow: give --layers, --hidden, --ffn or --heads above the model's (" +
                                   std::to_string(oldLayers) + " layers, hidden " + std::to_string(from.hidden) +
                                   ", ffn " + std::to_string(from.ffn) + ", " + std::to_string(c.numAttentionHeads) +
                                   " heads)");
  std::error_code ec;
  if (fs::exists(o.out, ec) && fs::equivalent(o.out, o.modelDir, ec))
    return Status::invalidArgument("--out is the model's own directory; give a new one");
  if (fs::exists(o.out, ec) && !fs::is_empty(o.out, ec))
    return Status::invalidArgument(o.out.string() + " exists and is not empty; give a new directory for the grown model");
  RAG_ASSIGN_OR_RETURN(SafetensorsWeights weights, SafetensorsWeights::open(o.modelDir));
  RAG_RETURN_IF_ERROR(checkTensors(weights, expectedLlamaTensors(c)));

  GrownModel g;
  g.oldLayers = oldLayers;
  g.layers = layers;
  const std::vector<std::string> names = weights.names();
  std::map<std::string, OwnedTensor> tensors;
  for (const std::string& name : names) {
    const TensorView& t = *weights.find(name);
    g.oldParameters += t.numel();
    const auto* p = t.data;
    tensors[name] = OwnedTensor{t.dtype, t.shape, std::vector<std::byte>(p, p + t.nbytes)};
  }
  if (wider) {
    Rng rng(deriveSeed(o.seed, 0x9e0a));
    for (const std::string& name : names) {  // the checkpoint's order: the draws depend on it alone
      OwnedTensor& t = tensors[name];
      if (t.dtype != DType::F32)
        return Status::invalidArgument(o.modelDir.string() + ": tensor '" + name + "' is " +
                                       std::string(dtypeName(t.dtype)) + "; widening reads F32 weights");
      RAG_ASSIGN_OR_RETURN(t, widened(name, t, to, rng));
    }
  }

  // Where each layer of the grown model comes from: old layer k, then its share of the new ones
  // (copies of k with zeroed outputs), spread evenly.
  struct Source {
    int64_t layer;
    bool added;
  };
  std::vector<Source> plan;
  const int64_t extra = layers - oldLayers;
  for (int64_t k = 0; k < oldLayers; ++k) {
    plan.push_back({k, false});
    const int64_t share = (k + 1) * extra / oldLayers - k * extra / oldLayers;
    for (int64_t i = 0; i < share; ++i) {
      g.newLayerIndexes.push_back(static_cast<int64_t>(plan.size()));
      plan.push_back({k, true});
    }
  }

  std::vector<TensorToWrite> out;
  std::vector<std::vector<std::byte>> zeros;  // storage for the zeroed tensors
  zeros.reserve(plan.size() * 4);
  auto add = [&](std::string name, const OwnedTensor& t, bool zero) {
    std::span<const std::byte> data(t.bytes);
    if (zero) data = zeros.emplace_back(t.bytes.size(), std::byte{0});
    out.push_back({std::move(name), t.dtype, t.shape, data});
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    g.parameters += n;
  };
  for (const std::string& name : names)
    if (!name.starts_with(kLayerPrefix)) add(name, tensors[name], false);
  for (size_t at = 0; at < plan.size(); ++at) {
    const std::string src = std::string(kLayerPrefix) + std::to_string(plan[at].layer) + ".";
    const std::string dst = std::string(kLayerPrefix) + std::to_string(at) + ".";
    for (const std::string& name : names) {
      if (!name.starts_with(src)) continue;
      const std::string_view suffix = std::string_view(name).substr(src.size());
      add(dst + std::string(suffix), tensors[name], plan[at].added && writesResidual(suffix));
    }
  }

  c.numHiddenLayers = layers;
  // eps is added to the mean of squares, which is now h/newH of the old one: scaled alike, every
  // norm gives exactly the old output.
  c.rmsNormEps *= static_cast<double>(from.hidden) / static_cast<double>(to.hidden);
  c.hiddenSize = to.hidden;
  c.intermediateSize = to.ffn;
  c.numAttentionHeads = heads;
  c.numKeyValueHeads = kvHeads;
  RAG_ASSIGN_OR_RETURN(fs::path staging, stageDirectory(o.out));
  RAG_RETURN_IF_ERROR(writeFileAtomic(staging / "config.json", llamaConfigJson(c)));
  RAG_RETURN_IF_ERROR(writeSafetensors(staging / "model.safetensors", out));
  if (fs::exists(o.modelDir / "tokenizer.json")) {
    fs::copy_file(o.modelDir / "tokenizer.json", staging / "tokenizer.json", ec);
    if (ec) return Status::ioError("copying tokenizer.json to " + staging.string() + ": " + ec.message());
  }
  RAG_RETURN_IF_ERROR(commitStagedDirectory(staging, o.out));
  return g;
}

}  // namespace rag::model
