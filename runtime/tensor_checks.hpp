// The argument checks every communicator makes on a collective's tensor, in one place: defined,
// contiguous, of a dtype the backend reduces. Device checks stay with each backend.
#pragma once

#include <initializer_list>

#include <torch/types.h>

namespace ddp::runtime {

// Throws CommunicatorError("<what>: ...") naming the problem and the fix. Pure; thread-safe.
void check_collective_tensor(const torch::Tensor& t, const char* what, std::initializer_list<torch::ScalarType> dtypes);

// The GPU communicators' checks (nccl and nccl-c10d): a tensor on CUDA device `device`, of a dtype
// NCCL reduces (float32, float64, bfloat16, float16, int32, int64, uint8, int8). An undefined
// tensor fails as in check_collective_tensor. Throws CommunicatorError. Pure; thread-safe.
void check_gpu_collective_tensor(const torch::Tensor& t, const char* what, int device);

}  // namespace ddp::runtime
