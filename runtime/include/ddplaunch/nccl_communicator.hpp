// The NCCL communicator: collectives on CUDA tensors through NVIDIA's NCCL, for builds with CUDA
// (the build defines DDP_WITH_NCCL=1 when it is available; #ifdef it before using this class).
// Rank 0 creates the NCCL unique id and publishes it through the rendezvous store; every rank then
// joins one non-blocking NCCL communicator bound to one CUDA device. NCCL's own types stay inside
// nccl_communicator.cpp, so including this header does not need nccl.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <torch/arg.h>
#include <torch/types.h>

#include "ddplaunch/communicator.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

class ArrivalRecords;      // runtime/arrival_records.hpp
class CollectiveWatchdog;  // runtime/collective_watchdog.hpp
class FailureLatch;        // runtime/failure_latch.hpp

struct NcclCommunicatorOptions {
  // Store keys live under "<prefix>/": "<prefix>/nccl_id/<n>" (rank 0's 128-byte NCCL unique id
  // for the n-th communicator under this prefix, runtime/nccl_id.hpp), "<prefix>/generation/<rank>"
  // (each rank's count of them), "<prefix>/<n>/arrived/<c>/<rank>" (written only by a rank whose
  // wait in collective #c has passed half the timeout, so that a timeout names the ranks that
  // never arrived: runtime/arrival_records.hpp) and "<prefix>/failed" (the first failure, as in
  // CpuCommunicator).
  TORCH_ARG(std::string, prefix) = "ddp_nccl";
  // Bound on joining at construction, on enqueueing each collective, and on barrier().
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(5);
  // CUDA device index of this rank; -1 takes the current device at construction
  // (c10::cuda::current_device(), usually set from LOCAL_RANK by the caller).
  TORCH_ARG(int, device) = -1;
  // A second connection to the constructor's store (the same key space), for the watchdog's
  // blocking wait on "<prefix>/failed": another rank's failure then aborts this rank at once,
  // idle or in a collective. Without one, a peer's failure reaches this rank only through
  // NCCL's own errors or the deadline. init() passes one.
  TORCH_ARG(std::shared_ptr<ddp::rendezvous::Store>, listener_store) = nullptr;
  // Called (on the watchdog's thread, after the NCCL communicator was aborted) with the message
  // of a failure found while no call of this communicator was waiting for it: a collective past
  // its deadline, NCCL's asynchronous error, or another rank's failure. Empty: the message goes
  // to stderr and the process exits with code 1, as PyTorch's ProcessGroupNCCL tears the process
  // down by default. A handler that returns lets the process go on: every later call throws
  // CommunicatorError. It must not call close().
  TORCH_ARG(std::function<void(const std::string&)>, on_failure) = nullptr;
};

// Tensors: contiguous CUDA tensors on this communicator's device, of float32, float64, bfloat16,
// float16, int32, int64, uint8 or int8, with the same dtype and number of elements on every rank
// (not checked: a mismatch ends in a timeout, or in a hang of the GPU stream until close()).
// Average is NCCL's ncclAvg (sum divided by world_size; truncating for integer dtypes).
//
// Streams: each communicator enqueues its collectives on a stream of its own (from LibTorch's
// pool), ordered after what the caller's current stream of the device has queued (an event wait)
// and followed by the current stream waiting for them (another), so the collective never runs on
// the legacy default stream and every later kernel on the caller's stream sees its result; the
// buffers are recorded on our stream for the caching allocator (recordStream), as
// ProcessGroupNCCL does.
// Blocking: allreduce, broadcast and allgather return once the collective is enqueued, like
// PyTorch's collectives: work on the caller's stream afterwards sees the result, the host does not.
// A watchdog thread takes over from there (runtime/collective_watchdog.hpp): it polls each
// enqueued collective's completion event and NCCL's asynchronous error every 50 ms while work is
// in flight, fails a collective that outlives options.timeout (naming the ranks that never
// arrived), and waits on the store's "<prefix>/failed" key (options.listener_store); on any of
// these it records the failure there, aborts the NCCL communicator (so every rank's collectives
// end, as NCCL requires) and calls options.on_failure. barrier() blocks the host until the
// barrier's collective has completed on the GPU. Enqueueing may wait for NCCL (a non-blocking
// communicator can report "in progress" while it connects lazily); that wait and barrier() throw
// rendezvous::TimeoutError after options.timeout. NCCL errors throw CommunicatorError carrying
// NCCL's error string and last error; an error NCCL blames on a peer throws PeerError with rank -1
// (NCCL does not say which rank). On any failure the communicator records it in the store
// ("<prefix>/failed", first failure wins), aborts its NCCL communicator so that peers blocked in a
// collective with us fail too, and is unusable afterwards (CommunicatorError).
//
// Thread-safety: collectives are serialised by a mutex (one at a time); close() may be called from
// another thread: a collective waiting on the host (to enqueue, or in barrier()) then fails with
// CommunicatorError within milliseconds, and close() aborts the NCCL communicator.
class NcclCommunicator : public Communicator {
 public:
  // Rank 0 publishes a fresh NCCL unique id at "<prefix>/nccl_id/<n>"; the others get() it. Then every
  // rank creates its NCCL communicator on options.device and waits for all ranks to join.
  // Blocks until joined; throws rendezvous::TimeoutError naming the rank and prefix after
  // options.timeout (the NCCL communicator is aborted), CommunicatorError on a bad rank/world_size,
  // a bad device, a malformed id in the store or an NCCL error. The store must outlive the
  // communicator.
  NcclCommunicator(std::shared_ptr<ddp::rendezvous::Store> store, int rank, int world_size,
                   NcclCommunicatorOptions options = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  Backend backend() const override { return Backend::Nccl; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  // The CUDA device index the communicator is bound to (options.device resolved).
  int device() const { return device_; }
  const NcclCommunicatorOptions& options() const { return options_; }

  // Enqueues an in-place reduction of `tensor` across ranks; every rank ends with the result.
  void allreduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  // Enqueues a copy of `root`'s `tensor` into every other rank's `tensor`.
  void broadcast(const torch::Tensor& tensor, int root) override;
  // Returns a new tensor of shape [world_size, *input.shape()] on this device whose row i will be
  // rank i's input once the enqueued collective runs.
  torch::Tensor allgather(const torch::Tensor& input) override;
  // Returns once every rank has entered barrier() and the work this rank enqueued before it on
  // the current stream of this device has completed.
  void barrier() override;
  // Runs body with this communicator's stream as the device's current stream, after an event wait
  // for what the caller's current stream has queued; the collectives body calls then run on that
  // stream without making the caller's stream wait. join_overlapped() records an event on our
  // stream and makes the caller's current stream wait for it (nothing when nothing ran since).
  // Throws CommunicatorError on a CUDA error, on a closed or failed communicator.
  void overlapped(const std::function<void()>& body) override;
  void join_overlapped() override;

  // Frees the NCCL communicator. Healthy with nothing of ours left on the GPU (the
  // communicator's stream idle): ncclCommFinalize (blocking up to options.timeout), then
  // ncclCommDestroy. A collective still queued or running on the GPU (a stuck peer, or no
  // synchronisation before close: call barrier() first to keep its result), a failure, an
  // interrupted collective or a flush that fails or times out: ncclCommAbort at once, which ends
  // whatever the GPU is stuck in. Idempotent; never throws (not even when the device cannot be
  // set: a sticky CUDA error, the runtime torn down at exit); does not touch the store.
  void close() override;

 private:
  struct Nccl;
  void check_tensor(const torch::Tensor& t, const char* what) const;
  std::string begin(const char* what);
  std::string timeout_message(const std::string& what) const;
  [[noreturn]] void fail(const std::string& what, const ddp::Error& e);
  struct Collective;
  // Enqueues one collective (numbered), hands it to the watchdog; fail() on an error. Under mutex_.
  void run(const Collective& c);
  // "<what> on rank R timed out ... (collective #n); rank 3 never arrived at ...".
  std::string collective_timeout(const std::string& what, std::uint64_t n) const;
  void start_watchdog();
  // Frees the NCCL communicator as close() describes; the caller holds mutex_. Never throws.
  void release_locked() noexcept;

  std::shared_ptr<ddp::rendezvous::Store> store_;
  int rank_;
  int world_size_;
  NcclCommunicatorOptions options_;
  int device_ = -1;
  std::mutex mutex_;
  std::unique_ptr<Nccl> nccl_;                    // the ncclComm_t and its state; null after close()
  std::unique_ptr<ArrivalRecords> arrivals_;      // who waited long in which collective (timeouts name the rest)
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // stopped in release_locked(), before nccl_ goes
  std::uint64_t sequence_ = 0;                    // collectives so far (under mutex_)
  std::unique_ptr<FailureLatch> failure_;         // why the communicator is unusable, once it is
  std::atomic<bool> closed_{false};
};

}  // namespace ddp::runtime
