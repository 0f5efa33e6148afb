// The built-in communication hooks (see comm_hooks.hpp).
#include "ddplaunch/comm_hooks.hpp"

namespace ddp::runtime {
namespace {

CommHook compress_hook(torch::ScalarType wire) {
  return [wire](Communicator& comm, GradBucket& bucket) {
    const torch::Tensor& buffer = bucket.buffer();
    // Dividing before the reduction, as PyTorch does, keeps the half-precision sum in range.
    torch::Tensor compressed = buffer.to(wire).div_(comm.world_size());
    comm.allreduce(compressed, ReduceOp::Sum);
    buffer.copy_(compressed);
  };
}

}  // namespace

CommHook allreduce_hook() {
  return [](Communicator& comm, GradBucket& bucket) { comm.allreduce(bucket.buffer(), ReduceOp::Average); };
}

CommHook bf16_compress_hook() {
  return compress_hook(torch::kBFloat16);
}

CommHook fp16_compress_hook() {
  return compress_hook(torch::kFloat16);
}

}  // namespace ddp::runtime
