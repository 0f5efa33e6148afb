// The nccl-c10d backend: LibTorch's own c10d::ProcessGroupNCCL behind the project's Communicator
// interface (builds with CUDA: #ifdef DDP_WITH_NCCL). It brings what PyTorch's DDP runs on in
// production: NCCL on the process group's internal streams with event synchronisation and
// recordStream, its watchdog thread (a collective past the timeout, or an NCCL error, aborts the
// communicators and by default tears the process down: TORCH_NCCL_ASYNC_ERROR_HANDLING), the
// flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) and its environment variables. It is the
// default GPU backend; the project's own NcclCommunicator stays selectable as `nccl`.
// The store is c10d's: under ddplaunch a c10d::TCPStore client of the launcher's store (its
// background threads open their own connections); otherwise runtime/c10d_store over the
// caller's store. Keys live under "<prefix>/" of it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <torch/arg.h>
#include <torch/types.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "ddplaunch/communicator.hpp"

namespace c10d {
class ProcessGroupNCCL;
}

namespace ddp::runtime {

class StreamOverlap;  // runtime/stream_overlap.hpp

struct C10dNcclCommunicatorOptions {
  TORCH_ARG(std::string, prefix) = "nccl-c10d";
  // ProcessGroupNCCL's timeout: joining the communicator and every collective (its watchdog).
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(5);
  // CUDA device index of this rank; -1 takes the current device.
  TORCH_ARG(int, device) = -1;
};

// Tensors: CUDA tensors on this rank's device, as ProcessGroupNCCL takes them. Blocking: as
// PyTorch's collectives (work.wait() makes the caller's current stream wait; the host does not),
// except barrier(), which returns once every rank has entered it. Errors: ProcessGroupNCCL's
// (c10::Error and its Dist* subclasses) are rethrown as CommunicatorError with their message; a
// collective's timeout and a peer's failure are found by ProcessGroupNCCL's watchdog, whose
// default is to end the process after logging the failed collective (as under torchrun).
// Thread-safety: collectives are serialised by a mutex; close() may come from another thread
// (ProcessGroupNCCL::abort ends what is in flight).
class C10dNcclCommunicator : public Communicator {
 public:
  // Creates the process group and connects it eagerly on options.device (so a missing peer fails
  // here, after options.timeout, and not in the first collective). Throws CommunicatorError on a
  // bad rank, world size or device, and with ProcessGroupNCCL's message when it cannot connect.
  C10dNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                       C10dNcclCommunicatorOptions options = {});
  ~C10dNcclCommunicator() override;
  C10dNcclCommunicator(const C10dNcclCommunicator&) = delete;
  C10dNcclCommunicator& operator=(const C10dNcclCommunicator&) = delete;

  Backend backend() const override { return Backend::NcclC10d; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int device() const { return device_; }

  void allreduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  void broadcast(const torch::Tensor& tensor, int root) override;
  torch::Tensor allgather(const torch::Tensor& input) override;
  void barrier() override;
  // ProcessGroupNCCL::shutdown() when healthy (it flushes and destroys the communicators),
  // abort() after a failure or when called during a collective. Idempotent; never throws.
  void close() override;
  // DDP's buckets on a side stream (runtime/stream_overlap.hpp): ProcessGroupNCCL's streams wait
  // for it and it for them, so backward's later kernels do not queue behind the allreduces.
  void overlapped(const std::function<void()>& body) override;
  void join_overlapped() override;

 private:
  // The process group for a collective; throws CommunicatorError once closed or failed. Under mutex_.
  c10d::ProcessGroupNCCL& group(const std::string& what);
  [[noreturn]] void fail(const std::string& what, const std::exception& e);

  int rank_;
  int world_size_;
  C10dNcclCommunicatorOptions options_;
  int device_ = -1;
  std::mutex mutex_;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> group_;  // set once by the constructor
  std::unique_ptr<StreamOverlap> overlap_;
  std::string broken_;  // why the communicator is unusable; empty while healthy (under mutex_)
  std::atomic<bool> closed_{false};
};

}  // namespace ddp::runtime
