// See tensor_checks.hpp.
#include "runtime/tensor_checks.hpp"

#include <algorithm>
#include <string>

#include "ddplaunch/communicator.hpp"

namespace ddp::runtime {

void check_collective_tensor(const torch::Tensor& t, const char* what,
                             std::initializer_list<torch::ScalarType> dtypes) {
  if (!t.defined()) throw CommunicatorError(std::string(what) + ": undefined tensor");
  if (!t.is_contiguous()) throw CommunicatorError(std::string(what) + ": tensor is not contiguous; call .contiguous()");
  if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) != dtypes.end()) return;
  std::string supported;
  for (torch::ScalarType d : dtypes) supported += (supported.empty() ? "" : ", ") + std::string(c10::toString(d));
  throw CommunicatorError(std::string(what) + ": unsupported dtype " + std::string(c10::toString(t.scalar_type())) +
                          " (supported: " + supported + ")");
}

void check_gpu_collective_tensor(const torch::Tensor& t, const char* what, int device) {
  if (t.defined() && !t.device().is_cuda())
    throw CommunicatorError(std::string(what) + ": tensor is on " + t.device().str() + ", not on CUDA device " +
                            std::to_string(device) + "; move it with .to(torch::Device(torch::kCUDA, " +
                            std::to_string(device) + "))");
  if (t.defined() && t.device().index() != device)
    throw CommunicatorError(std::string(what) + ": tensor is on " + t.device().str() +
                            " but this communicator is bound to cuda:" + std::to_string(device) +
                            "; move the tensor or create the communicator with .device(" +
                            std::to_string(t.device().index()) + ")");
  check_collective_tensor(t, what,
                          {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kFloat16, torch::kInt32,
                           torch::kInt64, torch::kUInt8, torch::kInt8});
}

}  // namespace ddp::runtime
