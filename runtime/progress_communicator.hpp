// A Communicator that records each collective in the worker's progress slot
// (common/collective_progress.hpp) around the communicator that runs it: entered before, completed
// after it returns. For NCCL, "completed" means enqueued on the stream (its collectives return
// then); a collective that throws stays "entered". Thread-safety: as the wrapped communicator
// (which serialises collectives), except that two threads must not run collectives at once —
// the runtime's reducer and trainer never do.
#pragma once

#include <memory>

#include "common/collective_progress.hpp"
#include "ddplaunch/communicator.hpp"

namespace ddp::runtime {

class ProgressCommunicator : public Communicator {
 public:
  ProgressCommunicator(std::shared_ptr<Communicator> inner, ProgressWriter writer);

  Backend backend() const override { return inner_->backend(); }
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  void allreduce(const torch::Tensor& tensor, ReduceOp op) override;
  void broadcast(const torch::Tensor& tensor, int root) override;
  torch::Tensor allgather(const torch::Tensor& input) override;
  void barrier() override;
  void close() override { inner_->close(); }
  void overlapped(const std::function<void()>& body) override { inner_->overlapped(body); }
  void join_overlapped() override { inner_->join_overlapped(); }

 private:
  std::shared_ptr<Communicator> inner_;
  ProgressWriter writer_;
};

}  // namespace ddp::runtime
