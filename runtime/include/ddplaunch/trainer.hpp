// A small training loop for classification in the spirit of a Runner: epochs over each rank's
// shard (LibTorch's DistributedRandomSampler, reshuffled every epoch with set_epoch), the batch
// size meaning per rank (per GPU), progress logged on rank 0 (step, loss averaged over ranks,
// samples/s), a checkpoint written by rank 0 after every epoch and resumed on every rank, and
// optional bfloat16 autocast.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include "ddplaunch/process_group.hpp"

namespace ddp::runtime {

struct TrainerOptions {
  TORCH_ARG(int, epochs) = 1;
  // Samples per step on each rank: the global batch is batch_size × world size.
  TORCH_ARG(std::int64_t, batch_size) = 32;
  // Log every this many steps on rank 0 (0: only epoch summaries).
  TORCH_ARG(std::int64_t, log_every) = 50;
  // Where rank 0 writes checkpoint.pt after each epoch and where every rank resumes from; ""
  // turns checkpoints off. Multi-node jobs need a directory every node sees.
  TORCH_ARG(std::string, checkpoint_dir) = "";
  // Run forward and loss under CPU/CUDA autocast to bfloat16 (weights and gradients stay fp32).
  TORCH_ARG(bool, bf16_autocast) = false;
  // Added to the epoch number for the sampler's shuffle, so runs with different seeds see
  // different orders; every rank must use the same seed.
  TORCH_ARG(std::uint64_t, seed) = 0;
  // Where rank 0's progress lines go; default stdout.
  TORCH_ARG(std::function<void(const std::string&)>, log) = nullptr;
  // Called on every rank after each optimizer step with the global step number (fault
  // injection, custom schedules).
  TORCH_ARG(std::function<void(std::int64_t step)>, on_step) = nullptr;
};

struct EvalResult {
  double loss = 0;      // mean over every sample of every rank's shard
  double accuracy = 0;  // fraction of samples whose argmax matches the target
  std::int64_t samples = 0;
};

// Not thread-safe. Every method runs collectives: all ranks call them in the same order.
// Throws what the communicator throws (a dead peer is named), torch's errors for bad shapes, and
// c10::Error when a checkpoint cannot be written or read.
class Trainer {
 public:
  using Forward = std::function<torch::Tensor(const torch::Tensor& input)>;
  using Loss = std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)>;

  // `module` is what the checkpoint saves (the model inside DDP); `forward` runs a batch through
  // the DDP wrapper; `loss` defaults to cross entropy.
  Trainer(torch::nn::Module& module, Forward forward, torch::optim::Optimizer& optimizer, ProcessGroup& group,
          TrainerOptions options = {}, Loss loss = nullptr);

  // Loads "<checkpoint_dir>/checkpoint.pt" if it exists (model, optimizer, epochs done) and
  // returns the number of epochs it had finished (0 without a checkpoint).
  int resume();
  // Trains from the resumed epoch to options.epochs on this rank's shard of the data.
  void fit(const torch::Tensor& inputs, const torch::Tensor& targets);
  // Loss and accuracy over the whole (inputs, targets), each rank taking its own shard (shards
  // may differ by one sample). `forward` must run no collectives: pass the model's own forward,
  // not the DDP wrapper's (whose buffer broadcast would pair up unevenly).
  EvalResult evaluate(const Forward& forward, const torch::Tensor& inputs, const torch::Tensor& targets);

  int epochs_done() const { return epochs_done_; }
  std::int64_t step() const { return step_; }

 private:
  void save_checkpoint();
  void log(const std::string& line) const;
  // Sum over ranks, on the group's device.
  torch::Tensor all_sum(const torch::Tensor& values);

  torch::nn::Module& module_;
  Forward forward_;
  torch::optim::Optimizer& optimizer_;
  ProcessGroup& group_;
  TrainerOptions options_;
  Loss loss_;
  int epochs_done_ = 0;
  std::int64_t step_ = 0;
};

}  // namespace ddp::runtime
