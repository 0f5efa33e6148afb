// spawn(): the C++ answer to torch.multiprocessing.spawn. A training program started on its own
// (`./train --nprocs 4`) calls spawn(fn, ...) early in main; the call starts `nprocs` copies of
// the same program with a private store and the torchrun environment, and in each copy the same
// call runs fn(local_rank), so the copy's init() finds its rank as under ddplaunch or torchrun.
//
//   int main(int argc, char** argv) {
//     return ddp::runtime::spawn([&](int local_rank) { train(local_rank); },
//                                ddp::runtime::SpawnOptions(4).argv(argc, argv));
//   }
//
// Linux only (pidfd, PR_SET_PDEATHSIG, close_range: kernel 5.9 or later).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <torch/arg.h>

#include "ddplaunch/common/error.hpp"

namespace ddp::runtime {

// Options that cannot work (nprocs < 1, a negative grace, no master address), or a copy that
// could not be started; the message names the value and the fix.
class SpawnError : public ddp::Error {
 public:
  using Error::Error;
};

struct SpawnOptions {
  SpawnOptions() = default;
  explicit SpawnOptions(int nprocs) : nprocs_(nprocs) {}

  // How many copies to start; at least 1. Each gets RANK = LOCAL_RANK = 0..nprocs-1.
  TORCH_ARG(int, nprocs) = 1;
  // Address the private store binds to and the copies connect to (MASTER_ADDR).
  TORCH_ARG(std::string, master_addr) = "127.0.0.1";
  // After the first failure or a forwarded signal: how long the other copies get to exit after
  // SIGTERM (or the forwarded signal) before they are sent SIGKILL.
  TORCH_ARG(std::chrono::milliseconds, shutdown_grace) = std::chrono::seconds(5);
  // The command line the copies are started with (argv[0] included); the program itself is
  // always /proc/self/exe. Empty: this process's own command line, from /proc/self/cmdline.
  TORCH_ARG(std::vector<std::string>, argv) = {};

 public:
  // Sets argv from main's arguments.
  SpawnOptions& argv(int argc, const char* const* argv_in) {
    argv_.assign(argv_in, argv_in + argc);
    return *this;
  }
};

// In the parent (a process without DDPLAUNCH_SPAWNED=1 in its environment):
//  1. validates the options (SpawnError);
//  2. starts a TcpStoreServer on master_addr, port 0 (an ephemeral port);
//  3. starts nprocs copies of /proc/self/exe with options.argv, each in its own process group,
//     dying with the parent (PR_SET_PDEATHSIG(SIGKILL) — tied to the calling thread, which stays
//     blocked in spawn() for as long as the copies live), with file descriptors above 2 closed,
//     and with this process's environment plus RANK, LOCAL_RANK, GROUP_RANK=0, ROLE_RANK,
//     ROLE_NAME=default, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_WORLD_SIZE=1, ROLE_WORLD_SIZE,
//     MASTER_ADDR, MASTER_PORT, DDPLAUNCH_SPAWNED=1, and where unset TORCH_NCCL_ASYNC_ERROR_HANDLING=1
//     and (for nprocs > 1) OMP_NUM_THREADS=1, as the launcher does (this process's own
//     environment is never changed);
//  4. blocks until every copy has ended, with no timeout. When the first copy fails (nonzero
//     exit or a signal) it prints "spawn: rank 1 (pid 1234) exited with code 3; stopping the other
//     2 ranks" to stderr, sends SIGTERM to every copy's process group, SIGKILL after
//     shutdown_grace, reaps them all and returns that copy's code (128+N for signal N).
//     SIGINT/SIGTERM sent to this process are forwarded to every group (SIGKILL follows after
//     shutdown_grace; a second signal sends SIGKILL at once) and spawn returns 130/143.
//     Returns 0 when every copy exited with 0. No copy outlives the call.
// In a copy (DDPLAUNCH_SPAWNED=1): calls fn(LOCAL_RANK) and returns 0; if fn throws a
// std::exception, prints "rank <local_rank>: <what>" to stderr and returns 1.
//
// Throws SpawnError for bad options (in the parent and in a copy alike), when a copy cannot be
// started (the ones already started are killed and reaped first) or when a copy's LOCAL_RANK is
// malformed; rendezvous::BindError when the store cannot bind master_addr.
//
// Thread-safety: call it once, from main's thread, before starting threads of your own. In the
// parent it replaces the SIGINT, SIGTERM and SIGCHLD handlers of the whole process for the
// duration of the call (restored on return), so two concurrent calls are a bug (asserted).
int spawn(const std::function<void(int local_rank)>& fn, SpawnOptions options = {});

// True in a copy started by spawn() (DDPLAUNCH_SPAWNED=1 in the environment). Non-blocking,
// never throws; thread-safe unless another thread modifies the environment.
bool is_spawned_child();

}  // namespace ddp::runtime
