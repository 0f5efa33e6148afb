// Which gradients share a bucket: PyTorch's compute_bucket_assignment_by_size. Parameters are
// taken in reverse registration order (roughly the order backward produces their gradients),
// grouped by dtype and device; a bucket closes once it reaches its cap, the first bucket of each
// group at the smaller first cap so that the first allreduce starts early in backward.
#pragma once

#include <cstddef>
#include <vector>

#include <torch/types.h>

namespace ddp::runtime {

// Returns buckets as lists of indices into `params`, in the order their allreduces run. Every
// index appears exactly once. Pure; does not throw for defined tensors.
std::vector<std::vector<std::size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                                   std::size_t first_cap_bytes, std::size_t cap_bytes);

}  // namespace ddp::runtime
