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
#include <memory>
#include <optional>
#include <utility>
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

  // Starts a child (start_child; in a StartBatch, begin_child) and returns its index. Throws
  // StartError, the set unchanged; in a batch only for the fork itself, the later steps are
  // reported by StartBatch::finish().
  std::size_t start(ChildOptions options);

  // A child of a batch that could not start (StartBatch::finish): which one, and why.
  class StartFailed : public StartError {
   public:
    StartFailed(std::size_t index, const StartError& e) : StartError(e), index_(index) {}
    std::size_t index() const { return index_; }

   private:
    std::size_t index_;
  };

  // A group started at once (the launcher's workers of a round). While it lives, start():
  //   - resets in each child only the signals that have a handler now, looked up here once
  //     instead of in every child (64 system calls per child);
  //   - does not wait for each child's exec (begin_child): the next one is prepared meanwhile.
  // finish() then waits for every exec. Make it on the thread that installs this process's
  // handlers, and install none while it lives.
  class StartBatch {
   public:
    StartBatch(const StartBatch&) = delete;
    StartBatch& operator=(const StartBatch&) = delete;
    // Waits as finish() does (the children may still run on memory the set owns), not throwing.
    ~StartBatch();
    // Returns once every child started in the batch has exec'd. Throws StartFailed for the first
    // (by index) that could not; every such child is reaped (collect() never reports it).
    void finish();

   private:
    friend class ProcessSet;
    explicit StartBatch(ProcessSet& set);
    ProcessSet& set_;
  };
  [[nodiscard]] StartBatch batch() { return StartBatch(*this); }
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

  // Gives up on the children still running (the kernel holds them: state D after SIGKILL) and
  // returns their pids: collect() never reports them, signal_all() no longer reaches their groups
  // and the destructor does not wait for them; they stay this process's children (the pids are
  // not reused while it lives) and a subreaper's waitpid(-1) may reap them when they end.
  // Never blocks.
  std::vector<pid_t> abandon_running();

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
  // While a StartBatch lives: the handlers it noted, and the children whose exec it waits for.
  std::optional<sigset_t> noted_;
  std::vector<std::pair<std::size_t, std::unique_ptr<PendingChild>>> pending_;
};

}  // namespace ddp
