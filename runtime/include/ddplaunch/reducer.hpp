// The engine under DistributedDataParallel: gradient buckets, the autograd hooks that fill them,
// and the collectives that average them while backward is still running.
//
// One training step, as the Reducer sees it:
//  1. forward: prepare_for_forward() broadcasts buffers from rank 0 (broadcast_buffers).
//  2. backward: after autograd accumulates a parameter's gradient into .grad, a hook copies it
//     into its slot of the parameter's bucket. When every slot of a bucket is filled, that bucket
//     and any filled buckets after it (buckets launch in index order, the same on every rank) go
//     to the communication hook, overlapping the rest of backward: on a communication thread
//     (CPU), or on the communicator's own CUDA stream (NCCL: Communicator::overlapped), so that
//     backward's later kernels do not queue behind the bucket's allreduce.
//  3. end of backward (an autograd final callback): unused parameters are handled (zero
//     contribution with find_unused_parameters, else an error naming them), the remaining
//     buckets launch, the reducer waits for every bucket (on a GPU: the caller's stream waits for
//     the communicator's, Communicator::join_overlapped) and writes the averaged gradients back
//     into .grad. backward() returns with identical gradients on every rank.
//  Under no_sync the hooks do nothing and gradients accumulate locally in .grad; the next synced
//  backward reduces the accumulated sums.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/arg.h>
#include <torch/types.h>

#include "ddplaunch/comm_hooks.hpp"
#include "ddplaunch/communicator.hpp"

namespace ddp::runtime {

struct DistributedDataParallelOptions {
  // Cap of every bucket but the first, in MiB.
  TORCH_ARG(double, bucket_cap_mb) = 25.0;
  // Cap of the first bucket (the last layers' gradients), in MiB: small so that the first
  // allreduce starts early in backward.
  TORCH_ARG(double, first_bucket_cap_mb) = 1.0;
  // Broadcast the module's buffers (batch-norm statistics, ...) from rank 0 before every forward.
  TORCH_ARG(bool, broadcast_buffers) = true;
  // Tolerate parameters that get no gradient in a step (they contribute zeros; a parameter no
  // rank used keeps its .grad unchanged). Off: such a step throws an error naming them.
  TORCH_ARG(bool, find_unused_parameters) = false;
  // Reduce buckets during backward as they fill (on), or all after backward (off; for measuring
  // what the overlap buys).
  TORCH_ARG(bool, overlap) = true;
  // How a bucket is reduced; empty means allreduce_hook().
  TORCH_ARG(CommHook, comm_hook) = nullptr;
};

// Thread-safety: the hooks and the final callback may run on autograd's threads; the public
// methods must be called from the training thread, not during backward.
class Reducer {
 public:
  // Checks that every rank has the same parameter shapes (CommunicatorError naming the rank that
  // differs), broadcasts parameters and buffers from rank 0, plans the buckets and installs one
  // post-accumulate-grad hook per parameter that requires grad (it replaces any such hook the
  // parameter had). Blocks on collectives; throws what the communicator throws.
  Reducer(std::vector<std::string> names, std::vector<torch::Tensor> parameters, std::vector<torch::Tensor> buffers,
          std::shared_ptr<Communicator> comm, DistributedDataParallelOptions options = {});
  // Removes the hooks and stops the communication thread.
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Broadcasts buffers from rank 0 when broadcast_buffers is on; blocks on the collective.
  void prepare_for_forward();
  // Whether backward reduces gradients (false inside no_sync()).
  void set_sync(bool enabled);
  bool sync() const;

  // Bucket i's parameter indices (into the constructor's list), in launch order.
  const std::vector<std::vector<std::size_t>>& buckets() const { return plan_; }
  const std::shared_ptr<Communicator>& communicator() const { return comm_; }
  const DistributedDataParallelOptions& options() const { return options_; }
  // How long the last synced backward waited, after autograd finished, for the reductions.
  double last_wait_ms() const { return last_wait_ms_; }

 private:
  struct Bucket {
    std::vector<std::size_t> params;
    std::vector<std::int64_t> offsets;
    torch::Tensor buffer;
    std::size_t pending = 0;
  };
  struct Hook;

  void verify_shapes();
  void broadcast_coalesced(const std::vector<torch::Tensor>& tensors);
  void on_grad_ready(std::size_t index);
  void finalize();
  void launch_ready(bool all);
  void run_bucket(std::size_t bucket);
  // Waits until every launched bucket's hook has run, then joins the overlapped GPU work
  // (may throw the communicator's CommunicatorError).
  void wait_launched(std::unique_lock<std::mutex>& lock);
  void reset_step();
  torch::Tensor slot(std::size_t index) const;
  void comm_loop();

  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;  // those that require grad
  std::vector<torch::Tensor> buffers_;
  std::shared_ptr<Communicator> comm_;
  DistributedDataParallelOptions options_;
  CommHook hook_;
  std::vector<std::vector<std::size_t>> plan_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // param index → bucket
  std::vector<std::size_t> slot_of_;    // param index → position in its bucket

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool sync_ = true;
  bool in_backward_ = false;
  std::vector<bool> ready_;
  std::size_t next_launch_ = 0;
  std::size_t launched_ = 0;
  std::size_t done_ = 0;
  std::exception_ptr error_;
  std::deque<std::size_t> jobs_;
  bool stopping_ = false;
  double last_wait_ms_ = 0;
  std::thread comm_thread_;  // CPU backend only: NCCL collectives are stream-ordered, run inline
};

}  // namespace ddp::runtime
