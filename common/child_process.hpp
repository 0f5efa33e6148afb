// Starting one child process, checked at every step: vfork + exec with, between the two, the
// set-up every process we start needs (the launcher's workers and spawn()'s copies alike):
//   - its own process group (pgid = pid), so a signal to -pid reaches whatever it starts;
//     optionally its own session too (setsid: sid = pgid = pid, no controlling terminal), so
//     the scheduler's autogroups give it a share of its own (new_session);
//   - a parent-death signal, so it never outlives the thread that started it;
//   - every caught signal handler back to its default and an empty signal mask;
//   - optionally, the job's cgroup (it writes "0" to the cgroup.procs it is given, so it is in
//     the cgroup before it runs a line of its own: nothing it starts can escape cgroup.kill);
//   - stdout/stderr on the given descriptors, and every other descriptor above 2 closed except
//     those passed in keep_fds (close_descriptors.hpp), so it starts with stdin/stdout/stderr
//     only (Asio's sockets are not close-on-exec, and a worker holding the store's listener
//     would keep the port taken after the launcher died);
//   - optionally the soft RLIMIT_NOFILE the parent had before it raised its own;
//   - optionally a CPU affinity (--numa_binding), one sched_setaffinity with a mask built before.
// Why vfork: fork copies the parent's page tables and takes copy-on-write faults until exec;
// vfork suspends only the calling thread until the exec (what posix_spawn does internally), and
// posix_spawn cannot set PR_SET_PDEATHSIG. With a cgroup (cgroup_fd), the child is created in it
// by clone3(CLONE_VFORK | CLONE_INTO_CGROUP, Linux 5.7): a fork's page-table copy costs far less
// than the RCU grace period that a process's first move into a cgroup waits for; older kernels
// fall back to vfork and a write to cgroup.procs.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "ddplaunch/common/error.hpp"

namespace ddp {

struct ChildOptions {
  std::string exe;                  // path to execute (not searched in PATH)
  std::vector<std::string> argv;    // argv[0] included; empty means {exe}
  Environment env;                  // the child's whole environment
  int stdin_fd = -1;                // becomes the child's fd 0 (-1: inherit the parent's)
  int stdout_fd = -1;               // becomes the child's fd 1 (-1: inherit the parent's)
  int stderr_fd = -1;               // becomes the child's fd 2 (-1: inherit)
  long long open_files_limit = -1;  // >= 0: the child's soft RLIMIT_NOFILE (-1: inherited)
  int death_signal = SIGKILL;       // sent to the child when the starting thread dies
  std::vector<int> keep_fds;        // descriptors (> 2) the child keeps, same numbers
  int cgroup_fd = -1;               // >= 0: the job cgroup's directory, the child is created in it
  int cgroup_procs_fd = -1;         // its cgroup.procs: where clone3 cannot create the child in it (Linux
                                    // before 5.7), the child joins by writing "0" there before exec
  std::vector<int> cpus;            // non-empty: the child's CPU affinity (sched_setaffinity before exec)
  // true: setsid instead of setpgid, as torchrun's start_new_session. Where sched_autogroup is on
  // and the child is in no cgroup with the cpu controller, each session is one scheduling group:
  // the child gets a group's CPU share instead of sharing the parent's session's with its shell.
  bool new_session = false;
  // The signals that have a handler of ours, as signals_with_handlers() found them on the thread
  // that installs handlers, none installed since: the child resets only these to the default.
  // Null: the child looks at every signal (64 system calls in the child, before its exec).
  const sigset_t* caught_signals = nullptr;
};

// Every signal blocked in the calling thread while it lives, across a fork or clone: no handler
// of ours runs in a child (on our memory, or a copy of it) before the child has set its own
// dispositions. Never throws.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked();
  ~AllSignalsBlocked();
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// The signals whose disposition is a handler (neither SIG_DFL nor SIG_IGN): one sigaction read
// per signal. Never throws.
sigset_t signals_with_handlers();

// StartError::step() of a child the cgroup refused (either way of joining it).
inline constexpr const char* kCgroupStep = "cgroup.procs";

// The fix for a fork that failed with EAGAIN: one sentence naming RLIMIT_NPROC and its current
// value, e.g. "the process limit is reached (RLIMIT_NPROC = 4096 for this user, `ulimit -u`);
// raise it or start fewer processes". Never throws.
std::string process_limit_hint();

// A child could not be started. `step()` names the call that failed ("execve", "setpgid", "setsid",
// "cgroup.procs", ...) and `error_number()` its errno; the child was reaped before this was
// thrown. A vfork that failed with EAGAIN says so with process_limit_hint().
class StartError : public Error {
 public:
  StartError(const std::string& exe, const char* step, int error_number);
  const char* step() const { return step_; }
  // The fork itself failed with EAGAIN: the process limit (process_limit_hint() says which).
  bool process_limit() const;
  int error_number() const { return errno_; }

 private:
  const char* step_;
  int errno_;
};

// Starts the child and returns its pid once it has exec'd. Blocks only for the vfork
// (microseconds). Throws StartError (after reaping the child) when any step fails.
// Thread-safe with respect to other threads of the process: all signals are blocked in the
// calling thread across the vfork, and the child makes only system calls before exec.
pid_t start_child(const ChildOptions& options);

// A child started by begin_child: running, maybe not exec'd yet.
class PendingChild {
 public:
  // Waits as wait() does, without throwing: the child may still run on memory this owns.
  ~PendingChild();
  PendingChild(const PendingChild&) = delete;
  PendingChild& operator=(const PendingChild&) = delete;

  pid_t pid() const { return pid_; }
  // Returns once the child has exec'd. Throws StartError, the child reaped, when a step before
  // its exec failed (as start_child would have). Blocks for the exec (up to about a
  // millisecond); later calls return at once.
  void wait();

 private:
  friend std::unique_ptr<PendingChild> begin_child(const ChildOptions& options);
  PendingChild();
  struct State;                   // what the child reads, its stack, its report
  std::unique_ptr<State> state_;  // null once the child left our memory, or never on it
  pid_t pid_ = -1;
  bool waited_ = false;
};

// start_child without waiting for the exec, where the child can run beside us on our memory
// (x86-64, clone3, close_range; born in its cgroup by clone3, or given none: a child that joins its
// cgroup by writing cgroup.procs is start_child's): the caller prepares and starts the next child
// while this one execs, and calls wait() before relying on it. On two cores this takes
// most of the exec's wait (100-800 microseconds per worker) off the spawn loop. Elsewhere it is
// start_child, and the child has exec'd on return. Throws StartError when the child cannot be
// created (the fork's own errors: the process limit, a cgroup that refuses it); the steps after
// that are reported by wait(). The child makes only raw system calls (raw_syscall.hpp): it
// shares the calling thread's TLS, so errno stays ours. Thread-safe as start_child is.
std::unique_ptr<PendingChild> begin_child(const ChildOptions& options);

}  // namespace ddp
