// Between safetensors (model/safetensors.h, torch-free) and torch tensors: what every model
// class (llama.h, bert.h) loads and saves through.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "model/safetensors.h"
#include "rag/status.h"

namespace rag::model {

// A safetensors view as a torch tensor of `dtype` (F32 or BF16): F16/BF16 go through the
// reader's exact F32 conversion, then to the target type.
Result<torch::Tensor> tensorFromView(const TensorView& view, torch::ScalarType dtype);

// Loads every weight slot a model's walk visits: `walk(fill)` must call fill(name, slot) for
// each slot, and every name must be in `weights` (check with checkTensors first). Stops at the
// first conversion error.
template <typename Walk>
Status loadWeightSlots(const SafetensorsWeights& weights, torch::ScalarType dtype, Walk&& walk) {
  Status failed;
  walk([&](const std::string& name, torch::Tensor& slot) {
    if (!failed.isOk()) return;
    Result<torch::Tensor> t = tensorFromView(*weights.find(name), dtype);
    if (t.isOk()) slot = std::move(*t);
    else failed = t.status();
  });
  return failed;
}

// Writes named tensors (F32 or BF16, any device, any layout) to one safetensors file,
// atomically; each keeps its own dtype.
Status saveTensors(const std::filesystem::path& file,
                   const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

}  // namespace rag::model
