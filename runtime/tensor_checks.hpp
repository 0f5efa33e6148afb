// The argument checks every communicator makes on a collective's tensor, in one place: defined,
// contiguous, of a dtype the backend reduces. Device checks stay with each backend.
#pragma once

#include <initializer_list>

#include <torch/types.h>

namespace ddp::runtime {

// Throws CommunicatorError("<what>: ...") naming the problem and the fix. Pure; thread-safe.
void check_collective_tensor(const torch::Tensor& t, const char* what, std::initializer_list<torch::ScalarType> dtypes);

}  // namespace ddp::runtime
