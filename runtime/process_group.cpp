// The process group (see process_group.hpp): environment → store → backend and device →
// communicator, and the default group behind init()/get_rank()/destroy().
#include "ddplaunch/process_group.hpp"

#include <cstdlib>
#include <mutex>

#include <torch/cuda.h>

#include "common/worker_env.hpp"
#include "ddplaunch/cpu_communicator.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "runtime/local_address.hpp"
#include "runtime/progress_communicator.hpp"
#include "runtime/socket_fd.hpp"
#ifdef DDP_WITH_NCCL
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "ddplaunch/c10d_nccl_communicator.hpp"
#include "ddplaunch/nccl_communicator.hpp"
#include "runtime/c10d_store.hpp"
#endif

namespace ddp::runtime {
namespace {

Backend choose_backend(const InitOptions& options, const EnvLookup& env) {
  if (options.backend()) return *options.backend();
  if (const auto forced = env("DDPLAUNCH_BACKEND")) {
    if (*forced == "cpu") return Backend::Cpu;
    if (*forced == "nccl") return Backend::Nccl;
    if (*forced == "nccl-c10d") return Backend::NcclC10d;
    throw EnvError("DDPLAUNCH_BACKEND='" + *forced + "' is not a backend; use cpu, nccl-c10d or nccl, or unset it");
  }
  // LibTorch's ProcessGroupNCCL is the default GPU backend: what PyTorch's DDP runs on, with its
  // watchdog and flight recorder, tested on GPUs by PyTorch's CI, which ours cannot be here.
  return torch::cuda::device_count() > 0 ? Backend::NcclC10d : Backend::Cpu;
}

std::shared_ptr<rendezvous::Store> connect_store(const DistEnv& env, std::chrono::milliseconds timeout) {
  rendezvous::TcpStoreClientOptions client;
  client.host = env.master_addr;
  client.port = env.master_port;
  client.connect_timeout = timeout;
  client.timeout = timeout;
  return std::make_shared<rendezvous::TcpStoreClient>(client);
}

// Rank 0 of a launcher-less MPI job hosts the store its ranks meet in, on master_addr (so an
// address that is not this host's fails at once, naming it) and the job's port.
std::shared_ptr<void> host_store(const DistEnv& env) {
  rendezvous::TcpStoreServerOptions o;
  o.host = env.master_addr;
  o.port = env.master_port;
  o.log = [](std::string_view) {};
  try {
    auto server = std::make_shared<rendezvous::TcpStoreServer>(o);
    server->start();
    return server;
  } catch (const rendezvous::BindError& e) {
    throw EnvError(std::string(e.what()) + " (rank 0 of the " + to_string(env.source) +
                   " job hosts the store there; set MASTER_ADDR to an address of rank 0's host and MASTER_PORT "
                   "to a free port, e.g. mpirun -x MASTER_ADDR=<host> -x MASTER_PORT=<port>)");
  }
}

// DDPLAUNCH_SHM=0 keeps same-host ranks on the TCP ring (as NCCL_SHM_DISABLE=1 does for NCCL):
// for comparisons, or where shared memory between the workers is not wanted.
bool shared_memory_allowed(const EnvLookup& lookup) {
  const auto value = lookup("DDPLAUNCH_SHM");
  if (!value || *value == "1") return true;
  if (*value == "0") return false;
  throw EnvError("DDPLAUNCH_SHM='" + *value + "' is not 0 or 1; set 0 to keep same-host ranks off shared memory, " +
                 "or unset it");
}

std::shared_ptr<Communicator> make_cpu(const std::shared_ptr<rendezvous::Store>& store, const DistEnv& env,
                                       const InitOptions& options, bool shared_memory) {
  std::string host;
  if (!env.master_addr.empty()) host = local_address_towards(env.master_addr, env.master_port);
  if (host.empty()) host = guess_local_address();
  return std::make_shared<CpuCommunicator>(store, env.rank, env.world_size,
                                           CpuCommunicatorOptions()
                                               .prefix("cpu")
                                               .timeout(options.timeout())
                                               .bind_host(host)
                                               .advertise_host(host)
                                               .shared_memory(shared_memory));
}

#ifdef DDP_WITH_NCCL
// How to open more connections to `base`'s server: its client options when it is our TCP client,
// null for a caller's in-process store (which has no server to connect to again).
const rendezvous::TcpStoreClientOptions* tcp_options(const std::shared_ptr<rendezvous::Store>& base) {
  const auto* tcp = dynamic_cast<const rendezvous::TcpStoreClient*>(base.get());
  return tcp == nullptr ? nullptr : &tcp->options();
}

// A second connection to the same store and key space, for the NCCL watchdog's blocking wait on
// the failed key; null for an in-process store: peers' failures then reach the rank through
// NCCL's errors or the deadline.
std::shared_ptr<rendezvous::Store> second_connection(const std::shared_ptr<rendezvous::Store>& base,
                                                     const std::string& prefix) {
  const rendezvous::TcpStoreClientOptions* tcp = tcp_options(base);
  if (tcp == nullptr) return nullptr;
  return std::make_shared<rendezvous::PrefixStore>(prefix, std::make_shared<rendezvous::TcpStoreClient>(*tcp));
}
#endif

// This rank's GPU for a GPU backend: LOCAL_RANK among the visible devices. Throws
// CommunicatorError when there is none.
torch::Device gpu_device(Backend backend, const DistEnv& env) {
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (count == 0) {
    const char* visible = std::getenv(worker_env::kCudaVisibleDevices);
    throw CommunicatorError(std::string("backend ") + to_string(backend) +
                            " was requested but no CUDA device is visible (CUDA_VISIBLE_DEVICES=" +
                            std::string(visible ? visible : "<unset>") +
                            "); choose the cpu backend (InitOptions().backend(Backend::Cpu), `train --backend cpu`, or "
                            "DDPLAUNCH_BACKEND=cpu when "
                            "the program leaves the choice to the runtime)");
  }
  if (env.local_rank >= count)
    throw CommunicatorError("LOCAL_RANK " + std::to_string(env.local_rank) + " has no GPU: only " +
                            std::to_string(count) +
                            " CUDA device(s) are visible; start at most that many workers per node "
                            "(--nproc_per_node) or widen CUDA_VISIBLE_DEVICES");
#ifndef DDP_WITH_NCCL
  throw CommunicatorError(std::string("backend ") + to_string(backend) +
                          " was requested but this build of the ddplaunch runtime has no NCCL (it was built "
                          "without the CUDA toolkit); rebuild with CUDA or use the cpu backend");
#endif
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
}

#ifdef DDP_WITH_NCCL
// ProcessGroupNCCL's store: a c10d::TCPStore client of the same server when the base store is
// our TCP client (c10d's background threads open their own connections), else the adapter over
// the (in-process) store; keys under the process group's prefix either way.
c10::intrusive_ptr<c10d::Store> c10d_store(const std::shared_ptr<rendezvous::Store>& base,
                                           const std::shared_ptr<rendezvous::Store>& prefixed,
                                           const std::string& prefix, std::chrono::milliseconds timeout) {
  if (const rendezvous::TcpStoreClientOptions* tcp = tcp_options(base)) {
    c10d::TCPStoreOptions o;
    o.port = tcp->port;
    o.isServer = false;
    o.waitWorkers = false;
    o.timeout = timeout;
    return c10::make_intrusive<c10d::PrefixStore>(prefix, c10::make_intrusive<c10d::TCPStore>(tcp->host, o));
  }
  return c10::make_intrusive<C10dStore>(prefixed, C10dStore::Connect{}, timeout);
}
#endif

std::shared_ptr<Communicator> make_gpu(Backend backend, const std::shared_ptr<rendezvous::Store>& base,
                                       const std::shared_ptr<rendezvous::Store>& store, const std::string& prefix,
                                       const DistEnv& env, const InitOptions& options, torch::Device& device) {
  device = gpu_device(backend, env);
#ifdef DDP_WITH_NCCL
  if (backend == Backend::NcclC10d) {
    return std::make_shared<C10dNcclCommunicator>(
        c10d_store(base, store, prefix, options.timeout()), env.rank, env.world_size,
        C10dNcclCommunicatorOptions().prefix("nccl-c10d").timeout(options.timeout()).device(env.local_rank));
  }
  return std::make_shared<NcclCommunicator>(store, env.rank, env.world_size,
                                            NcclCommunicatorOptions()
                                                .prefix("nccl")
                                                .timeout(options.timeout())
                                                .device(env.local_rank)
                                                .listener_store(second_connection(base, prefix)));
#else
  (void)base;
  (void)store;
  (void)prefix;
  (void)options;
  return nullptr;  // gpu_device() threw
#endif
}

}  // namespace

ProcessGroup::ProcessGroup(InitOptions options) {
  const EnvLookup env = options.env() ? options.env() : process_env();
  env_ = options.dist_env() ? *options.dist_env() : resolve_dist_env(env, options.argv());
  const Backend backend = choose_backend(options, env);
  const bool cpu_shm = backend == Backend::Cpu && shared_memory_allowed(env);  // bad values fail before connecting
  // Under ddplaunch: each collective is recorded in this worker's progress slot (--hang_timeout).
  // Only a group built from the environment: ranks as threads (tests) would share one slot.
  std::optional<ProgressWriter> progress;
  try {
    if (!options.dist_env()) progress = ProgressWriter::from_env(env);
  } catch (const Error& e) {
    throw EnvError(e.what());
  }
  timeout_ = options.timeout();
  if (env_.host_store && !options.store()) hosted_store_ = host_store(env_);
  count_out_ = env_.source == EnvSource::Mpi && !options.store();
  std::shared_ptr<rendezvous::Store> base = options.store() ? options.store() : connect_store(env_, options.timeout());
  // A restarted job reuses the launcher's store: each round gets fresh keys.
  const std::string prefix = options.prefix() + "/" + env(worker_env::kRestartCount).value_or("0");
  store_ = std::make_shared<rendezvous::PrefixStore>(prefix, base);
  communicator_ = backend == Backend::Cpu ? make_cpu(store_, env_, options, cpu_shm)
                                          : make_gpu(backend, base, store_, prefix, env_, options, device_);
  if (progress) communicator_ = std::make_shared<ProgressCommunicator>(std::move(communicator_), std::move(*progress));
}

ProcessGroup::~ProcessGroup() {
  close();
}

void ProcessGroup::close() {
  if (closed_) return;
  closed_ = true;
  if (communicator_) communicator_->close();
  if (!count_out_ || !store_) return;
  // Every rank counts itself out; the host keeps the store up until all have.
  try {
    if (store_->add("closed", 1) == env_.world_size) store_->set("all_closed", "1");
    if (env_.host_store) store_->wait({"all_closed"}, timeout_);
  } catch (const std::exception&) {
    // A rank that died never counts itself out: stop waiting at the timeout; the store goes.
  }
}

namespace {

std::mutex g_mutex;
std::unique_ptr<ProcessGroup> g_default;

ProcessGroup& require(const char* what) {
  std::lock_guard lock(g_mutex);
  if (!g_default) throw CommunicatorError(std::string(what) + " called before init(); call ddp::runtime::init() first");
  return *g_default;
}

}  // namespace

void init(InitOptions options) {
  std::unique_lock lock(g_mutex);
  if (g_default) throw CommunicatorError("init() called twice; call destroy() before initialising again");
  lock.unlock();
  auto group = std::make_unique<ProcessGroup>(std::move(options));
  lock.lock();
  g_default = std::move(group);
}

void init(int argc, const char* const* argv, InitOptions options) {
  options.argv(std::vector<std::string>(argv, argv + argc));
  init(std::move(options));
}

bool is_initialized() {
  std::lock_guard lock(g_mutex);
  return g_default != nullptr;
}

ProcessGroup& default_group() {
  return require("default_group()");
}
int get_rank() {
  return require("get_rank()").rank();
}
int get_world_size() {
  return require("get_world_size()").world_size();
}
int get_local_rank() {
  return require("get_local_rank()").local_rank();
}
int get_local_world_size() {
  return require("get_local_world_size()").local_world_size();
}
torch::Device get_device() {
  return require("get_device()").device();
}
void barrier() {
  require("barrier()").barrier();
}

void destroy() {
  std::unique_ptr<ProcessGroup> group;
  {
    std::lock_guard lock(g_mutex);
    group = std::move(g_default);
  }
}

}  // namespace ddp::runtime
