#include "model_choice.h"

#include "rag/engine.h"
#include "sched/step_device.h"

#include "core/fs.h"

namespace rag::cli {

namespace {
// The benchmark's stand-in when no trained model exists: a 28M-parameter Llama shape, big
// enough that a decode step reads tens of megabytes of weights.
model::LlamaConfig syntheticConfig() {
  model::LlamaConfig c;
  c.architectureName = "LlamaForCausalLM";
  c.hiddenSize = 512;
  c.intermediateSize = 1408;
  c.numHiddenLayers = 8;
  c.numAttentionHeads = 8;
  c.numKeyValueHeads = 4;
  c.headDim = 64;
  c.maxPositionEmbeddings = 2048;
  c.vocabSize = 8192;
  c.tieWordEmbeddings = true;
  return c;
}
}  // namespace

std::filesystem::path defaultModelDir() { return defaultModelDirectory(); }

Result<ModelChoice> readModelChoice(Args& args, bool allowSynthetic) {
  ModelChoice c;
  c.dtype = args.getOr("dtype", "f32");
  if (c.dtype != "f32" && c.dtype != "bf16")
    return Status::invalidArgument("--dtype must be f32 or bf16, not '" + c.dtype + "'");
  c.device = args.getOr("device", "cpu");
  RAG_ASSIGN_OR_RETURN(c.backend, stepBackendFor(c.device));
  if (c.backend && c.dtype != "f32")
    return Status::invalidArgument("--device " + c.device + " runs F32 models; drop --dtype " + c.dtype);
  const bool synthetic = allowSynthetic && args.flag("synthetic");
  if (auto m = args.get("model")) {
    if (synthetic) return Status::invalidArgument("--model and --synthetic exclude each other: pick one model");
    c.dir = *m;
    return c;
  }
  if (synthetic) return c;
  std::filesystem::path def = defaultModelDir();
  std::error_code ec;
  if (!def.empty() && std::filesystem::exists(def / "config.json", ec)) {
    c.dir = def;
    return c;
  }
  if (allowSynthetic) return c;
  return Status::notFound("no model given and none shipped at " +
                          (def.empty() ? std::string("datasets/models/rag-llama-roles-wide") : def.string()) +
                          "; pass --model DIR (a Hugging Face Llama-family checkpoint) or train one with "
                          "`ragraph train lm`");
}

Result<LoadedModel> loadChosenModel(const ModelChoice& choice) {
  LoadedModel out;
  if (choice.dir.empty()) {
    RAG_ASSIGN_OR_RETURN(out.model, model::randomModel(syntheticConfig(), 1, choice.dtype));
    out.description = "random-init Llama 8x512 (no trained model found; speed does not depend on weights)";
    return out;
  }
  RAG_ASSIGN_OR_RETURN(out.model, model::loadModel(choice.dir, choice.dtype));
  std::error_code ec;
  if (std::filesystem::exists(choice.dir / "tokenizer.json", ec)) {
    RAG_ASSIGN_OR_RETURN(model::Tokenizer tok, model::Tokenizer::load(choice.dir));
    out.tokenizer = std::make_shared<const model::Tokenizer>(std::move(tok));
  }
  out.description = choice.dir.string();
  return out;
}

}  // namespace rag::cli
