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

}  // namespace ddp::runtime
