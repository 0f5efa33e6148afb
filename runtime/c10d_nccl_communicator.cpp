// See c10d_nccl_communicator.hpp.
#include "ddplaunch/c10d_nccl_communicator.hpp"

#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "ddplaunch/rendezvous/error.hpp"
#include "runtime/gpu_rank.hpp"
#include "runtime/stream_overlap.hpp"
#include "runtime/tensor_checks.hpp"

namespace ddp::runtime {
namespace {

c10d::ReduceOp c10d_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return c10d::ReduceOp::SUM;
    case ReduceOp::Average:
      return c10d::ReduceOp::AVG;
    case ReduceOp::Min:
      return c10d::ReduceOp::MIN;
    case ReduceOp::Max:
      return c10d::ReduceOp::MAX;
  }
  DDP_ASSERT(false, "c10d_op: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
  return c10d::ReduceOp::SUM;
}

}  // namespace

C10dNcclCommunicator::C10dNcclCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                                           C10dNcclCommunicatorOptions options)
    : rank_(rank), world_size_(world_size), options_(std::move(options)) {
  device_ = gpu_rank_device(rank_, world_size_, options_.device(), "C10dNcclCommunicatorOptions");
  const auto device = static_cast<c10::DeviceIndex>(device_);
  c10::cuda::CUDAGuard guard(device);
  auto pg_options = c10d::ProcessGroupNCCL::Options::create();
  pg_options->timeout = options_.timeout();
  try {
    group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>(options_.prefix(), std::move(store)), rank_, world_size_, pg_options);
    // Joins the NCCL communicator now, bound to this rank's device, with the timeout.
    group_->eagerConnectSingleDevice(at::Device(at::kCUDA, device));
  } catch (const std::exception& e) {
    if (group_) group_->abort();
    throw CommunicatorError("rank " + std::to_string(rank_) + ": creating ProcessGroupNCCL '" + options_.prefix() +
                            "' of world size " + std::to_string(world_size_) + " on CUDA device " +
                            std::to_string(device_) + " failed: " + e.what() +
                            "; check that every rank started, and set NCCL_DEBUG=WARN for NCCL's own log");
  }
  overlap_ = std::make_unique<StreamOverlap>(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device));
}

C10dNcclCommunicator::~C10dNcclCommunicator() {
  close();
}

void C10dNcclCommunicator::close() {
  if (closed_.exchange(true)) return;
  std::unique_lock lock(mutex_, std::try_to_lock);
  try {
    if (!lock.owns_lock()) {
      // A collective holds the mutex on another thread: abort ends it, then it releases the mutex.
      group_->abort();
      lock.lock();
      return;
    }
    if (broken_.empty()) {
      group_->shutdown();
    } else {
      group_->abort();
    }
  } catch (const std::exception&) {
    // Nothing is left to do with a process group that cannot shut down: close() never throws.
    try {
      group_->abort();
    } catch (const std::exception&) {
      // Already failed: the process group's own destructor does what it can.
    }
  }
}

c10d::ProcessGroupNCCL& C10dNcclCommunicator::group(const std::string& what) {
  if (closed_) throw CommunicatorError(what + " on a closed communicator");
  if (!broken_.empty()) throw CommunicatorError(what + " on a failed communicator: " + broken_);
  return *group_;
}

void C10dNcclCommunicator::fail(const std::string& what, const std::exception& e) {
  broken_ = "rank " + std::to_string(rank_) + ": " + e.what();
  if (closed_) throw CommunicatorError(what + " failed: the communicator was closed during the collective");
  throw CommunicatorError(what + " failed on " + broken_);
}

void C10dNcclCommunicator::allreduce(const torch::Tensor& tensor, ReduceOp op) {
  check_gpu_collective_tensor(tensor, "allreduce", device_);
  std::lock_guard lock(mutex_);
  auto& pg = group("allreduce");
  try {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions o;
    o.reduceOp = c10d_op(op);
    pg.allreduce(tensors, o)->wait();
  } catch (const std::exception& e) {
    fail("allreduce", e);
  }
}

void C10dNcclCommunicator::broadcast(const torch::Tensor& tensor, int root) {
  check_gpu_collective_tensor(tensor, "broadcast", device_);
  if (root < 0 || root >= world_size_)
    throw CommunicatorError("broadcast: root " + std::to_string(root) + " is not a rank of world size " +
                            std::to_string(world_size_));
  std::lock_guard lock(mutex_);
  auto& pg = group("broadcast");
  try {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    pg.broadcast(tensors, o)->wait();
  } catch (const std::exception& e) {
    fail("broadcast", e);
  }
}

torch::Tensor C10dNcclCommunicator::allgather(const torch::Tensor& input) {
  check_gpu_collective_tensor(input, "allgather", device_);
  std::vector<std::int64_t> shape{world_size_};
  for (std::int64_t d : input.sizes()) shape.push_back(d);
  std::lock_guard lock(mutex_);
  auto& pg = group("allgather");
  torch::Tensor out = torch::empty(shape, input.options());
  try {
    at::Tensor in = input;
    pg.all_gather_single(out, in)->wait();
  } catch (const std::exception& e) {
    fail("allgather", e);
  }
  return out;
}

void C10dNcclCommunicator::barrier() {
  std::lock_guard lock(mutex_);
  auto& pg = group("barrier");
  try {
    c10d::BarrierOptions o;
    o.device_ids = {device_};
    // ProcessGroupNCCL's barrier work blocks the host in wait() until the barrier completed.
    pg.barrier(o)->wait();
  } catch (const std::exception& e) {
    fail("barrier", e);
  }
}

void C10dNcclCommunicator::overlapped(const std::function<void()>& body) {
  {
    std::lock_guard lock(mutex_);
    group("overlapped work");
  }
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  overlap_->run(body);
}

void C10dNcclCommunicator::join_overlapped() {
  std::lock_guard lock(mutex_);
  group("joining overlapped work");
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
  overlap_->join();
}

}  // namespace ddp::runtime
