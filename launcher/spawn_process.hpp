// Starting one worker process, POSIX only: vfork + exec with the launcher's per-worker setup
// between them (own process group, death with the launcher, stdout/stderr on given pipes).
//
// Why not fork (or Boost.Process, which forks): fork copies the launcher's page tables and the
// child then takes copy-on-write faults until it execs; vfork shares the memory and suspends
// only the calling thread until the exec, which is what posix_spawn does. posix_spawn itself
// cannot set PR_SET_PDEATHSIG, hence this small replacement.
#pragma once

#include <sys/types.h>

namespace ddp::launcher {

struct SpawnRequest {
  const char* exe = nullptr;    // absolute or relative path, not searched in PATH
  char* const* argv = nullptr;  // null-terminated, argv[0] included
  char* const* envp = nullptr;  // null-terminated "K=V" strings: the child's whole environment
  int stdout_fd = -1;           // becomes the child's fd 1 (-1: inherit the launcher's)
  int stderr_fd = -1;           // becomes the child's fd 2
  long long open_files_limit = -1;  // >= 0: the child's soft RLIMIT_NOFILE (-1: inherited)
};

// Starts the child and returns its pid once it has exec'd. The child runs in its own process
// group (pgid = pid) and gets SIGKILL when the launcher's calling thread dies; it starts with
// default signal dispositions for the signals the launcher catches and the launcher's original
// signal mask. Blocks only for the vfork (microseconds). Throws std::system_error carrying the
// errno of the failed execve (e.g. ENOENT, EACCES, ENOEXEC), after reaping the child.
// Not thread-safe against other threads changing signal dispositions at the same moment.
pid_t spawn_process(const SpawnRequest& request);

}  // namespace ddp::launcher
