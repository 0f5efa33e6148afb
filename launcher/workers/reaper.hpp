// The reaper: a tiny process the launcher forks at start, whose only job is that nothing the
// workers started outlives the job, even when the launcher itself is killed with SIGKILL.
//
// It sits in its own process group (a Ctrl-C on the terminal does not reach it), ignores the
// stopping signals, holds no descriptor but its end of a socket pair with the launcher, and
// reads messages (ReaperMessage) from it:
//   'W' pgid  a worker's process group to watch;
//   'E' pgid  that worker exited (the launcher sent its group SIGTERM): SIGKILL what is left of
//             the group after the grace;
//   'N'       the job's cgroup is not used after all (a worker could not join it);
//   'F'       the job is over: SIGTERM everything left (watched groups and cgroup members),
//             wait until all are gone or the grace passed, then SIGKILL the rest.
// End of file without 'F' means the launcher died: SIGKILL everything at once. In both cases it
// then removes the job's cgroup (once empty, at most 5 s later) and exits.
// With a cgroup, "a group" means the cgroup's members in that process group (so a group number
// reused by an unrelated process is never hit) and cgroup.kill takes everything, processes that
// left their group included; without one, the reaper signals the process groups themselves.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>

#include "common/job_cgroup.hpp"

namespace ddp::launcher {

struct ReaperMessage {
  char op = 0;  // 'W', 'E', 'N' or 'F'
  std::int32_t pgid = 0;
};

// The reaper process's body, run in the child of a fork made while the launcher had a single
// thread. `socket` is its end (SOCK_SEQPACKET); `cgroup` may be null. Never returns.
[[noreturn]] void run_reaper(int socket, const JobCgroup* cgroup, std::chrono::milliseconds grace);

}  // namespace ddp::launcher
