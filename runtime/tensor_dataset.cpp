// See tensor_dataset.hpp.
#include "ddplaunch/tensor_dataset.hpp"

#include "ddplaunch/communicator.hpp"

namespace ddp::runtime {

TensorPairDataset::TensorPairDataset(torch::Tensor inputs, torch::Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  if (inputs_.dim() == 0 || targets_.dim() == 0 || inputs_.size(0) != targets_.size(0))
    throw CommunicatorError("dataset: " + std::to_string(inputs_.dim() ? inputs_.size(0) : 0) + " inputs but " +
                            std::to_string(targets_.dim() ? targets_.size(0) : 0) +
                            " targets; both need the same first dimension");
}

torch::data::Example<> TensorPairDataset::get_batch(std::vector<std::size_t> indices) {
  const torch::Tensor index =
      torch::from_blob(indices.data(), {static_cast<std::int64_t>(indices.size())}, torch::kInt64).clone();
  return {inputs_.index_select(0, index), targets_.index_select(0, index)};
}

}  // namespace ddp::runtime
