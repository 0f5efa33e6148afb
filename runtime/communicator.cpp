// Names of the communicator enums, for messages and logs.
#include "ddplaunch/communicator.hpp"

namespace ddp::runtime {

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Average:
      return "average";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
  }
  return "unknown";
}

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::Cpu:
      return "cpu";
    case Backend::Nccl:
      return "nccl";
    case Backend::NcclC10d:
      return "nccl-c10d";
  }
  return "unknown";
}

}  // namespace ddp::runtime
