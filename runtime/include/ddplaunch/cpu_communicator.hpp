// The CPU communicator: collectives over direct TCP connections between ranks, for CPU tensors.
// Ranks find each other through the rendezvous store and form a ring (each rank connects to
// rank+1 and accepts rank-1); allreduce is a chunked, pipelined ring (reduce-scatter then
// allgather in one pass, so a chunk is forwarded as soon as it is reduced), broadcast a pipelined
// chain from the root, allgather a ring pass. Bandwidth per rank is 2(N-1)/N of the tensor for
// allreduce, as in Gloo's ring.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <torch/arg.h>
#include <torch/types.h>

#include "ddplaunch/communicator.hpp"
#include "rendezvous/store.hpp"

namespace ddp::runtime {

struct CpuCommunicatorOptions {
  // Store keys live under "<prefix>/": "<prefix>/addr/<rank>" and "<prefix>/failed".
  TORCH_ARG(std::string, prefix) = "ddp_cpu";
  // Bound on connecting at construction and on each collective.
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(5);
  // Address to listen on: an IPv4/IPv6 literal; "" listens on every IPv4 address.
  TORCH_ARG(std::string, bind_host) = "";
  // Address published for peers; "" guesses (first non-loopback IPv4 of the host name, else
  // 127.0.0.1).
  TORCH_ARG(std::string, advertise_host) = "";
};

// Tensors: contiguous CPU tensors of float32, float64, bfloat16, float16, int32 or int64, with the
// same dtype and number of elements on every rank. Each collective first sends a 32-byte header
// (collective, dtype, element count, op or root, sequence number) to rank+1, which compares it
// with its own: a rank that disagrees fails with CommunicatorError naming both ranks' calls, and
// the others then see PeerError. Average divides the sum by world_size (truncating for integers).
//
// Blocking: every collective blocks until done on this rank; it throws rendezvous::TimeoutError
// after options.timeout naming the rank it waited for, and PeerError naming the rank whose
// connection went away. On either, the communicator records the failure in the store
// ("<prefix>/failed", first failure wins), closes its connections so that the failure reaches
// every rank quickly, and is unusable afterwards (CommunicatorError); the message carries the
// first failure recorded anywhere, so every rank names the rank that died.
//
// Thread-safety: collectives are serialised by a mutex (one at a time); close() may be called from
// another thread but then collectives in flight fail with PeerError/CommunicatorError.
class CpuCommunicator : public Communicator {
 public:
  // Listens on an ephemeral port, publishes "<prefix>/addr/<rank>" = host:port, connects to
  // rank+1 and accepts rank-1. Blocks until the ring is connected; throws TimeoutError after
  // options.timeout, BindError if it cannot listen, CommunicatorError on a bad rank/world_size
  // or a stray connection. The store must outlive the communicator.
  CpuCommunicator(std::shared_ptr<ddp::rendezvous::Store> store, int rank, int world_size,
                  CpuCommunicatorOptions options = {});
  ~CpuCommunicator() override;
  CpuCommunicator(const CpuCommunicator&) = delete;
  CpuCommunicator& operator=(const CpuCommunicator&) = delete;

  Backend backend() const override { return Backend::Cpu; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const CpuCommunicatorOptions& options() const { return options_; }

  // Reduces `tensor` in place across ranks; every rank ends with the result.
  void allreduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  // Copies `root`'s `tensor` into every other rank's `tensor`.
  void broadcast(const torch::Tensor& tensor, int root) override;
  // Returns a new tensor of shape [world_size, *input.shape()] whose row i is rank i's input.
  torch::Tensor allgather(const torch::Tensor& input) override;
  // Returns once every rank has entered barrier().
  void barrier() override;

  // Closes the connections (peers in a collective see PeerError naming this rank). Idempotent.
  // Does not touch the store.
  void close() override;

 private:
  struct Links;
  void check_tensor(const torch::Tensor& t, const char* what) const;
  // Checks the communicator is usable and that rank-1 runs the same collective (kind, dtype,
  // element count, op/root, sequence number); fails the communicator otherwise.
  std::string begin(const char* what, int kind, const torch::Tensor& t, int arg);
  [[noreturn]] void fail(const std::string& what, const ddp::rendezvous::Error& e);

  std::shared_ptr<ddp::rendezvous::Store> store_;
  int rank_;
  int world_size_;
  CpuCommunicatorOptions options_;
  std::mutex mutex_;
  std::unique_ptr<Links> links_;
  std::uint64_t seq_ = 0;  // collectives started, for the cross-rank check
  std::string broken_;     // why the communicator is unusable; empty while healthy
  std::atomic<bool> closed_{false};
};

}  // namespace ddp::runtime
