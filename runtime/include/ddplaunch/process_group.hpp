// The process group of a worker: who this rank is (DistEnv), the launcher's store it talks to,
// the device it computes on and the communicator its collectives run on. `init()` builds the
// default group the way `torch.distributed.init_process_group(init_method="env://")` does; the
// ProcessGroup class is there for more than one group per process (tests run ranks as threads).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/arg.h>
#include <torch/types.h>

#include "ddplaunch/communicator.hpp"
#include "ddplaunch/dist_env.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::runtime {

struct InitOptions {
  // nullopt: nccl-c10d (LibTorch's ProcessGroupNCCL) when CUDA devices are visible, else the CPU
  // communicator. The environment variable DDPLAUNCH_BACKEND=cpu|nccl|nccl-c10d overrides this
  // default (not an explicit choice). The CPU
  // communicator allreduces through shared memory between ranks of one host unless
  // DDPLAUNCH_SHM=0 (any other value than 0 or 1 is an EnvError).
  TORCH_ARG(std::optional<Backend>, backend) = std::nullopt;
  // Bound on connecting to the store, building the communicator and every collective.
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::minutes(10);
  // The program's argv, for the legacy `--local_rank=i` argument.
  TORCH_ARG(std::vector<std::string>, argv) = {};
  // Where variables come from; empty means this process's environment.
  TORCH_ARG(EnvLookup, env) = {};
  // Skip the environment: use this rank, world size and local rank (ranks as threads in tests).
  TORCH_ARG(std::optional<DistEnv>, dist_env) = std::nullopt;
  // Use this store instead of connecting to MASTER_ADDR:MASTER_PORT.
  TORCH_ARG(std::shared_ptr<ddp::rendezvous::Store>, store) = nullptr;
  // Keys of this group live under "<prefix>/<restart count>/" in the store.
  TORCH_ARG(std::string, prefix) = "ddplaunch/runtime";
};

// Thread-safety: the accessors are; collectives are serialised by the communicator.
class ProcessGroup {
 public:
  // Resolves the environment (EnvError naming the variables), connects to the store (blocks up to
  // options.timeout; rendezvous::TimeoutError / ConnectionError naming the address), picks the
  // backend and device (CommunicatorError when NCCL is asked for without CUDA devices, or
  // LOCAL_RANK is beyond the visible devices) and builds the communicator, which blocks until
  // every rank of the group has arrived (TimeoutError after options.timeout).
  explicit ProcessGroup(InitOptions options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const DistEnv& dist_env() const { return env_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  int local_world_size() const { return env_.local_world_size; }
  Backend backend() const { return communicator_->backend(); }
  // The device this rank computes on: cuda:<index> for NCCL, the CPU otherwise.
  torch::Device device() const { return device_; }
  const std::shared_ptr<Communicator>& communicator() const { return communicator_; }
  const std::shared_ptr<ddp::rendezvous::Store>& store() const { return store_; }

  // Blocks until every rank has entered; throws as Communicator::barrier.
  void barrier() { communicator_->barrier(); }
  // Closes the communicator (peers in a collective fail) and drops the store connection. The
  // rank that hosts the store (DistEnv::host_store) first waits, up to the timeout, until every
  // rank has closed, so nobody loses the store while finishing.
  void close();

 private:
  DistEnv env_;
  torch::Device device_{torch::kCPU};
  std::shared_ptr<ddp::rendezvous::Store> store_;
  std::shared_ptr<Communicator> communicator_;
  std::shared_ptr<void> hosted_store_;  // the TcpStoreServer when DistEnv::host_store
  std::chrono::milliseconds timeout_{0};
  bool count_out_ = false;  // an MPI job's store is hosted by rank 0: every rank counts itself out
  bool closed_ = false;
};

// The default group, as in torch.distributed. Not thread-safe against each other: call init()
// and destroy() from one thread; the getters may be called from any thread in between.
//
// init() builds the default group (see ProcessGroup's constructor for what blocks and throws);
// calling it twice without destroy() throws CommunicatorError. The argc/argv form also reads the
// legacy `--local_rank` argument.
void init(InitOptions options = {});
void init(int argc, const char* const* argv, InitOptions options = {});
bool is_initialized();
// The getters throw CommunicatorError("... before init() ...") when not initialised.
ProcessGroup& default_group();
int get_rank();
int get_world_size();
int get_local_rank();
int get_local_world_size();
torch::Device get_device();
void barrier();
// Closes and forgets the default group; a no-op when there is none.
void destroy();

}  // namespace ddp::runtime
