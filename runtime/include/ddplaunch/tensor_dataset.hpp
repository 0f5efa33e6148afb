// An in-memory (inputs, targets) dataset for LibTorch's data loaders. A BatchDataset: a batch is
// one index_select per tensor, not one tensor per sample stacked afterwards.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/types.h>

namespace ddp::runtime {

class TensorPairDataset
    : public torch::data::datasets::BatchDataset<TensorPairDataset, torch::data::Example<>, std::vector<std::size_t>> {
 public:
  // `inputs` and `targets` share their first dimension; throws CommunicatorError otherwise.
  TensorPairDataset(torch::Tensor inputs, torch::Tensor targets);

  torch::data::Example<> get_batch(std::vector<std::size_t> indices) override;
  std::optional<std::size_t> size() const override { return static_cast<std::size_t>(inputs_.size(0)); }

  const torch::Tensor& inputs() const { return inputs_; }
  const torch::Tensor& targets() const { return targets_; }

 private:
  torch::Tensor inputs_;
  torch::Tensor targets_;
};

}  // namespace ddp::runtime
