// The children of one process, in the style of ninja's SubprocessSet: one set owns every child it
// started (each in its own process group, see child_process.hpp), signals them as a group and
// tells which have ended. It is passive: the owner's event loop calls collect() when SIGCHLD
// arrives (the launcher through an Asio signal_set, spawn() through its self-pipe), so the set
// neither blocks nor owns a thread.
//
// An ended child stays a zombie (seen with WNOWAIT) until reap(): its pid, which is also its
// process group's id, cannot be reused meanwhile, so signal_all() stays safe and still reaches
// whatever the child left running in its group.
//
// Optionally every child joins a cgroup (place_in_cgroup); if the first join fails, the set says
// so once at debug level and starts the rest without it (process groups only).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <vector>

#include "common/child_process.hpp"
#include "common/job_cgroup.hpp"

namespace ddp {

class ProcessSet {
 public:
  // How one child ended.
  struct Exit {
    std::size_t index = 0;  // as returned by start()
    pid_t pid = 0;
    int exit_code = 0;    // its code, or 128+N when signal N killed it (exit_codes.hpp)
    int term_signal = 0;  // N, or 0
  };

  ProcessSet() = default;
  // SIGKILLs every child's process group that is not reaped yet, then reaps them (they die at
  // once, so this blocks only briefly).
  ~ProcessSet();
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  // Starts a child (start_child) and returns its index. Throws StartError; the set is unchanged.
  std::size_t start(ChildOptions options);

  // For a group started at once: until the returned object goes, start() resets in each child
  // only the signals that have a handler now, looked up here once instead of in every child (64
  // system calls per child). Call it on the thread that installs this process's handlers; none may
  // be installed while it lives.
  class HandlersNoted {
   public:
    HandlersNoted(const HandlersNoted&) = delete;
    HandlersNoted& operator=(const HandlersNoted&) = delete;
    ~HandlersNoted() { set_.noted_.reset(); }

   private:
    friend class ProcessSet;
    explicit HandlersNoted(ProcessSet& set) : set_(set) { set_.noted_ = signals_with_handlers(); }
    ProcessSet& set_;
  };
  [[nodiscard]] HandlersNoted note_handlers() { return HandlersNoted(*this); }
  pid_t pid(std::size_t index) const { return children_.at(index).pid; }

  // Children started from now on are placed in `cgroup` (job_cgroup.hpp), which must outlive
  // the set.
  void place_in_cgroup(const JobCgroup& cgroup) {
    cgroup_fd_ = cgroup.dir_fd();
    cgroup_procs_fd_ = cgroup.procs_fd();
  }
  // Whether children still join that cgroup (false once a join failed).
  bool in_cgroup() const { return cgroup_fd_ >= 0; }

  // Whether `pid` is a child started by any ProcessSet of this process and not reaped yet: a
  // subreaper reaping its adopted orphans must leave these to their set. Thread-safe.
  static bool owns(pid_t pid);

  // Sends `signo` to the process group of every child not yet reaped, ended ones included (their
  // leftovers). Never blocks; a group already empty is skipped (ESRCH).
  void signal_all(int signo);
  // Sends `signo` to each child process that is still running, not to its group: for signals
  // meant for the program itself (SIGUSR1 for a checkpoint), which would kill helper processes
  // in the group that do not handle them. Never blocks.
  void signal_each(int signo);

  // The children that ended since the last call, without blocking. Call it whenever SIGCHLD
  // arrived (several exits may share one signal).
  std::vector<Exit> collect();

  // Children started and not yet returned by collect().
  std::size_t running() const;
  std::size_t size() const { return children_.size(); }

  // Reaps every child that collect() reported. Never blocks.
  void reap();

  // Not thread-safe: one thread (the owner's loop) uses the set.
 private:
  struct Child {
    pid_t pid = -1;
    bool ended = false;   // seen by collect()
    bool reaped = false;  // waited for; its pid may be reused now
  };
  std::vector<Child> children_;
  int cgroup_fd_ = -1;
  int cgroup_procs_fd_ = -1;
  std::optional<sigset_t> noted_;  // while a HandlersNoted lives
};

}  // namespace ddp
