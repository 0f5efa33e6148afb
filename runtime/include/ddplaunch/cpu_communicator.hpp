// The CPU communicator: collectives over direct TCP connections between ranks, for CPU tensors.
// Ranks find each other through the rendezvous store and form a ring (each rank connects to
// rank+1 and accepts rank-1); allreduce is a chunked, pipelined ring (reduce-scatter then
// allgather in one pass, so a chunk is forwarded as soon as it is reduced), broadcast a pipelined
// chain from the root, allgather a ring pass. Bandwidth per rank is 2(N-1)/N of the tensor for
// allreduce, as in Gloo's ring. When every rank runs on one host, allreduces of at least
// options.shared_memory_min_bytes go through a POSIX shared memory segment instead (each rank
// copies its tensor in, reduces 1/N of it, copies the result out), with the ring's TCP links
// carrying only the synchronisation, so failures and timeouts behave as on the ring.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include <torch/arg.h>
#include <torch/types.h>

#include "ddplaunch/communicator.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

class FailureLatch;  // runtime/failure_latch.hpp

struct CpuCommunicatorOptions {
  // Store keys live under "<prefix>/": "<prefix>/addr/<rank>", "<prefix>/shm" and "<prefix>/failed".
  TORCH_ARG(std::string, prefix) = "ddp_cpu";
  // Bound on connecting at construction and on each collective.
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(5);
  // Address to listen on: an IPv4/IPv6 literal; "" listens on every IPv4 address.
  TORCH_ARG(std::string, bind_host) = "";
  // Address published for peers; "" guesses (first non-loopback IPv4 of the host name, else
  // 127.0.0.1).
  TORCH_ARG(std::string, advertise_host) = "";
  // Allreduce through shared memory when all ranks are on one host. Used only if every rank
  // enables it, all have the same boot id and host name, and all map the segment (created by
  // rank 0 in /dev/shm and unlinked as soon as every rank has mapped it); otherwise every rank
  // uses the TCP ring. Costs a segment of 3 MiB per rank (slots shrink beyond 16 ranks on a
  // host to keep it near 48 MiB) per communicator.
  TORCH_ARG(bool, shared_memory) = true;
  // Allreduces of fewer bytes keep the TCP ring. 0 by default: on 2 cores shared memory was as
  // fast or faster at every size measured, 4 KiB included (52 vs 57 µs on 2 ranks, 205 vs 260 µs
  // on 4; equal within noise in some runs), as its synchronisation takes as many ring hops as
  // the TCP ring's smallest allreduce. The largest value among the ranks applies, so every rank
  // picks the same path.
  TORCH_ARG(std::size_t, shared_memory_min_bytes) = 0;
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
  // rank+1 and accepts rank-1, then sets up shared memory (see options.shared_memory; rank 0
  // publishes the segment as "<prefix>/shm"). Blocks until the ring is connected and the ranks
  // agreed on shared memory; throws TimeoutError after options.timeout, BindError if it cannot
  // listen, CommunicatorError on a bad rank/world_size or a stray connection, PeerError if a
  // peer goes away during the set-up. The store must outlive the communicator.
  CpuCommunicator(std::shared_ptr<ddp::rendezvous::Store> store, int rank, int world_size,
                  CpuCommunicatorOptions options = {});
  ~CpuCommunicator() override;
  CpuCommunicator(const CpuCommunicator&) = delete;
  CpuCommunicator& operator=(const CpuCommunicator&) = delete;

  Backend backend() const override { return Backend::Cpu; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const CpuCommunicatorOptions& options() const { return options_; }
  // Whether allreduce goes through shared memory (for tensors of at least
  // options.shared_memory_min_bytes); the same on every rank.
  bool uses_shared_memory() const;

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
  [[noreturn]] void fail(const std::string& what, const ddp::Error& e);

  std::shared_ptr<ddp::rendezvous::Store> store_;
  int rank_;
  int world_size_;
  CpuCommunicatorOptions options_;
  std::mutex mutex_;
  std::unique_ptr<Links> links_;
  std::uint64_t seq_ = 0;                  // collectives started, for the cross-rank check
  std::unique_ptr<FailureLatch> failure_;  // why the communicator is unusable, once it is
  std::atomic<bool> closed_{false};
};

}  // namespace ddp::runtime
