// See progress_communicator.hpp.
#include "runtime/progress_communicator.hpp"

namespace ddp::runtime {
namespace {

std::uint64_t bytes_of(const torch::Tensor& t) {
  return static_cast<std::uint64_t>(t.numel()) * static_cast<std::uint64_t>(t.element_size());
}

}  // namespace

ProgressCommunicator::ProgressCommunicator(std::shared_ptr<Communicator> inner, ProgressWriter writer)
    : inner_(std::move(inner)), writer_(std::move(writer)) {}

void ProgressCommunicator::allreduce(const torch::Tensor& tensor, ReduceOp op) {
  writer_.enter(CollectiveKind::Allreduce, bytes_of(tensor));
  inner_->allreduce(tensor, op);
  writer_.leave();
}

void ProgressCommunicator::broadcast(const torch::Tensor& tensor, int root) {
  writer_.enter(CollectiveKind::Broadcast, bytes_of(tensor));
  inner_->broadcast(tensor, root);
  writer_.leave();
}

torch::Tensor ProgressCommunicator::allgather(const torch::Tensor& input) {
  writer_.enter(CollectiveKind::Allgather, bytes_of(input));
  torch::Tensor out = inner_->allgather(input);
  writer_.leave();
  return out;
}

void ProgressCommunicator::barrier() {
  writer_.enter(CollectiveKind::Barrier, 0);
  inner_->barrier();
  writer_.leave();
}

}  // namespace ddp::runtime
