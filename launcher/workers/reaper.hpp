// The reaper: a tiny process the launcher starts first thing, whose only job is that nothing the
// workers started outlives the job, even when the launcher itself is killed with SIGKILL.
//
// It sits in its own process group (a Ctrl-C on the terminal does not reach it), ignores the
// stopping signals, holds no descriptor but its end of a socket pair with the launcher and the
// cgroup's, and reads messages (ReaperMessage) from it:
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
//
// Where it may, it runs on the launcher's memory (clone_shared.hpp), as a child started without
// waiting for its exec does: no page tables copied, and no copy-on-write fault for the launcher
// on each page it writes afterwards (a fork's cost, paid on the path to the first worker). So
// its body makes raw system calls only (raw_syscall.hpp: errno and the rest of the launcher
// thread's TLS untouched) and allocates nothing from the launcher's heap.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "common/job_cgroup.hpp"

namespace ddp::launcher {

struct ReaperMessage {
  char op = 0;  // 'W', 'E', 'N' or 'F'
  std::int32_t pgid = 0;
};

// What the reaper runs with: owned by the launcher and unchanged until the reaper has been
// reaped (it may read them on the launcher's memory, and after the launcher has died).
struct ReaperArgs {
  int socket = -1;                    // the reaper's end of the socket pair (SOCK_SEQPACKET)
  int launcher_end = -1;              // the launcher's end: the reaper closes its copy
  const JobCgroup* cgroup = nullptr;  // null: process groups only
  std::chrono::milliseconds grace{};
};

// The reaper's stack when it runs on the launcher's memory: a mapping of its own below a guard
// page. Unmapped by the destructor: destroy it only once the reaper has been reaped.
class ReaperStack {
 public:
  ReaperStack() = default;
  ~ReaperStack();
  ReaperStack(const ReaperStack&) = delete;
  ReaperStack& operator=(const ReaperStack&) = delete;
  // Maps it; false (errno set) when it cannot be mapped.
  bool map();
  char* base() const { return base_ + kGuard; }
  std::size_t size() const { return kSize; }

 private:
  static constexpr std::size_t kGuard = 4096;
  static constexpr std::size_t kSize = 128 * 1024;
  char* base_ = nullptr;
};

// Starts the reaper on this process's memory where the machine allows it (x86-64, not a
// sanitizer build, clone3, Linux 5.16 or later: before that a core dump of the launcher also
// killed every process sharing its memory), else as a fork. Returns its pid, or -1 with errno
// when neither worked. `args` and `stack` must stay until it has been reaped. Call it while the
// process has a single thread; blocks for the clone or fork only. Never throws.
pid_t start_reaper(const ReaperArgs& args, ReaperStack& stack);

// The reaper's body (start_reaper runs it in the child). Never returns.
[[noreturn]] void run_reaper(const ReaperArgs& args);

}  // namespace ddp::launcher
