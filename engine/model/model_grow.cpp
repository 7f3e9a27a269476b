#include "model/model_grow.h"

#include <string>
#include <string_view>

#include "core/fs.h"
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

}  // namespace

Result<GrownModel> growLlamaDepth(const GrowOptions& o) {
  RAG_ASSIGN_OR_RETURN(LlamaConfig c, loadLlamaConfig(o.modelDir));
  if (c.architecture != ModelArchitecture::Llama)
    return Status::invalidArgument(o.modelDir.string() + ": architecture " + c.architectureName +
                                   " is not LlamaForCausalLM; growing is for Llama checkpoints");
  const int64_t oldLayers = c.numHiddenLayers;
  if (o.layers <= oldLayers || o.layers > 256)
    return Status::invalidArgument("--layers " + std::to_string(o.layers) + ": the model has " + std::to_string(oldLayers) +
                                   " layers; give a depth above that (at most 256)");
  std::error_code ec;
  if (fs::exists(o.out, ec) && fs::equivalent(o.out, o.modelDir, ec))
    return Status::invalidArgument("--out is the model's own directory; give a new one");
  if (fs::exists(o.out, ec) && !fs::is_empty(o.out, ec))
    return Status::invalidArgument(o.out.string() + " exists and is not empty; give a new directory for the grown model");
  RAG_ASSIGN_OR_RETURN(SafetensorsWeights weights, SafetensorsWeights::open(o.modelDir));
  RAG_RETURN_IF_ERROR(checkTensors(weights, expectedLlamaTensors(c)));

  // Where each layer of the grown model comes from: old layer k, then its share of the new ones
  // (copies of k with zeroed outputs), spread evenly.
  struct Source {
    int64_t layer;
    bool added;
  };
  std::vector<Source> plan;
  GrownModel g{.oldLayers = oldLayers, .layers = o.layers};
  const int64_t extra = o.layers - oldLayers;
  for (int64_t k = 0; k < oldLayers; ++k) {
    plan.push_back({k, false});
    const int64_t share = (k + 1) * extra / oldLayers - k * extra / oldLayers;
    for (int64_t i = 0; i < share; ++i) {
      g.newLayerIndexes.push_back(static_cast<int64_t>(plan.size()));
      plan.push_back({k, true});
    }
  }

  std::vector<std::string> names = weights.names();
  std::vector<TensorToWrite> out;
  std::vector<std::vector<std::byte>> zeros;  // storage for the zeroed tensors
  zeros.reserve(plan.size() * 4);
  auto add = [&](std::string name, const TensorView& t, bool zero) {
    std::span<const std::byte> data(t.data, t.nbytes);
    if (zero) data = zeros.emplace_back(t.nbytes, std::byte{0});
    out.push_back({std::move(name), t.dtype, t.shape, data});
    g.parameters += t.numel();
  };
  for (const std::string& name : names)
    if (!name.starts_with(kLayerPrefix)) add(name, *weights.find(name), false);
  for (size_t at = 0; at < plan.size(); ++at) {
    const std::string from = std::string(kLayerPrefix) + std::to_string(plan[at].layer) + ".";
    const std::string to = std::string(kLayerPrefix) + std::to_string(at) + ".";
    for (const std::string& name : names) {
      if (!name.starts_with(from)) continue;
      const std::string_view suffix = std::string_view(name).substr(from.size());
      add(to + std::string(suffix), *weights.find(name), plan[at].added && writesResidual(suffix));
    }
  }

  c.numHiddenLayers = o.layers;
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
