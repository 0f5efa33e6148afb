// The collective interface the runtime's process group and DistributedDataParallel talk to, with
// two implementations: CpuCommunicator (ours, TCP ring between ranks, CPU tensors) and
// NcclCommunicator (NCCL, CUDA tensors, only in builds with CUDA). The errors every
// implementation throws live here too.
#pragma once

#include <functional>

#include <string>

#include <torch/types.h>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::runtime {

// A peer rank closed or reset its connection (it exited, crashed or closed its communicator).
class PeerError : public ddp::rendezvous::ConnectionError {
 public:
  PeerError(int rank, const std::string& what) : ConnectionError(what), rank_(rank) {}
  int rank() const { return rank_; }

 private:
  int rank_;
};

// Bad use of a communicator (a tensor on the wrong device, not contiguous, of an unsupported
// dtype, or whose dtype/size differs from a peer's; a root out of range) or use after close() or
// after a failed collective.
class CommunicatorError : public ddp::Error {
 public:
  using Error::Error;
};

enum class ReduceOp { Sum, Average, Min, Max };
const char* to_string(ReduceOp op);

// Cpu: CpuCommunicator. Nccl: the project's NcclCommunicator. NcclC10d: LibTorch's
// ProcessGroupNCCL (C10dNcclCommunicator), the default on GPUs.
enum class Backend { Cpu, Nccl, NcclC10d };
const char* to_string(Backend backend);

// Collectives over a fixed group of ranks. Every rank must call the same collectives in the same
// order with tensors of the same dtype and element count.
//
// Blocking: CPU implementations return when the collective is complete on this rank. The NCCL
// implementation returns once the collective is enqueued on LibTorch's current CUDA stream of the
// tensor's device (stream semantics, like PyTorch's); barrier() waits for completion.
// Failure: a timeout throws rendezvous::TimeoutError, a peer that went away PeerError naming its
// rank; after either the communicator is unusable (CommunicatorError).
// Thread-safety: implementations serialise collectives internally; close() may be called from
// another thread to abort a collective in flight.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual Backend backend() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Reduces `tensor` in place across ranks; every rank ends with the result. Average divides
  // the sum by world_size (truncating for integer dtypes).
  virtual void allreduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Sum) = 0;
  // Copies `root`'s `tensor` into every other rank's `tensor`.
  virtual void broadcast(const torch::Tensor& tensor, int root) = 0;
  // Returns a new tensor of shape [world_size, *input.shape()] whose row i is rank i's input.
  virtual torch::Tensor allgather(const torch::Tensor& input) = 0;
  // Returns once every rank has entered barrier().
  virtual void barrier() = 0;
  // Releases the connections; peers in a collective fail. Idempotent.
  virtual void close() = 0;

  // Overlap of communication with the caller's GPU work (DistributedDataParallel's buckets during
  // backward). overlapped(body) runs body, whose collectives and GPU work then do not hold up the
  // caller's current stream: a GPU communicator runs it with its own stream as the current one,
  // ordered after what the caller's stream has queued so far; join_overlapped() makes the
  // caller's current stream wait for everything run so. body's results may be read on the
  // caller's stream only after join_overlapped(). CPU communicators (whose collectives complete
  // on return) run body as it is, and join_overlapped() does nothing. Same thread as the
  // collectives; body's exceptions propagate.
  virtual void overlapped(const std::function<void()>& body) { body(); }
  virtual void join_overlapped() {}
};

}  // namespace ddp::runtime
