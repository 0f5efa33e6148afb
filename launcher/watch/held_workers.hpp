// Workers the kernel will not let go: still there a bound after SIGKILL, because they sleep
// uninterruptibly in a system call (state D: a hung NFS or FUSE read, a GPU driver call). Such a
// process cannot be killed until the kernel answers it, and a new round on its host would find
// the host's GPU, NIC or file system still held. The agent names them (pid, rank, what the kernel
// says they wait in: /proc/<pid>/wchan), gives up waiting for them and keeps this host out of
// the job (exit kExitUnkillable). torchrun's equivalent: torch/distributed/elastic/utils/
// process_state.py (pytorch PRs #184304, #185414).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace ddp::launcher {

// One worker still there after SIGKILL, as /proc shows it.
struct HeldWorker {
  int pid = 0;
  int rank = 0;
  int local_rank = 0;
  char state = 0;     // proc(5)'s letter ('D' for uninterruptible sleep); 0: gone meanwhile
  std::string wchan;  // the kernel function it waits in ("request_wait_answer"); "": not told
};

// Reads the worker's state (/proc/<pid>/stat, after the last ')') and /proc/<pid>/wchan. Never
// throws; thread-safe.
HeldWorker read_held_worker(int pid, int rank, int local_rank);

// The launcher's error, one line per worker then what happens and what to do, e.g.
//   worker rank 0 (local rank 0, pid 4242) on vm outlived SIGKILL by 30 s: uninterruptible sleep
//   (state D) in the kernel function request_wait_answer (a hung file system such as NFS or FUSE,
//   or a driver call); ...
// `waited`: how long after SIGKILL. Pure.
std::string held_workers_report(const std::vector<HeldWorker>& held, const std::string& host,
                                std::chrono::milliseconds waited, int exit_code);

// One line for the other nodes (the reason of this node's self-exclusion): "worker rank 0 (pid
// 4242) outlived SIGKILL by 30 s in state D (wchan request_wait_answer); the host needs draining".
// Pure.
std::string held_workers_line(const std::vector<HeldWorker>& held, std::chrono::milliseconds waited);

}  // namespace ddp::launcher
