// Which model a generation command runs: --model DIR (any Hugging Face Llama-family
// checkpoint: config.json + safetensors, tokenizer.json next to them), else the default model
// shipped in datasets/models/rag-llama-roles-wide (rag::defaultModelDirectory()). --dtype f32|bf16. Benchmarks may fall back to a randomly
// initialised model of a fixed shape when no trained one exists (speed does not depend on
// the weights' values); commands that answer questions may not. --device cpu|cuda|cuda:N picks
// where generation runs (sched/step_device.h), checked here before anything loads.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "args.h"
#include "model/runner.h"
#include "model/tokenizer.h"

namespace rag::cli {

struct ModelChoice {
  std::filesystem::path dir;  // empty: synthetic
  std::string dtype = "f32";
  std::string device = "cpu";
  model::StepBackendFactory backend{};  // for RunnerParams::backend: empty on the CPU
};

struct LoadedModel {
  std::shared_ptr<const model::LlamaModel> model;
  std::shared_ptr<const model::Tokenizer> tokenizer;  // null when the directory has none
  std::string description;
};

// The shipped default model directory (may not exist yet).
std::filesystem::path defaultModelDir();

Result<ModelChoice> readModelChoice(Args& args, bool allowSynthetic);
Result<LoadedModel> loadChosenModel(const ModelChoice& choice);

}  // namespace rag::cli
