// Communication hooks: how DistributedDataParallel reduces one bucket of gradients. The default
// averages with an allreduce; the compression hooks send bf16/fp16 instead of fp32 (half the
// bytes, like PyTorch's ddp_comm_hooks.default_hooks); users plug in their own (quantisation,
// local SGD, logging) through the same signature.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "ddplaunch/communicator.hpp"

namespace ddp::runtime {

// One bucket of gradients, flattened into one contiguous tensor in the bucket's parameter order.
class GradBucket {
 public:
  GradBucket(std::size_t index, bool is_last, torch::Tensor buffer, std::vector<torch::Tensor> parameters)
      : index_(index), is_last_(is_last), buffer_(std::move(buffer)), parameters_(std::move(parameters)) {}

  std::size_t index() const { return index_; }
  // The last bucket of the step (buckets are reduced in index order).
  bool is_last() const { return is_last_; }
  // This rank's flattened gradients; the hook leaves the reduced (averaged) result here.
  const torch::Tensor& buffer() const { return buffer_; }
  // The parameters whose gradients the buffer holds, in buffer order.
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }

 private:
  std::size_t index_;
  bool is_last_;
  torch::Tensor buffer_;
  std::vector<torch::Tensor> parameters_;
};

// Runs once per bucket per synchronised step, in bucket order, on DDP's communication thread
// (CPU backend) or in the backward pass with the communicator's own CUDA stream as the current
// one (NCCL backend: the hook's casts, collectives and copies are ordered on that stream and
// overlap backward; DDP joins the streams before it reads the buckets).
// It must run the same collectives on every rank and return with bucket.buffer() reduced. It may
// throw; DDP rethrows the error from backward().
using CommHook = std::function<void(Communicator& comm, GradBucket& bucket)>;

// The default: allreduce with ReduceOp::Average.
CommHook allreduce_hook();
// Casts the buffer to bfloat16, divides by the world size, allreduces (sum) in bfloat16 and
// writes the result back in the buffer's dtype. Same as PyTorch's bf16_compress_hook.
CommHook bf16_compress_hook();
// The same with float16 (PyTorch's fp16_compress_hook).
CommHook fp16_compress_hook();

}  // namespace ddp::runtime
