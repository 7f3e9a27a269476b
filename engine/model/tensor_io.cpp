#include "model/tensor_io.h"

namespace rag::model {

Result<torch::Tensor> tensorFromView(const TensorView& view, torch::ScalarType dtype) {
  RAG_ASSIGN_OR_RETURN(std::vector<float> f32, toF32(view));
  torch::Tensor t = torch::from_blob(f32.data(), view.shape, torch::kFloat32).clone();
  return dtype == torch::kFloat32 ? t : t.to(dtype);
}

Status saveTensors(const std::filesystem::path& file,
                   const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::vector<torch::Tensor> keep;  // contiguous CPU copies the writer reads from
  std::vector<TensorToWrite> out;
  keep.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    const torch::ScalarType type = t.scalar_type();
    if (type != torch::kFloat32 && type != torch::kBFloat16)
      return Status::invalidArgument("tensor " + name + " is neither F32 nor BF16; convert it first");
    torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    keep.push_back(c);
    out.push_back({name, type == torch::kBFloat16 ? DType::BF16 : DType::F32, c.sizes().vec(),
                   std::span<const std::byte>(static_cast<const std::byte*>(c.data_ptr()),
                                              static_cast<size_t>(c.nbytes()))});
  }
  return writeSafetensors(file, out);
}

}  // namespace rag::model
